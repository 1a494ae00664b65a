"""offhours package."""
