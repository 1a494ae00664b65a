"""KubeCluster's placement reads and writes against a stand-in API: what is asked, and what a refusal means.

- without `get nodes` (403) the node read says so (None) after one request, and the gate falls back;
- without `patch pods` (403) the mark says so (False), nothing raised; a pod already gone (404) is no failure;
- the pending-pods read is one request per chunk of workflow names (a label selector `in`, Pending only),
  never one per workflow, and finds the scheduler's Unschedulable condition and its time;
- a serving pod's GPUs are counted as the scheduler counts them (requests, else limits; the largest init).
"""

from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from offhours.scripts.cluster import kube, placement_pods
from offhours.scripts.cluster.kube import KubeCluster

AT = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _pod(name: str, workflow: str, gpus: str = "8", unschedulable: bool = True,
         owner: tuple[str, str] | None = None) -> client.V1Pod:
    """A pending pod labelled with `workflow`; owned by the Workflow `owner` (name, uid), by default its own."""
    owner_name, owner_uid = owner or (workflow, f"uid-{workflow}")
    cond = client.V1PodCondition(type="PodScheduled", status="False", reason="Unschedulable",
                                 message="0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
                                 last_transition_time=AT)
    refs = [client.V1OwnerReference(api_version="argoproj.io/v1alpha1", kind="Workflow", name=owner_name,
                                    uid=owner_uid)] if owner_name else []
    return client.V1Pod(metadata=client.V1ObjectMeta(name=name, labels={"workflows.argoproj.io/workflow": workflow},
                                                     owner_references=refs),
                        spec=client.V1PodSpec(containers=[client.V1Container(
                            name="main", resources=client.V1ResourceRequirements(limits={"nvidia.com/gpu": gpus}))]),
                        status=client.V1PodStatus(phase="Pending", conditions=[cond] if unschedulable else []))


class Core:
    def __init__(self, pods: list[client.V1Pod]) -> None:
        self.pods, self.requests = pods, []  # type: ignore[var-annotated]

    def read_node(self, name: str) -> Any:
        self.requests.append(("get node", name))
        raise ApiException(status=403, reason="Forbidden")

    def patch_namespaced_pod(self, name: str, namespace: str, body: Any) -> Any:
        self.requests.append(("patch pod", name))
        raise ApiException(status=403 if name != "gone" else 404, reason="Forbidden")

    def list_namespaced_pod(self, namespace: str, label_selector: str = "", field_selector: str = "",
                            limit: int | None = None, _continue: str | None = None) -> Any:
        self.requests.append(("list pods", label_selector, field_selector))
        names = label_selector.split(" in (", 1)[1].rstrip(")").split(",")
        items = [p for p in self.pods if p.metadata.labels["workflows.argoproj.io/workflow"] in names]
        return SimpleNamespace(items=items, metadata=SimpleNamespace(_continue=None))


def _cluster(core: Core) -> KubeCluster:
    cluster = KubeCluster(client.ApiClient(client.Configuration()), retries=0)
    cluster.core = core
    return cluster


def test_refused_node_reads_and_pod_marks_say_so_without_raising() -> None:
    core = Core([])
    cluster = _cluster(core)
    assert cluster.gpu_nodes(["n1", "n2"]) is None and core.requests == [("get node", "n1")]
    assert cluster.set_deletion_cost("serving", "chat-0", -5) is False
    assert cluster.set_deletion_cost("serving", "gone", -5) is True


def test_pending_pods_are_read_once_per_chunk_of_workflows_and_unschedulable_ones_found() -> None:
    names = [f"wf-{i}" for i in range(kube.UNSCHEDULABLE_CHUNK + 1)]
    core = Core([_pod("wf-0-a", "wf-0"), _pod("wf-1-a", "wf-1", unschedulable=False)])
    found = _cluster(core).unschedulable_pods("research", names)
    assert len(core.requests) == 2 and all(r[2] == "status.phase=Pending" for r in core.requests)
    assert found["wf-0"] == [("wf-0-a", AT.timestamp(), "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.")]
    assert found["wf-1"] == [] and set(found) == set(names)


def test_a_pods_gpus_are_counted_as_the_scheduler_counts_them() -> None:
    pod = _pod("p", "w", gpus="4")
    assert placement_pods.pod_gpus(pod) == 4
    pod.spec.init_containers = [client.V1Container(name="init", resources=client.V1ResourceRequirements(
        requests={"nvidia.com/gpu": "8"}))]
    assert placement_pods.pod_gpus(pod) == 8
    pod.spec.containers[0].resources = client.V1ResourceRequirements(limits={"nvidia.com/gpu": "lots"})
    assert placement_pods.pod_gpus(pod) == 8  # an unreadable count counts as none; the init container's stands


def test_a_pod_only_labelled_with_anothers_workflow_never_parks_that_workflow() -> None:
    """A tenant's own pending pod, labelled with another's admitted workflow, is not that workflow's pod.

    Class: a job's pods told by a label a tenant writes. Only pods the Workflow owns (by name and, where the
    gate knows it, UID: the same test as every other read of a job's pods) count towards parking it.
    """
    forged = [_pod("forged-bare", "victim", owner=("", "")),
              _pod("forged-other", "victim", owner=("mine", "uid-mine")),
              _pod("forged-uid", "victim", owner=("victim", "uid-stale"))]
    core = Core([*forged, _pod("victim-a", "victim")])
    found = _cluster(core).unschedulable_pods("research", {"victim": "uid-victim"})
    assert [p[0] for p in found["victim"]] == ["victim-a"]
    assert _cluster(Core(forged)).unschedulable_pods("research", {"victim": "uid-victim"}) == {"victim": []}


class Endless:
    """A namespace with more pods than any bound: every page full, and a continue token on each."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, str]] = []

    def list_namespaced_pod(self, namespace: str, label_selector: str = "", field_selector: str = "",
                            limit: int | None = None, _continue: str | None = None) -> Any:
        self.requests.append((namespace, label_selector, field_selector))
        name = label_selector.split(" in (", 1)[1].split(",")[0].rstrip(")") if " in (" in label_selector else "w"
        items = [_pod(f"p-{len(self.requests)}-{i}", name, gpus="1") for i in range(limit or 1)]
        for pod in items:
            pod.spec.node_name = "node-0"
        return SimpleNamespace(items=items, metadata=SimpleNamespace(_continue=f"page-{len(self.requests)}"))


def test_the_placement_reads_of_a_namespace_a_tenant_fills_are_bounded_and_leave_out_ended_pods() -> None:
    """Class: a read whose size a tenant sets (pods are free to create without GPUs, or left by ended runs).

    The GPUs-held read and the pending-pods read stop at the pool's bound (MAX_POOL_PODS a namespace) with an
    error, which their callers take as advisory (the ReplicaSet chooses; the plan stands; nothing parked),
    and the GPUs-held read asks the server to leave ended pods out.
    """
    import pytest

    from offhours.scripts.cluster.base import ClusterError

    most = kube.MAX_POOL_PODS // kube.PAGE_SIZE + 2
    core = Endless()
    cluster = _cluster(core)  # type: ignore[arg-type]
    with pytest.raises(ClusterError):
        cluster.gpus_held(("serving", "research"), ["node-0"])
    assert 0 < len(core.requests) <= most and all(r[2] == kube.NOT_TERMINAL for r in core.requests)
    core.requests.clear()
    with pytest.raises(ClusterError):
        cluster.unschedulable_pods("research", {"victim": "uid-victim"})
    assert 0 < len(core.requests) <= most
