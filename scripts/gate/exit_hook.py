"""`offhours return-gpus`: the program of the `return-gpus` exit template.

When a research workflow ends for any reason, it marks the workflow as having returned its
replicas (label `offhours.io/state=returned`, annotation `offhours.io/returned-at`) and records
the GPU-seconds Argo measured. From that moment no actor counts the workflow's replicas as lent,
and the gate, which watches the workflows, scales serving back within seconds.

The hook has no right on serving on purpose: it runs in the research namespace, where any
ServiceAccount can be used by a research pod, so it must not be able to change a serving
Deployment: a research job could then scale serving itself. For the same reason it records no
Event on serving (scripts/names.py lists the reasons the gate records). A stop for reclaim stays counted as
a preemption: a `preempted` state is kept, only the return time is added.
"""

import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, TextIO

from offhours.scripts.cluster.base import Cluster, ClusterError
from offhours.scripts.gate.log import Logger
from offhours.scripts.names import (
    ANNOTATION_GPU_SECONDS,
    ANNOTATION_RETURNED_AT,
    GPU_RESOURCE,
    LABEL_SERVICE,
    LABEL_STATE,
    STATE_PREEMPTED,
    STATE_RETURNED,
)


@dataclass(frozen=True)
class Returned:
    """What the hook did."""

    workflow: str
    service: str
    state: str  # the state label left on the workflow: returned, or preempted if it was stopped for reclaim
    gpu_seconds: float | None


def gpu_seconds(workflow: dict[str, Any]) -> float | None:
    """Return the `nvidia.com/gpu` seconds Argo recorded in `status.resourcesDuration`, if any (and sane)."""
    status = workflow.get("status")
    durations = status.get("resourcesDuration") if isinstance(status, dict) else None
    value = durations.get(GPU_RESOURCE) if isinstance(durations, dict) else None
    try:
        seconds = float(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None
    return seconds if seconds is not None and math.isfinite(seconds) and seconds >= 0 else None


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
    workflow_namespace: str,
    workflow_name: str,
    status: str,
    failures: str = "[]",
    clock: Callable[[], float] = time.time,
    out: TextIO = sys.stdout,
) -> Returned:
    """Mark `workflow_name` as having returned its replicas; return what was done. Idempotent."""
    wf = cluster.workflow(workflow_namespace, workflow_name)
    if wf is None:
        raise ClusterError(f"workflow {workflow_namespace}/{workflow_name} not found")
    meta = wf.get("metadata") or {}
    labels = meta.get("labels") or {}
    used = gpu_seconds(wf)
    annotations = {ANNOTATION_RETURNED_AT: datetime.fromtimestamp(clock(), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    if used is not None:
        annotations[ANNOTATION_GPU_SECONDS] = f"{used:.0f}"
    # A stop for reclaim stays a preemption (it is counted as one); anything else is a return.
    state = STATE_PREEMPTED if labels.get(LABEL_STATE) == STATE_PREEMPTED else STATE_RETURNED
    cluster.annotate_workflow(workflow_namespace, workflow_name, annotations, {LABEL_STATE: state})
    service = str(labels.get(LABEL_SERVICE, ""))
    gpu_text = f"{used:.0f} GPU-seconds" if used is not None else "GPU-seconds not recorded"
    message = f"workflow {workflow_name} ended {status} ({state}); {gpu_text}; {service or 'its service'} gets its replicas back"
    failed = failed_nodes(failures)
    if failed:
        message += f"; {len(failed)} failed node(s): " + ", ".join(str(n.get("displayName", "?")) for n in failed[:5])
    Logger(out).info(message, service or None, workflow=workflow_name)
    return Returned(workflow_name, service, state, used)
