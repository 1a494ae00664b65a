"""The backstop: serving gets its baseline back when no gate tick renewed a service's lending in time."""
