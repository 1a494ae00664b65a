"""The gate's placement hooks: the replicas a lower removes are the ones it chose, and a lend no pod can use is undone.

Invariants, in words:
- after the gate marks a lower's replicas, the ReplicaSet's own ranking (lowest deletion cost first, as the
  in-memory cluster replays it) deletes exactly the replicas the gate chose, whatever marks were there before;
  a cost someone else wrote on a replica not chosen stays;
- without the right to patch pods the lower still happens, as before, and the log says the ReplicaSet chose;
- an admitted job with a pod unschedulable past the bound is stopped, parked again, its replicas given back,
  with a Warning Event naming the pod and the scheduler's words; within the bound nothing changes.
"""

import io

from hypothesis import given, settings
from hypothesis import strategies as st

from offhours.scripts.cluster.memory import MemoryCluster
from offhours.scripts.gate.controller import Gate
from offhours.scripts.gate.placement import UNSCHEDULABLE_BOUND_SECONDS, mark_removals
from offhours.scripts.names import EVENT_LENT_UNSCHEDULABLE
from offhours.scripts.policy.placement import DELETION_COST_FLOOR, Node, Replica, choose_removals, free_gpus
from tests.support.templates import install_library_templates
from tests.unit.test_gate_controller import TICK, ScriptedSource, config


def _placed(cluster: MemoryCluster, nodes: int, per_node: int = 2, gpus: int = 8) -> None:
    """chat's 8 replicas dealt out across nodes (replica i on node i % nodes), as a spreading scheduler does."""
    for n in range(nodes):
        cluster.nodes[f"node-{n}"] = Node(f"node-{n}", gpus)
    cluster.replicas_on_nodes[("serving", "chat")] = [
        Replica(f"chat-{i}", "chat", f"node-{i % nodes}", 4) for i in range(nodes * per_node)]


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_the_replicaset_deletes_exactly_the_replicas_the_gate_marked(data):  # type: ignore[no-untyped-def]
    cluster = MemoryCluster()
    n = data.draw(st.integers(1, 5))
    replicas = []
    for i in range(n):
        size = data.draw(st.sampled_from((4, 8)))
        cluster.nodes[f"node-{i}"] = Node(f"node-{i}", size)
        for j in range(data.draw(st.integers(0, size // 4))):
            replicas.append(Replica(f"chat-{i}-{j}", "chat", f"node-{i}", 4))
    if not replicas:
        return
    dep = cluster.add_deployment("serving", "chat", len(replicas))
    cluster.replicas_on_nodes[("serving", "chat")] = list(replicas)
    for r in replicas:  # old marks of the gate's, and costs someone else wrote
        cost = data.draw(st.sampled_from((None, DELETION_COST_FLOOR + 1, 7, -3)))
        if cost is not None:
            cluster.deletion_costs[("serving", r.name)] = cost
    foreign = {k: v for k, v in cluster.deletion_costs.items() if v in (7, -3)}
    k = data.draw(st.integers(1, len(replicas)))
    nodes = list(cluster.nodes.values())
    held = {node.name: sum(r.gpus for r in replicas if r.node == node.name) for node in nodes}
    chosen = {r.name for r in choose_removals(nodes, replicas, {"chat": k}, free_gpus(nodes, held))}
    note = mark_removals(cluster, dep, k, "research")
    assert note.startswith("marked"), note
    foreign = {key: v for key, v in foreign.items() if key[1] not in chosen}  # a chosen pod's cost is the gate's now
    kept_foreign = {key: cluster.deletion_costs.get(key) for key in foreign}
    cluster.lower_serving(dep, len(replicas), len(replicas) - k)
    left = {r.name for r in cluster.replicas_on_nodes[("serving", "chat")]}
    assert {r.name for r in replicas} - left == chosen
    assert kept_foreign == foreign


class PlacedWorld:
    def __init__(self, patchable: bool = True) -> None:
        self.cluster = install_library_templates(MemoryCluster())
        for svc in ("chat", "code"):
            self.cluster.add_deployment("serving", svc, 8)
        _placed(self.cluster, 4)
        self.cluster.pods_patchable = patchable
        self.source = ScriptedSource()
        self.now = 0.0
        self.log = io.StringIO()
        self.gate = Gate(config(), self.cluster, self.source, clock=lambda: self.now, out=self.log,
                         monotonic=lambda: self.now)

    def tick(self) -> None:
        self.now += TICK
        self.cluster.clock = self.now
        self.gate.tick()

    def lend(self) -> None:
        for i in range(2):
            self.cluster.add_workflow("research", f"job-{i}", "chat", 2, created=self.now)
        for _ in range(7):
            self.tick()
        assert self.cluster.deployments[("serving", "chat")].replicas == 4, self.log.getvalue()

    def whole_free_nodes(self) -> int:
        on = {r.node for r in self.cluster.replicas_on_nodes[("serving", "chat")]}
        return sum(1 for n in self.cluster.nodes if n not in on)


def test_a_lend_frees_whole_nodes_where_the_replicaset_alone_frees_none():
    marked = PlacedWorld()
    marked.lend()
    assert marked.whole_free_nodes() == 2
    assert "whole node(s) free after the lower" in marked.log.getvalue()
    alone = PlacedWorld(patchable=False)
    alone.lend()
    assert alone.whole_free_nodes() == 0  # one pod per node first: the set spreads what it frees
    assert "no RBAC for pod-deletion-cost" in alone.log.getvalue()


def test_an_admission_whose_pod_finds_no_node_past_the_bound_is_undone_with_an_event_naming_the_pod():
    w = PlacedWorld()
    w.lend()
    pending = ("job-0-pod-1", w.now - 60.0, "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.")
    w.cluster.unschedulable[("research", "job-0")] = [pending]
    w.tick()  # within the bound: nothing changes
    assert w.cluster.deployments[("serving", "chat")].replicas == 4
    assert w.cluster.workflows[("research", "job-0")]["metadata"]["labels"]["offhours.io/state"] == "admitted"
    w.now += UNSCHEDULABLE_BOUND_SECONDS
    w.tick()
    assert w.cluster.deployments[("serving", "chat")].replicas == 6, w.log.getvalue()
    events = [e for e in w.cluster.events if e.reason == EVENT_LENT_UNSCHEDULABLE]
    assert len(events) == 1 and events[0].warning and "job-0-pod-1" in events[0].message
    assert "Insufficient nvidia.com/gpu" in events[0].message
    labels = w.cluster.workflows[("research", "job-0")]["metadata"]["labels"]
    assert labels["offhours.io/state"] != "admitted"


def _with_gpus(w: PlacedWorld, name: str, gpus: int) -> None:
    w.cluster.workflows[("research", name)]["spec"]["arguments"]["parameters"].append({"name": "gpus", "value": str(gpus)})


def test_a_whole_node_job_is_admitted_on_the_node_its_lend_empties():
    w = PlacedWorld()
    w.cluster.add_workflow("research", "pretrain", "chat", 2, created=w.now)
    _with_gpus(w, "pretrain", 8)
    for _ in range(7):
        w.tick()
    assert w.cluster.workflows[("research", "pretrain")]["metadata"]["labels"]["offhours.io/state"] == "admitted"
    assert w.cluster.deployments[("serving", "chat")].replicas == 6 and w.whole_free_nodes() == 1


def test_a_job_whose_pod_fits_no_node_lends_nothing_and_says_which_pod():
    w = PlacedWorld()
    w.cluster.nodes.update({n: Node(n, 8) for n in w.cluster.nodes})
    w.cluster.add_workflow("research", "huge", "chat", 2, created=w.now)
    _with_gpus(w, "huge", 16)  # one pod of 16 GPUs: no node of 8 holds it, whatever is lent
    for _ in range(7):
        w.tick()
    labels = w.cluster.workflows[("research", "huge")]
    assert labels["metadata"]["labels"]["offhours.io/state"] != "admitted"
    assert w.cluster.deployments[("serving", "chat")].replicas == 8, "serving lowered for a job that cannot run"
    reason = labels["metadata"].get("annotations", {}).get("offhours.io/waiting-reason", "")
    assert "pod 1 of 1 (16 GPUs) fits on no node" in reason, reason


def test_marks_of_a_lower_that_did_not_land_are_taken_off() -> None:
    """Class: an advisory mark outliving the write it was for.

    The gate marks the replicas a lower should remove, then lowers; when the lower is refused (a conflict, an
    API error), the marks stayed on serving's pods and steered the next scale-down by anyone else (an HPA, an
    on-call's kubectl scale) to the gate's old choice. A lower that does not land takes its marks off.
    """
    from offhours.scripts.cluster.base import ClusterError
    from offhours.scripts.policy.placement import GATE_MARK_CEILING

    w = PlacedWorld()
    w.cluster.fail_next["scale"] = [ClusterError("HTTP 500 Internal Server Error")] * 50
    for i in range(2):
        w.cluster.add_workflow("research", f"job-{i}", "chat", 2, created=w.now)
    for _ in range(7):
        w.tick()
    assert w.cluster.deployments[("serving", "chat")].replicas == 8  # every lower refused
    marks = {pod: cost for (ns, pod), cost in w.cluster.deletion_costs.items() if cost < GATE_MARK_CEILING}
    assert marks == {}, marks
