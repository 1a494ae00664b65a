"""Kubernetes objects of a small offhours pool, as the API returns them (JSON dicts), and builders for them.

The scenario `lending_pool` (times are offsets from NOW):
- service `chat`: baseline 10, required 6, 2 lent (state ConfigMap), Deployment at 8 replicas, 8 ready, 4 GPUs/replica;
- `train-a`: admitted 2 replicas of chat, running, last checkpoint 10 min ago;
- `sweep-b`: parked, 4 replicas, no reason written by the gate (computed: 2 lendable, needs 4, first in queue);
- `eval-c`: parked, 1 replica, reason and position written by the gate (second in the queue);
- run `rl-d`: `rl-d-x7` preempted (3600 GPU-s used) and its parked copy `rl-d-x7-p1` (waiting, third);
- `sft-e`: succeeded with 7200 GPU-seconds;
- service `code`: state ConfigMap whose state.json is not JSON (a broken gate write).
"""

import json
from datetime import datetime, timedelta, timezone
from typing import Any

NOW = datetime(2025, 3, 14, 12, 0, 0, tzinfo=timezone.utc)
SERVING, RESEARCH = "serving", "research"


def ts(minutes_ago: float) -> str:
    return (NOW - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def state_configmap(service: str, state: dict[str, Any] | str, namespace: str = SERVING) -> dict[str, Any]:
    text = state if isinstance(state, str) else json.dumps(state)
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"offhours-state-{service}", "namespace": namespace}, "data": {"state.json": text}}


def deployment(service: str, replicas: int, ready: int, gpus: int = 4, uid: str | None = None,
               namespace: str = SERVING) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": f"vllm-{service}", "namespace": namespace, "uid": uid or f"uid-{service}",
                         "labels": {"offhours.io/service": service}},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [
                {"name": "vllm", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}},
            "status": {"replicas": replicas, "readyReplicas": ready}}


def workflow(name: str, service: str, replicas: int, state: str, phase: str = "", created: float = 60,
             run_id: str | None = None, annotations: dict[str, str] | None = None, suspend: bool = False,
             gpu_seconds: int | None = None, started: float | None = None, finished: float | None = None,
             labels: dict[str, str] | None = None, shutdown: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase} if phase else {}
    if started is not None:
        status["startedAt"] = ts(started)
    if finished is not None:
        status["finishedAt"] = ts(finished)
    if gpu_seconds is not None:
        status["resourcesDuration"] = {"cpu": 10, "nvidia.com/gpu": gpu_seconds}
    spec: dict[str, Any] = {"workflowTemplateRef": {"name": "offhours-job"}}
    if suspend:
        spec["suspend"] = True
    if shutdown:
        spec["shutdown"] = shutdown
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
            "metadata": {"name": name, "namespace": RESEARCH, "uid": f"uid-{name}", "creationTimestamp": ts(created),
                         "labels": {"offhours.io/service": service, "offhours.io/replicas": str(replicas),
                                    "offhours.io/state": state, "offhours.io/run-id": run_id or name,
                                    "offhours.io/managed": "true", **(labels or {})},
                         "annotations": annotations or {}},
            "spec": spec, "status": status}


def chat_state(baseline: int = 10, required: int = 6, lent: int = 2, failed_ticks: int = 0) -> dict[str, Any]:
    return {"deploymentUID": "uid-chat", "baseline": baseline, "applied": baseline - lent, "recommendations": [],
            "failedTicks": failed_ticks, "samples": {},
            "lastDecision": {"at": ts(1), "action": "hold", "required": required, "lent": lent, "target": lent,
                             "reason": "load steady"}}


def lending_pool() -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(configmaps, deployments, workflows) of the scenario in the module docstring."""
    configmaps = [state_configmap("chat", chat_state()), state_configmap("code", "{not json"),
                  {"metadata": {"name": "unrelated"}, "data": {"x": "y"}}]
    deployments = [deployment("chat", 8, 8), deployment("code", 3, 2, gpus=2)]
    workflows = [
        workflow("train-a", "chat", 2, "admitted", "Running", created=120, started=110,
                 annotations={"offhours.io/admitted-at": ts(110), "offhours.io/last-checkpoint": ts(10)}),
        workflow("sweep-b", "chat", 4, "parked", created=50, suspend=True),
        workflow("eval-c", "chat", 1, "parked", created=40, suspend=True,
                 annotations={"offhours.io/waiting-reason": "waiting: the lending window opens at 20:00",
                              "offhours.io/queue-position": "2"}),
        workflow("rl-d-x7", "chat", 2, "preempted", "Failed", created=300, run_id="rl-d", started=290, finished=30,
                 gpu_seconds=3600, shutdown="Stop",
                 annotations={"offhours.io/admitted-at": ts(290), "offhours.io/preempted-at": ts(31),
                              "offhours.io/last-checkpoint": ts(45), "offhours.io/gpu-seconds": "3600"}),
        workflow("rl-d-x7-p1", "chat", 2, "parked", created=30, run_id="rl-d", suspend=True,
                 labels={"offhours.io/copy-of": "uid-rl-d-x7"},
                 annotations={"offhours.io/preemptions": "1", "offhours.io/parked-from": "rl-d-x7",
                              "offhours.io/last-checkpoint": ts(45)}),
        workflow("sft-e", "chat", 1, "returned", "Succeeded", created=600, started=590, finished=400, gpu_seconds=7200,
                 annotations={"offhours.io/admitted-at": ts(590), "offhours.io/returned-at": ts(399)},
                 labels={"workflows.argoproj.io/creator": "ada"}),
    ]
    return configmaps, deployments, workflows
