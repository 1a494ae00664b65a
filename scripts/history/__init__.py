"""A service's load history from Prometheus: per-step counter increases, pods, saturation; read-only."""
