"""offhours: lend idle LLM-inference GPUs to research jobs, give them back when traffic returns."""

__version__ = "0.1.0"
