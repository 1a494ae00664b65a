"""`offhours return-gpus`: the program of the `return-gpus` exit template.

When a research workflow ends for any reason, give its replicas back to the service at once
and record the GPU-seconds it used. The target is recomputed from the objects (baseline minus
what the *other* admitted workflows hold), so the hook is idempotent and safe to race with the
gate: both compute the same number, and the Lease serialises their writes. It never scales a
service down: lending is the gate's decision alone.
"""

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from offhours.scripts.cluster.base import (
    ANNOTATION_GPU_SECONDS,
    LABEL_STATE,
    STATE_RETURNED,
    Cluster,
    ClusterError,
)
from offhours.scripts.policy.plan import ADMITTED


@dataclass(frozen=True)
class Returned:
    """What the hook did."""

    workflow: str
    service: str
    scaled_to: int | None
    gpu_seconds: float | None


def gpu_seconds(workflow: dict[str, Any]) -> float | None:
    """Return the `nvidia.com/gpu` seconds Argo recorded in `status.resourcesDuration`, if any."""
    durations = (workflow.get("status") or {}).get("resourcesDuration") or {}
    value = durations.get("nvidia.com/gpu")
    return float(value) if value is not None else None


def failed_nodes(failures: str) -> list[dict[str, Any]]:
    """Decode `{{workflow.failures}}` (a JSON list, sometimes JSON-quoted once more, or null)."""
    value: Any = failures
    for _ in range(2):
        if not isinstance(value, str):
            break
        try:
            value = json.loads(value) if value.strip() else None
        except ValueError:
            return []
    return [n for n in value if isinstance(n, dict)] if isinstance(value, list) else []


def return_gpus(
    cluster: Cluster,
    *,
    namespace: str,
    workflow_namespace: str,
    workflow_name: str,
    service: str,
    status: str,
    failures: str = "[]",
    deployment: str | None = None,
    lease_wait_seconds: float = 120.0,
    sleep: Callable[[float], None] = time.sleep,
    holder: str = "exit-hook",
    out: TextIO = sys.stdout,
) -> Returned:
    """Give `workflow_name`'s replicas back to `service`; return what was done."""
    waited = 0.0
    while not cluster.acquire_lease(namespace, f"{holder}/{workflow_name}", 60):
        if waited >= lease_wait_seconds:
            raise ClusterError(f"the offhours lease stayed taken for {lease_wait_seconds:.0f} s")
        sleep(2.0)
        waited += 2.0
    try:
        wf = cluster.workflow(workflow_namespace, workflow_name)
        used = gpu_seconds(wf) if wf else None
        annotations = {ANNOTATION_GPU_SECONDS: f"{used:.0f}"} if used is not None else {}
        if wf is not None:
            # Marked first: from here on no actor counts this workflow's replicas as lent.
            cluster.annotate_workflow(workflow_namespace, workflow_name, annotations, {LABEL_STATE: STATE_RETURNED})
        dep = cluster.deployment(namespace, service, deployment)
        others = [j for j in cluster.jobs(workflow_namespace, service) if j.state == ADMITTED and j.name != workflow_name]
        baseline = dep.baseline if dep.baseline is not None else dep.replicas
        target = baseline - sum(j.replicas for j in others)
        scaled_to = None
        if dep.replicas < target:
            cluster.scale(dep, target)
            scaled_to = target
        gpu_text = f"{used:.0f} GPU-seconds" if used is not None else "GPU-seconds not recorded"
        message = (f"workflow {workflow_name} ended {status}; {gpu_text}; "
                   f"{service} at {scaled_to if scaled_to is not None else dep.replicas} of baseline {baseline} replicas")
        failed = failed_nodes(failures)
        if failed:
            message += f"; {len(failed)} failed node(s): " + ", ".join(str(n.get("displayName", "?")) for n in failed[:5])
        cluster.record_event(namespace, "Deployment", dep.name, "GPUsReturned", message)
        print(message, file=out)
        return Returned(workflow_name, service, scaled_to, used)
    finally:
        cluster.release_lease(namespace, f"{holder}/{workflow_name}")
