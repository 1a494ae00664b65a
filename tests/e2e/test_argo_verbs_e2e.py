"""End to end: Argo's own verbs on a preempted workflow, and the Lease judged with a skewed holder clock.

Real: API server, Argo controller (it runs the retried and the resubmitted workflow again), the gate
with the gate ServiceAccount's token. Stand-ins: kwok nodes, emulated vLLM. `argo retry` and `argo
resubmit` are applied as Argo's server applies them (the CLI only asks the server): retry updates the
ended workflow (shutdown cleared, phase Running, labels as they were); resubmit creates a new workflow
from its spec with its labels and annotations.
"""

import copy
import time
from datetime import datetime, timedelta, timezone
from typing import Any

from kubernetes import client

from offhours.scripts.cluster.kube import KubeCluster

from .conftest import RESEARCH, SERVING, wait
from .test_gate_controller_e2e import lend_one
from .test_gate_e2e import _tick, gate_setup  # noqa: F401 - gate_setup is a fixture used here
from .test_pipeline_e2e import GROUP, VERSION

FINISHED = ("Succeeded", "Failed", "Error")


def get(api: client.ApiClient, name: str) -> dict[str, Any]:
    return dict(client.CustomObjectsApi(api).get_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", name))


def retry(api: client.ApiClient, name: str) -> None:
    """What `argo retry` does to an ended workflow: run it again, shutdown cleared, labels kept."""
    wf = get(api, name)
    wf["spec"].pop("shutdown", None)
    labels = wf["metadata"]["labels"]
    for key in ("workflows.argoproj.io/completed", "workflows.argoproj.io/phase"):
        labels.pop(key, None)
    wf["status"] = {"phase": "Running", "startedAt": wf["status"].get("startedAt")}
    client.CustomObjectsApi(api).replace_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", name, wf)


def resubmit(api: client.ApiClient, name: str) -> str:
    """What `argo resubmit` does: a new workflow from the spec (shutdown cleared), its labels and annotations."""
    old = get(api, name)
    meta = old["metadata"]
    labels = {k: v for k, v in meta["labels"].items() if not k.startswith("workflows.argoproj.io/")}
    labels["workflows.argoproj.io/resubmitted-from-workflow"] = name
    spec = copy.deepcopy(old["spec"])
    spec.pop("shutdown", None)
    new = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Workflow",
           "metadata": {"generateName": f"{name}-", "namespace": RESEARCH, "labels": labels,
                        "annotations": dict(meta.get("annotations") or {})}, "spec": spec}
    made = client.CustomObjectsApi(api).create_namespaced_custom_object(GROUP, VERSION, RESEARCH, "workflows", new)
    return str(made["metadata"]["name"])


def test_a_retried_and_a_resubmitted_preempted_workflow_are_stopped_at_the_next_reclaim(
        api: client.ApiClient, gate_setup: dict[str, Any]) -> None:  # noqa: F811
    apps = client.AppsV1Api(api)
    lend_one(api, gate_setup, "research-v")
    gate_setup["load"].rps = 150.0  # every replica needed: the job is stopped and parked again
    out = _tick(gate_setup)
    assert out.decision.action == "reclaim" and apps.read_namespaced_deployment("chat", SERVING).spec.replicas == 16
    assert get(api, "research-v")["metadata"]["labels"]["offhours.io/state"] == "preempted"
    wait("Argo to end the stopped workflow", lambda: get(api, "research-v").get("status", {}).get("phase") in FINISHED,
         timeout=90)
    again = resubmit(api, "research-v")
    retry(api, "research-v")
    wait("Argo to run both again", lambda: all(get(api, n).get("status", {}).get("phase") == "Running"
                                               for n in ("research-v", again)), timeout=60)
    out = _tick(gate_setup)
    log = gate_setup["log"].getvalue()
    for name in ("research-v", again):
        wf = get(api, name)
        assert wf["spec"].get("shutdown") == "Stop", f"{name} still runs:\n{log}"
    notes = " ".join(out.plan.notes)
    # The gate's record says research-v-p1, its waiting copy, carries the run: both reruns are duplicates of it,
    # stopped without another copy.
    for name in ("research-v", again):
        assert f"{name} runs run research-v that another workflow carries: stopped, not parked again" in notes, log
    copies = [wf["metadata"]["name"] for wf in client.CustomObjectsApi(api).list_namespaced_custom_object(
        GROUP, VERSION, RESEARCH, "workflows")["items"] if wf["metadata"]["labels"].get("offhours.io/state") == "parked"]
    assert copies == ["research-v-p1"], copies  # its one copy; the reruns made none
    assert apps.read_namespaced_deployment("chat", SERVING).spec.replicas == 16
    assert out.decision.lent == 0  # the reruns were never counted as lent: the resubmitted one carries the mark


def test_a_live_lease_is_not_taken_when_the_holders_clock_runs_behind(
        api: client.ApiClient, gate_setup: dict[str, Any]) -> None:  # noqa: F811
    coordination = client.CoordinationV1Api(api)
    coordination.delete_namespaced_lease("offhours-gate", SERVING)
    skew = timedelta(minutes=2)  # the holder's clock is 2 minutes behind ours: its renewTime looks 2 minutes old
    body = client.V1Lease(metadata=client.V1ObjectMeta(name="offhours-gate"), spec=client.V1LeaseSpec(
        holder_identity="gate/skewed", lease_duration_seconds=4, acquire_time=datetime.now(timezone.utc) - skew,
        renew_time=datetime.now(timezone.utc) - skew))
    coordination.create_namespaced_lease(SERVING, body)
    ours = KubeCluster(gate_setup["gate_api"])
    try:
        for _ in range(4):  # the holder renews every 2 s, on its own clock
            assert not ours.acquire_lease(SERVING, "gate/ours", 30)
            time.sleep(2)
            lease = coordination.read_namespaced_lease("offhours-gate", SERVING)
            lease.spec.renew_time = datetime.now(timezone.utc) - skew
            coordination.replace_namespaced_lease("offhours-gate", SERVING, lease)
        assert not ours.acquire_lease(SERVING, "gate/ours", 30)  # then it dies: the record stops changing
        time.sleep(5)  # more than its 4 s on our clock
        assert ours.acquire_lease(SERVING, "gate/ours", 30)
    finally:
        ours.release_lease(SERVING, "gate/ours")
