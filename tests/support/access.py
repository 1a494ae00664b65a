"""Access reviews for CLI and console tests, answered from modelled RBAC (the in-memory cluster's grants).

`may_all()`: a researcher granted every action on workflows and pod logs in every namespace, for tests
that are about something else than whose job is touched; the resolver's own tests grant per namespace.
"""

from offhours.scripts.cluster.access import ModelledAccess
from offhours.scripts.cluster.memory import MemoryCluster
from offhours.scripts.names import ARGO_GROUP


def may_all(user: str = "researcher") -> ModelledAccess:
    """Return the access of `user`, who may do everything to workflows and read pod logs in every namespace."""
    cluster = MemoryCluster()
    cluster.grant(user, "*", "workflows", ["*"], ARGO_GROUP)
    cluster.grant(user, "*", "pods", ["get"], "", "log")
    return cluster.access_for(user)
