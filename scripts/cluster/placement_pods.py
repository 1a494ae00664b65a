"""Read what placement needs from Kubernetes objects: nodes' GPUs, labels and taints; pods' GPUs and node.

Pure decoders of the typed client's objects (kube.py reads them, the tests build them), into the policy's
placement types. A value that cannot be read as a count counts as none: a pod's GPUs only ever make a node
look fuller, never emptier, when they are read at all.
"""

from datetime import datetime
from typing import Any

from offhours.scripts.names import ANNOTATION_DELETION_COST, GPU_RESOURCE
from offhours.scripts.policy.placement import Node, Replica, Taint, Toleration

ENDED_PHASES = ("Succeeded", "Failed")


def _count(value: Any) -> int:
    text = str(value).strip() if value is not None else ""
    return int(text) if text.isdigit() else 0


def _container_gpus(container: Any) -> int:
    resources = getattr(container, "resources", None)
    requests = dict(getattr(resources, "requests", None) or {})
    limits = dict(getattr(resources, "limits", None) or {})
    # An extended resource's request defaults to its limit; both are set equal when both are set.
    return _count(requests.get(GPU_RESOURCE, limits.get(GPU_RESOURCE)))


def pod_gpus(pod: Any) -> int:
    """Return the GPUs a pod holds as the scheduler counts them: its containers' sum, or its largest init container's."""
    spec = pod.spec
    main = sum(_container_gpus(c) for c in (spec.containers or []))
    init = max((_container_gpus(c) for c in (getattr(spec, "init_containers", None) or [])), default=0)
    return max(main, init)


def holds_gpus(pod: Any) -> bool:
    """Whether a pod is bound to a node and has not ended (it holds what it requests there)."""
    return bool(pod.spec.node_name) and (pod.status is None or pod.status.phase not in ENDED_PHASES)


def deletion_cost(pod: Any) -> int | None:
    """Return the pod's `controller.kubernetes.io/pod-deletion-cost`, or None when unset or not an int32."""
    text = str((pod.metadata.annotations or {}).get(ANNOTATION_DELETION_COST, "")).strip()
    try:
        value = int(text)
    except ValueError:
        return None
    return value if -(2 ** 31) <= value < 2 ** 31 else None


def replica(pod: Any, service: str) -> Replica:
    """Return a serving pod as placement sees it."""
    return Replica(pod.metadata.name, service, pod.spec.node_name, pod_gpus(pod))


def node(obj: Any) -> Node:
    """Return a node's allocatable GPUs, labels and scheduling taints (an unschedulable node offers none)."""
    allocatable = dict(getattr(obj.status, "allocatable", None) or getattr(obj.status, "capacity", None) or {})
    gpus = min(_count(allocatable.get(GPU_RESOURCE)), 1024)
    if getattr(obj.spec, "unschedulable", False):
        gpus = 0
    taints = tuple(Taint(t.key, t.value or "", t.effect) for t in (obj.spec.taints or [])
                   if t.effect in ("NoSchedule", "NoExecute"))
    return Node(obj.metadata.name, gpus, tuple(sorted((obj.metadata.labels or {}).items())), taints)


def toleration(raw: Any) -> Toleration:
    """Return a toleration from a pod spec's (dict or typed) entry."""
    get = raw.get if isinstance(raw, dict) else (lambda k, d=None: getattr(raw, k, d))
    return Toleration(get("key") or "", get("operator") or "Equal", get("value") or "", get("effect") or "")


def unschedulable_since(pod: Any) -> tuple[float, str] | None:
    """When the scheduler last found no node for a pending pod (API server time), and its message; else None."""
    if pod.spec.node_name or (pod.status is not None and pod.status.phase != "Pending"):
        return None
    for cond in (pod.status.conditions or []) if pod.status is not None else []:
        if cond.type == "PodScheduled" and cond.status == "False" and cond.reason == "Unschedulable":
            at = cond.last_transition_time
            since = at.timestamp() if isinstance(at, datetime) else None
            if since is None:
                return None
            return since, str(cond.message or "")[:300]
    return None
