"""KubeCluster's reads of the pool's pods against a stand-in API: what the server is asked, and where a read stops.

Invariants: the pool's reads ask only for pods that hold a node and have not ended (bound, or nominated and not
bound), so a tenant's pending pods are never read; a namespace read stops at MAX_POOL_PODS and a node's at
MAX_NODE_PODS with PoolReadCutShort (never a short answer taken as the whole), after a bounded number of pages.
"""

from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes import client

from offhours.scripts.cluster import kube
from offhours.scripts.cluster.base import MAX_NODE_PODS, MAX_POOL_PODS, PoolReadCutShort
from offhours.scripts.cluster.kube import KubeCluster


def _pod(name: str, node: str | None, nominated: str | None = None, gpus: str = "1") -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, namespace="research", uid=f"uid-{name}"),
        spec=client.V1PodSpec(node_name=node, containers=[client.V1Container(
            name="main", resources=client.V1ResourceRequirements(requests={"nvidia.com/gpu": gpus}))]),
        status=client.V1PodStatus(phase="Running" if node else "Pending", nominated_node_name=nominated))


def _selects(selector: str, pod: client.V1Pod) -> bool:
    """The server's field selection, for the fields these reads use (an exact `=`, `!=` each)."""
    fields = {"spec.nodeName": pod.spec.node_name or "", "status.phase": pod.status.phase or "",
              "status.nominatedNodeName": pod.status.nominated_node_name or ""}
    for term in selector.split(","):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if fields[key] == value:
                return False
        else:
            key, value = term.split("=", 1)
            if fields[key] != value:
                return False
    return True


class Core:
    def __init__(self, pods: list[client.V1Pod], endless: bool = False) -> None:
        self.pods, self.endless, self.requests = pods, endless, []  # type: ignore[var-annotated]

    def list_namespaced_pod(self, namespace: str, field_selector: str = "", limit: int | None = None,
                            _continue: str | None = None) -> Any:
        self.requests.append(field_selector)
        if self.endless:  # a namespace a tenant filled with pods bound to nodes
            items = [_pod(f"p-{len(self.requests)}-{i}", "no-such-node", gpus="0") for i in range(limit or 1)]
            return SimpleNamespace(items=items, metadata=SimpleNamespace(_continue="more"))
        items = [p for p in self.pods if _selects(field_selector, p)]
        return SimpleNamespace(items=items, metadata=SimpleNamespace(_continue=None))


def _cluster(core: Core) -> KubeCluster:
    cluster = KubeCluster(client.ApiClient(client.Configuration()), retries=0)
    cluster.core = core
    return cluster


def test_the_pool_read_asks_for_pods_holding_a_node_and_never_reads_pending_ones() -> None:
    pods = [_pod("bound", "n1"), _pod("nominated", None, nominated="n2"), *(_pod(f"flood-{i}", None) for i in range(50))]
    core = Core(pods)
    seats = _cluster(core).pool_seats(["research"])
    assert sorted((s.name, s.node) for s in seats) == [("bound", "n1"), ("nominated", "n2")]
    assert core.requests == [kube.BOUND, kube.NOMINATED]
    assert all("status.phase!=Succeeded" in r and "status.phase!=Failed" in r for r in core.requests)
    core.requests.clear()
    assert [s.name for s in _cluster(core).node_seats("research", "n2")] == ["nominated"]
    assert core.requests == ["spec.nodeName=n2,status.phase!=Succeeded,status.phase!=Failed",
                             "spec.nodeName=,status.nominatedNodeName=n2,status.phase!=Succeeded,status.phase!=Failed"]


@pytest.mark.parametrize(("read", "most"), [("namespace", MAX_POOL_PODS), ("node", MAX_NODE_PODS)])
def test_a_read_past_its_bound_is_cut_short_never_a_short_count(read: str, most: int) -> None:
    core = Core([], endless=True)
    cluster = _cluster(core)
    with pytest.raises(PoolReadCutShort, match=f"more than {most} pods"):
        if read == "namespace":
            cluster.pool_seats(["research"])
        else:
            cluster.node_seats("research", "n1")
    assert 0 < len(core.requests) <= most // kube.PAGE_SIZE + 1
