"""Reach the cluster a verb talks to: the cluster layer's connection (offhours.scripts.cluster.connection).

Kept as the CLI's one name for it, so every verb connects through the same function (and a test can
replace it in one place); only scripts/cluster talks to the Kubernetes client (.importlinter).
"""

from offhours.scripts.cluster.connection import (
    HOW_TO_GET_ONE,
    PROBE_TIMEOUT_SECONDS,
    KubeconfigError,
    NoCluster,
    connect,
    kubeconfig_path,
)

__all__ = ["HOW_TO_GET_ONE", "PROBE_TIMEOUT_SECONDS", "KubeconfigError", "NoCluster", "connect", "kubeconfig_path"]
