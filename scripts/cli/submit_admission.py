"""Submit-time refusal: the gate's own admission checks (scripts/cluster/never_admitted.py, shared with the console)."""

from offhours.scripts.cluster.never_admitted import never_admitted

__all__ = ["never_admitted"]
