"""The local pod runner of the e2e tier: scripts/controlplane/podrunner.py (the daemon of `make cluster-up`)."""

from offhours.scripts.controlplane.podrunner import LocalPodRunner, Ran

__all__ = ["LocalPodRunner", "Ran"]
