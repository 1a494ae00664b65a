"""KubeCluster.admit and adopt: the workflow's own grace read again on the object the guarded write is computed from.

The tick lists the workflows and checks their own grace (a podSpecPatch...) there; the admission reads the
workflow again to cap its grace parameter and guards its resume by that read's resourceVersion. A tenant's
edit between the list and that read is in the read, so it is what must be checked: the guard only covers
what comes after it.
"""

import copy
from typing import Any

import pytest
from kubernetes import client

from offhours.scripts.cluster.base import ClusterError
from offhours.scripts.cluster.kube import KubeCluster
from offhours.scripts.cluster.workflow import GRACE_PARAMETER
from offhours.scripts.names import LABEL_STATE
from offhours.scripts.policy.plan import PARKED, UNMANAGED, Job

from .test_kube_admit_guard import _merge

REFS = ("offhours-job",)  # what the tick's list saw it refer to


class Edited:
    """One workflow of the offhours template, as listed; the tenant added a day's podSpecPatch since the list."""

    def __init__(self, patch: str | None, suspended: bool = True) -> None:
        self.wf: dict[str, Any] = {
            "metadata": {"name": "job", "resourceVersion": "6", "labels": {}, "annotations": {}},
            "spec": {"workflowTemplateRef": {"name": "offhours-job"},
                     "arguments": {"parameters": [{"name": GRACE_PARAMETER, "value": "20"}]},
                     **({"suspend": True} if suspended else {}), **({"podSpecPatch": patch} if patch else {})}}

    def get_namespaced_custom_object(self, *_args: Any) -> dict[str, Any]:
        return copy.deepcopy(self.wf)

    def patch_namespaced_custom_object(self, *args: Any) -> dict[str, Any]:
        _merge(self.wf, args[-1])
        return self.wf


def _cluster(server: Edited) -> KubeCluster:
    cluster = KubeCluster(client.ApiClient(client.Configuration()), retries=0)
    cluster.custom = server
    return cluster


def test_a_days_patch_added_after_the_list_is_never_resumed() -> None:
    """The fault: the tick's list had no patch, the admission's own read has one: resumed with a day's grace."""
    server = Edited('{"terminationGracePeriodSeconds": 86400}')
    with pytest.raises(ClusterError, match="grace"):
        _cluster(server).admit("research", Job(name="job", service="chat", replicas=1, state=PARKED, template_refs=REFS), "uid",
                               max_grace_seconds=30)
    assert server.wf["spec"].get("suspend") is True, server.wf


def test_a_days_patch_added_after_the_list_is_never_adopted() -> None:
    """The fault: a running workflow marked admitted (lent replicas) although its pods now take a day to stop."""
    server = Edited('{"terminationGracePeriodSeconds": 86400}', suspended=False)
    with pytest.raises(ClusterError, match="grace"):
        _cluster(server).adopt("research", Job(name="job", service="chat", replicas=1, state=UNMANAGED,
                                               template_refs=REFS), "uid", max_grace_seconds=30)
    assert LABEL_STATE not in server.wf["metadata"]["labels"], server.wf


def test_a_template_reference_changed_after_the_list_is_never_resumed() -> None:
    """The fault: the tick judged the templates the listed workflow ran; the admission's read runs another one."""
    server = Edited(None)
    server.wf["spec"]["workflowTemplateRef"] = {"name": "long-stop"}  # a day's grace, never judged by the tick
    with pytest.raises(ClusterError, match="WorkflowTemplates it refers to changed"):
        _cluster(server).admit("research", Job(name="job", service="chat", replicas=1, state=PARKED,
                                               template_refs=REFS), "uid", max_grace_seconds=30)
    assert server.wf["spec"].get("suspend") is True, server.wf


def test_a_workflow_still_within_the_cap_is_resumed() -> None:
    """No false refusal: a patch within the cap, or none, and the resume goes ahead."""
    for patch in (None, '{"terminationGracePeriodSeconds": 10}'):
        server = Edited(patch)
        _cluster(server).admit("research", Job(name="job", service="chat", replicas=1, state=PARKED, template_refs=REFS), "uid",
                               max_grace_seconds=30)
        assert "suspend" not in server.wf["spec"], server.wf


def test_the_gate_leaves_a_workflow_patched_after_its_list_parked_and_serving_whole() -> None:
    """The fault, through a tick: the jobs are read, then the tenant patches a day's grace in, then the admission."""
    from .test_gate_controller import World, config

    w = World(config(maxGraceSeconds=30))
    w.park("late", replicas=2)
    listed = w.cluster.jobs

    def jobs_then_edit(namespace: str, service: str) -> list[Job]:
        out = listed(namespace, service)
        w.wf("late")["spec"]["podSpecPatch"] = '{"terminationGracePeriodSeconds": 86400}'
        return out

    w.cluster.jobs = jobs_then_edit  # type: ignore[method-assign]
    for _ in range(7):
        w.wf("late")["spec"].pop("podSpecPatch", None)  # what each list sees: no patch
        w.tick(chat=1)
    assert w.state("late") == "parked" and w.wf("late")["spec"].get("suspend") is True, w.log.getvalue()
    assert "its pods' grace period is now its own" in w.log.getvalue()
    w.cluster.jobs = listed  # type: ignore[method-assign]
    w.tick(chat=1)  # the patch is in the list now: refused there, and nothing stays lent to it
    assert w.state("late") == "parked" and w.replicas() == 8, w.log.getvalue()
