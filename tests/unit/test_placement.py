"""Placement of lent GPUs: generated fleets of nodes and serving replicas, generated job queues.

Class: GPUs lent that no waiting job can use (freed scattered, a gang half placed). Invariants, in words:
- the replicas chosen to remove are exactly the counts asked, per service, and free at least the GPUs lent;
- no node is left partly freed when moving those partial removals onto one node would empty it (a whole-node
  choice of equal count exists); with one service, no choice of equal count empties more nodes;
- a job is admitted only if every pod of it has a place on the free GPUs per node after the gate's removals,
  on a node its selector and tolerations allow, together with every job admitted before it;
- behind the first job that does not fit, a job lands on its reserved nodes only if it leaves them within the bound;
- the deletion-cost marks put the chosen replicas below every other cost, and take away only the gate's old marks.
"""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offhours.scripts.policy.placement import (
    DELETION_COST_FLOOR,
    Candidate,
    Node,
    Replica,
    Shape,
    Taint,
    Toleration,
    admit,
    choose_removals,
    deletion_costs,
    free_gpus,
    place,
    unplaced_pods,
    usable_gpus,
    whole_nodes,
)

SERVICES = ("chat", "code", "embed")


@st.composite
def fleets(draw, services=SERVICES, max_nodes=6):  # type: ignore[no-untyped-def]
    """Nodes of 4 or 8 GPUs, each carrying replicas of 2 or 4 GPUs of some services, maybe a foreign GPU pod."""
    nodes, replicas, held = [], [], {}
    for i in range(draw(st.integers(1, max_nodes))):
        gpus = draw(st.sampled_from((4, 8)))
        pool = draw(st.sampled_from(("a", "b")))
        taint = draw(st.sampled_from(((), (Taint("gpu", "reserved"),))))
        node = Node(f"n{i}", gpus, (("pool", pool),), taint)
        nodes.append(node)
        used = 0
        if draw(st.integers(0, 5)) == 0:
            used = draw(st.sampled_from((1, 2)))  # another pod's GPUs: the node can never be emptied
        for j in range(draw(st.integers(0, 4))):
            size = draw(st.sampled_from((2, 4)))
            if used + size > gpus:
                break
            replicas.append(Replica(f"{node.name}-r{j}", draw(st.sampled_from(services)), node.name, size))
            used += size
        held[node.name] = used
    return nodes, replicas, free_gpus(nodes, held)


def _counts(draw, replicas):  # type: ignore[no-untyped-def]
    out = {}
    for s in sorted({r.service for r in replicas}):
        out[s] = draw(st.integers(0, sum(r.service == s for r in replicas)))
    return out


def _after(free, removal):  # type: ignore[no-untyped-def]
    out = dict(free)
    for r in removal:
        out[r.node] += r.gpus
    return out


def _need(replicas, node):  # type: ignore[no-untyped-def]
    out: dict[str, int] = {}
    for r in replicas:
        if r.node == node:
            out[r.service] = out.get(r.service, 0) + 1
    return out


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_removals_are_the_counts_and_leave_no_node_half_freed_when_a_whole_one_could_be(data):  # type: ignore[no-untyped-def]
    nodes, replicas, free = data.draw(fleets())
    counts = _counts(data.draw, replicas)
    removal = choose_removals(nodes, replicas, counts, free)
    assert len(set(removal)) == len(removal)
    for s, n in counts.items():
        assert sum(r.service == s for r in removal) == n
    after = _after(free, removal)
    assert sum(after.values()) - sum(free.values()) == sum(r.gpus for r in removal)
    size = {n.name: n.gpus for n in nodes}
    emptied = {name for name, f in after.items() if f >= size[name]}
    partial: dict[str, int] = {}
    for r in removal:
        if r.node not in emptied:
            partial[r.service] = partial.get(r.service, 0) + 1
    for node in nodes:
        if node.name in emptied or not any(r.node == node.name for r in replicas):
            continue
        if free[node.name] + sum(r.gpus for r in replicas if r.node == node.name) < node.gpus:
            continue  # something else holds GPUs there: no choice empties it
        need = _need(replicas, node.name)
        assert not all(partial.get(s, 0) >= k for s, k in need.items()), (
            f"{node.name} could have been emptied with the removals spread over partly freed nodes {partial}")


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_with_one_service_no_choice_of_equal_count_empties_more_nodes(data):  # type: ignore[no-untyped-def]
    nodes, replicas, free = data.draw(fleets(services=("chat",), max_nodes=4))
    k = data.draw(st.integers(0, sum(1 for _ in replicas)))
    best = max((whole_nodes(nodes, _after(free, c)) for c in itertools.combinations(replicas, k)), default=0)
    assert whole_nodes(nodes, _after(free, choose_removals(nodes, replicas, {"chat": k} if k else {}, free))) == best


def test_two_replicas_per_8_gpu_node_free_whole_nodes_where_the_replicaset_would_scatter():
    nodes = [Node(f"n{i}", 8) for i in range(4)]
    replicas = [Replica(f"n{i}-{j}", "chat", f"n{i}", 4) for i in range(4) for j in range(2)]
    removal = choose_removals(nodes, replicas, {"chat": 4}, free_gpus(nodes, {n.name: 8 for n in nodes}))
    after = _after({n.name: 0 for n in nodes}, removal)
    assert whole_nodes(nodes, after) == 2
    assert usable_gpus(Shape(2, 8), nodes, after) == 16


shapes = st.builds(Shape, pods=st.integers(1, 3), gpus_per_pod=st.sampled_from((1, 2, 4, 8)),
                   node_selector=st.sampled_from(((), (("pool", "a"),))),
                   tolerations=st.sampled_from(((), (Toleration("gpu", "Exists"),))))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_job_is_admitted_only_when_all_its_pods_fit_after_the_removals(data):  # type: ignore[no-untyped-def]
    nodes, replicas, free = data.draw(fleets())
    lendable = _counts(data.draw, replicas)
    queue = []
    for i in range(data.draw(st.integers(1, 4))):
        borrows = tuple((s, data.draw(st.integers(0, 2))) for s in data.draw(st.sets(st.sampled_from(SERVICES), max_size=2)))
        queue.append(Candidate(f"j{i}", data.draw(shapes), borrows,
                               data.draw(st.sampled_from((None, 60.0, 3600.0)))))
    bound = 600.0
    out = admit(queue, nodes, replicas, lendable, free, bound)
    by_name = {c.name: c for c in queue}
    node_of = {n.name: n for n in nodes}
    # The removals are what the admitted jobs borrow, never beyond what is lendable.
    borrowed: dict[str, int] = {}
    for name in out.admit:
        for s, n in by_name[name].borrows:
            borrowed[s] = borrowed.get(s, 0) + n
    for s, n in borrowed.items():
        assert n <= lendable.get(s, 0)
        assert sum(r.service == s for r in out.remove) == n
    # Every pod of every admitted job has a place on a node it may run on; no node gives more than it has free.
    room = _after(free, out.remove)
    assert set(out.placed) == set(out.admit)
    for name, spots in out.placed.items():
        job = by_name[name]
        assert len(spots) == job.shape.pods
        for node in spots:
            assert job.shape.eligible(node_of[node])
            room[node] -= job.shape.gpus_per_pod
    assert all(v >= 0 for v in room.values())
    assert room == out.free_after
    # Every job not admitted says why.
    for c in queue:
        assert (c.name in out.admit) != (c.name in out.waiting)
    # Backfill: behind the head, a job on the head's reserved nodes leaves them within the bound.
    if out.head is not None:
        behind = [c.name for c in queue][[c.name for c in queue].index(out.head) + 1:]
        for name in behind:
            if name in out.placed and set(out.placed[name]) & out.reserved:
                assert by_name[name].hold_seconds is not None and by_name[name].hold_seconds <= bound


def test_a_two_node_job_waits_when_only_one_node_is_freed_and_a_small_job_backfills_off_its_nodes():
    nodes = [Node(f"n{i}", 8) for i in range(3)]
    replicas = [Replica(f"n{i}-{j}", "chat", f"n{i}", 4) for i in range(3) for j in range(2)]
    full = {n.name: 0 for n in nodes}
    big = Candidate("big", Shape(2, 8), (("chat", 4),))
    small = Candidate("small", Shape(1, 4), (("chat", 1),), hold_seconds=None)
    out = admit([big, small], nodes, replicas, {"chat": 3}, full, bound_seconds=600)
    assert out.admit == ("small",)
    assert out.head == "big" and "cannot lend" in out.waiting["big"]
    assert not set(out.placed["small"]) & out.reserved
    both = admit([big, small], nodes, replicas, {"chat": 4}, full, bound_seconds=600)
    assert both.admit == ("big",)  # 4 lendable: the two-node job fits whole; the small one no longer fits the count
    assert whole_nodes(nodes, both.free_after) == 0 and sorted(both.placed["big"]) == ["n0", "n1"]
    half = admit([Candidate("big", Shape(2, 8), (("chat", 2),))], nodes, replicas, {"chat": 4}, full, 600)
    assert half.admit == () and "pod 2 of 2" in half.waiting["big"]  # never lend for half a gang


def test_a_pod_no_node_allows_is_named():
    nodes = [Node("n0", 8, (("pool", "b"),))]
    why = unplaced_pods(Shape(1, 8, (("pool", "a"),)), nodes, {"n0": 8})
    assert why is not None and "node selector" in why
    why = unplaced_pods(Shape(2, 8), nodes, {"n0": 8})
    assert why is not None and "pod 2 of 2" in why and "n0 has 8 of 8 free" in why
    assert place(Shape(1, 8), [Node("t", 8, (), (Taint("gpu"),))], {"t": 8}) is None


def test_bad_shapes_and_counts_are_refused_with_what_is_wrong():
    with pytest.raises(ValueError, match="at least one pod"):
        Shape(0, 8)
    with pytest.raises(ValueError, match="cannot remove 3 replica"):
        choose_removals([Node("n", 8)], [Replica("r", "chat", "n", 4)], {"chat": 3}, {"n": 4})


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_deletion_costs_put_the_chosen_first_and_take_away_only_the_gates_old_marks(data):  # type: ignore[no-untyped-def]
    nodes, replicas, free = data.draw(fleets())
    removal = choose_removals(nodes, replicas, _counts(data.draw, replicas), free)
    current = {r.name: data.draw(st.sampled_from((None, 0, 100, -5, DELETION_COST_FLOOR + 3))) for r in replicas}
    writes = deletion_costs(removal, current)
    final = {**current, **writes}
    chosen = {r.name for r in removal}
    for name, cost in final.items():
        if name in chosen:
            assert cost is not None and all(o is None or cost < o for n, o in final.items() if n not in chosen)
        elif current[name] != DELETION_COST_FLOOR + 3:
            assert name not in writes  # someone else's cost, or none: untouched
        else:
            assert writes[name] is None


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_a_plan_keeps_only_admissions_whose_pods_all_fit_and_lends_nothing_for_the_rest(data):  # type: ignore[no-untyped-def]
    from offhours.scripts.policy.placement import gang_admissions
    from offhours.scripts.policy.plan import PARKED, Job, Plan

    nodes, replicas, free = data.draw(fleets(services=("chat",)))
    total = len(replicas)
    jobs, shapes_of, left = [], {}, total
    for i in range(data.draw(st.integers(0, 3))):
        k = data.draw(st.integers(1, 2))
        if k > left:
            break
        left -= k
        jobs.append(Job(f"j{i}", "chat", k, PARKED))
        if data.draw(st.booleans()):
            shapes_of[f"j{i}"] = data.draw(shapes)
    lent = sum(j.replicas for j in jobs)
    p = Plan("chat", 10 - lent, admit=tuple(jobs), lent_after=lent)
    out = gang_admissions(p, shapes_of, nodes, replicas, free, 600.0)
    dropped = [j for j in jobs if j not in out.admit]
    assert set(out.admit) <= set(jobs) and all(j.name in shapes_of for j in dropped)
    assert out.scale_to == p.scale_to + sum(j.replicas for j in dropped)
    assert out.lent_after == p.lent_after - sum(j.replicas for j in dropped)
    assert {j.name for j, _, _ in out.waiting} == {j.name for j in dropped}


def test_a_shape_is_read_from_the_arguments_or_said_unreadable():
    from offhours.scripts.policy.placement import job_shape

    assert job_shape({"gpus": "8", "node-selector": '{"pool": "a"}', "tolerations": '[{"key": "gpu", "operator": "Exists"}]'}) \
        == Shape(1, 8, (("pool", "a"),), (Toleration("gpu", "Exists"),))
    assert job_shape({}) == Shape(1, 1)
    assert job_shape({"gpus": "eight"}) == "gpus 'eight' is not a count"
    assert job_shape({"gpus": "8", "tolerations": "{"}) == "its node-selector or tolerations argument is not JSON"
