"""The web console (Flask) and `/metrics`, over the read model; `offhours console` starts it."""
