"""The `offhours-best-effort` PriorityClass of research pods."""

from typing import Any

from offhours.scripts.names import LABEL_MANAGED, PRIORITY_CLASS
from offhours.scripts.policy.boundary import BEST_EFFORT_PRIORITY

VALUE = BEST_EFFORT_PRIORITY
"""Below every serving class and below the default priority 0 of pods without a class (the admission policy's cap)."""


def priority_class() -> dict[str, Any]:
    """Return the PriorityClass manifest: low value, never preempts other pods."""
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": PRIORITY_CLASS, "labels": {LABEL_MANAGED: "true"}},
        "value": VALUE,
        "preemptionPolicy": "Never",
        "globalDefault": False,
        "description": (
            "offhours research pods on borrowed inference GPUs: the scheduler evicts them first "
            "when serving needs the GPUs back, and they never preempt anything."
        ),
    }
