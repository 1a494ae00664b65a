"""Placement on the 8-GPU pool of the local control plane: real API server, scheduler and ReplicaSet controller.

The pool (scripts/controlplane/lifecycle.py): 4 kwok nodes of 8 GPUs, tainted. A Deployment of 8 replicas of
4 GPUs fills it two replicas a node (the scheduler has no other choice). Nothing here runs for real in a
pod: kwok moves the pods through their phases; what is real is who deletes which pod and who places which.

- the gate's marks (gate/placement.mark_removals, through KubeCluster) make the real ReplicaSet controller
  delete the chosen replicas when the Deployment is lowered by four: two whole nodes free;
- a two-node job of 8-GPU pods is admitted (policy/placement.admit on what KubeCluster reads) only once both
  fit, and then the real scheduler binds both pods and kwok runs them;
- before that, such a pod stays unschedulable, and the gate's check (park_unschedulable) names it and the
  scheduler's words once it has been so past the bound (shortened here to 2 s), which makes the plan park the
  job again and give its replicas back (that path: tests/unit/test_gate_placement.py).
"""

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from offhours.scripts.cluster.kube import KubeCluster
from offhours.scripts.gate.placement import mark_removals, park_unschedulable
from offhours.scripts.names import ARGO_WORKFLOW_LABEL, LABEL_SERVICE
from offhours.scripts.policy.placement import Candidate, Shape, Toleration, admit, free_gpus, whole_nodes
from offhours.scripts.policy.plan import ADMITTED, Job

from .conftest import wait

NS = "other"  # no offhours policy binds here: plain pods and a plain Deployment, as the pool sees them
POOL = "inference-8"
NODES = [f"gpu8-{i:02d}" for i in range(4)]
WIDE = {"nodeSelector": {"offhours.io/pool": POOL},
        "tolerations": [{"key": "offhours.io/pool", "operator": "Equal", "value": POOL, "effect": "NoSchedule"}]}
SHAPE = Shape(2, 8, (("offhours.io/pool", POOL),), (Toleration("offhours.io/pool", "Equal", POOL, "NoSchedule"),))


def _deployment(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name, LABEL_SERVICE: name, "test": "placement"}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NS, "labels": labels},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "terminationGracePeriodSeconds": 1, **WIDE,
                         "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.12.0",
                                         "resources": {"requests": {"nvidia.com/gpu": "4"},
                                                       "limits": {"nvidia.com/gpu": "4"}}}]}}}}


def _research_pod(name: str, workflow: str, owner_uid: str = "") -> dict[str, Any]:
    # Argo's pods are owned by their Workflow; only an owned pod counts as the workflow's (the label is anyone's).
    owners = [{"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "name": workflow, "uid": owner_uid}] \
        if owner_uid else []
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": {ARGO_WORKFLOW_LABEL: workflow, "test": "placement"},
                         "ownerReferences": owners},
            "spec": {"terminationGracePeriodSeconds": 1, **WIDE,
                     "containers": [{"name": "main", "image": "research:latest",
                                     "resources": {"requests": {"nvidia.com/gpu": "8"},
                                                   "limits": {"nvidia.com/gpu": "8"}}}]}}


def _live(core: client.CoreV1Api, selector: str) -> list[Any]:
    return [p for p in core.list_namespaced_pod(NS, label_selector=selector).items if p.metadata.deletion_timestamp is None]


def _per_node(core: client.CoreV1Api, app: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in _live(core, f"app={app}"):
        if p.spec.node_name:
            out[p.spec.node_name] = out.get(p.spec.node_name, 0) + 1
    return out


@pytest.fixture
def pool(kubectl: Callable[..., str], api: client.ApiClient) -> Iterator[client.CoreV1Api]:
    core = client.CoreV1Api(api)

    def clean() -> None:
        kubectl("-n", NS, "delete", "deployment,pod,workflow", "-l", "test=placement", "--ignore-not-found", "--wait=true")
        wait("the 8-GPU pool to be empty", lambda: not core.list_namespaced_pod(NS, label_selector="test=placement").items)

    clean()
    yield core
    clean()


def test_marked_replicas_free_whole_nodes_and_a_two_node_job_runs_only_once_both_pods_fit(
        pool: client.CoreV1Api, api: client.ApiClient, kubectl: Callable[..., str]) -> None:
    core = pool
    kubectl("apply", "-f", "-", stdin=json.dumps(_deployment("wide", 8)))
    wait("8 replicas bound, two per node", lambda: _per_node(core, "wide") == {n: 2 for n in NODES}, timeout=90)
    cluster = KubeCluster(api)
    dep = cluster.deployment(NS, "wide", "wide")

    def free() -> tuple[list[Any], dict[str, int]]:
        nodes = cluster.gpu_nodes(NODES)
        assert nodes is not None and sorted(nodes) == NODES and all(n.gpus == 8 for n in nodes.values())
        return list(nodes.values()), free_gpus(list(nodes.values()), cluster.gpus_held([NS], NODES))

    # Nothing free: the two-node job is not admitted, and one of its pods, were it created, finds no node.
    nodes, before = free()
    job = Candidate("pretrain", SHAPE, ())
    assert admit([job], nodes, [], {}, before, 600).admit == ()
    # Its Workflow, held suspended (Argo makes no pod for it): the pod below is owned by it, as Argo's are.
    kubectl("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
        "metadata": {"name": "early", "namespace": NS, "labels": {"test": "placement"}},
        "spec": {"suspend": True, "entrypoint": "main",
                 "templates": [{"name": "main", "container": {"image": "research:latest"}}]}}))
    early_uid = kubectl("-n", NS, "get", "workflow", "early", "-o", "jsonpath={.metadata.uid}").strip()
    kubectl("apply", "-f", "-", stdin=json.dumps(_research_pod("early-0", "early", early_uid)))
    found = wait("the scheduler to find no node for early-0",
                 lambda: cluster.unschedulable_pods(NS, ["early"])["early"], timeout=60)
    assert found[0][0] == "early-0" and "nvidia.com/gpu" in found[0][2], found
    time.sleep(3)
    early = Job("early", "wide", 4, ADMITTED)
    jobs, why = park_unschedulable(cluster, NS, [early], cluster.server_time(), bound=2.0)
    assert jobs[0].problem is not None and "early-0" in jobs[0].problem and "nvidia.com/gpu" in jobs[0].problem
    assert len(why) == 1 and "given back" in why[0]
    kubectl("-n", NS, "delete", "pod", "early-0", "--wait=true")

    # The gate marks, then lowers by four: the real ReplicaSet controller deletes the marked replicas.
    note = mark_removals(cluster, dep, 4, NS)
    assert note.startswith("marked") and "2 whole node(s)" in note, note
    assert not cluster.lower_serving(dep, 8, 4).conflict
    wait("4 replicas left on 2 nodes", lambda: sorted(_per_node(core, "wide").values()) == [2, 2], timeout=90)
    wait("the deleted replicas gone", lambda: len(core.list_namespaced_pod(NS, label_selector="app=wide").items) == 4,
         timeout=90)
    nodes, after = free()
    assert whole_nodes(nodes, after) == 2
    decided = admit([job], nodes, [], {}, after, 600)
    assert decided.admit == ("pretrain",) and sorted(decided.placed["pretrain"]) == sorted(
        n for n in NODES if after[n] == 8)

    # The real scheduler binds both 8-GPU pods, on the two whole nodes, and kwok runs them.
    for i in range(2):
        kubectl("apply", "-f", "-", stdin=json.dumps(_research_pod(f"pretrain-{i}", "pretrain")))

    def running() -> list[str] | None:
        pods = _live(core, f"{ARGO_WORKFLOW_LABEL}=pretrain")
        if len(pods) == 2 and all(p.status.phase == "Running" and p.spec.node_name for p in pods):
            return sorted(p.spec.node_name for p in pods)
        return None

    bound = wait("both pods of the two-node job running", running, timeout=90)
    assert bound == sorted(decided.placed["pretrain"])
    assert cluster.unschedulable_pods(NS, ["pretrain"]) == {"pretrain": []}
