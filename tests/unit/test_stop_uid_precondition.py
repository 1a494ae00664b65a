"""A stop is of the workflow the tick listed: one deleted and made again under its name since is never stopped.

The gate lists a service's workflows, decides, then stops a victim by name. A workflow deleted and created again
under that name in between (a tenant's `argo delete` and `argo submit --name`, or a GitOps sync) is another
workflow: the patch by name alone stopped it (and marked it preempted), and what the tick decided of the listed
one was done to a workflow it never read. The stop carries the listed UID: the API server refuses the patch
of any other (as it refuses the kubelet's status patch of a pod made again under its name).
"""

import copy
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from offhours.scripts.cluster.base import ClusterError
from offhours.scripts.cluster.kube import KubeCluster
from offhours.scripts.policy.plan import ADMITTED, Job

from .test_gate_controller import World
from .test_kube_admit_guard import _merge

FULL = 100.0  # requests per second: every replica needed


class Remade:
    """The API server's workflows by name; a patch whose metadata.uid is not the object's is refused (409)."""

    def __init__(self) -> None:
        self.wf: dict[str, Any] = {"metadata": {"name": "job", "uid": "uid-new", "labels": {"offhours.io/state": "parked"},
                                                "annotations": {}}, "spec": {"suspend": True}}
        self.patches = 0

    def patch_namespaced_custom_object(self, *args: Any) -> dict[str, Any]:
        self.patches += 1
        body = args[-1]
        uid = (body.get("metadata") or {}).get("uid")
        if uid is not None and uid != self.wf["metadata"]["uid"]:
            raise ApiException(status=409, reason="Conflict: Precondition failed: UID in precondition")
        _merge(self.wf, copy.deepcopy(body))
        return self.wf


def test_the_kubernetes_stop_of_a_workflow_made_again_under_its_name_is_refused_once_and_changes_nothing() -> None:
    """Fault: the stop patched by name: the workflow made again under the victim's name was stopped in its place."""
    server = Remade()
    cluster = KubeCluster(client.ApiClient(client.Configuration()), sleep=lambda _s: None)
    cluster.custom = server
    with pytest.raises(ClusterError, match="stop workflow research/job"):
        cluster.stop("research", Job(name="job", service="chat", replicas=1, state=ADMITTED, uid="uid-listed"))
    assert server.patches == 1  # a UID that is not the object's stays so: no retry spends the tick's time
    assert server.wf["spec"] == {"suspend": True} and server.wf["metadata"]["labels"]["offhours.io/state"] == "parked"
    cluster.stop("research", Job(name="job", service="chat", replicas=1, state=ADMITTED, uid="uid-new"))
    assert server.wf["spec"].get("shutdown") == "Stop" and server.wf["metadata"]["uid"] == "uid-new"


def test_a_reclaim_whose_victim_was_made_again_under_its_name_raises_serving_and_leaves_the_new_one_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault, through the gate: the workflow listed as a victim (its status says its work is done, so it is stopped
    without a copy) was deleted and made again under its name before the stop: the new one was stopped and marked
    preempted. What survives: serving's raise, and the next tick's decision on the workflow it lists then."""
    w = World()
    w.lend(1)
    w.wf("job-0")["status"]["nodes"] = {"job-0": {"name": "job-0", "phase": "Succeeded"}}  # only cancelled: no copy
    listed = w.cluster.jobs

    def list_then_remake(namespace: str, service: str) -> list[Job]:
        jobs = listed(namespace, service)
        if service == "chat" and any(j.name == "job-0" for j in jobs):
            w.cluster.workflows.pop(("research", "job-0"))
            w.park("job-0", replicas=2)  # a new workflow, parked, under the victim's name
        return jobs

    monkeypatch.setattr(w.cluster, "jobs", list_then_remake)
    out = w.tick(chat=FULL)["chat"]
    assert out.plan is not None and [j.name for j in out.plan.cancel] == ["job-0"]
    assert w.replicas() == 8, w.log.getvalue()  # serving first, whatever the stop met
    assert "another workflow now" in (out.error or ""), out.error
    assert w.state("job-0") == "parked" and not w.wf("job-0")["spec"].get("shutdown")
    monkeypatch.setattr(w.cluster, "jobs", listed)
    w.tick(chat=FULL)
    assert w.state("job-0") == "parked" and w.replicas() == 8 and w.record().lent == 0
