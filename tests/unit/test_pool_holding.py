"""What holds the serving pool's GPUs is counted as the scheduler counts it, and nothing a tenant writes lowers it.

Invariants (generated pod specs and tenant edits):
- a pod's effective request is the peak of what runs at once over its life: each init container with the sidecars
  started before it, then the containers with every sidecar, plus the overhead (a timeline model, not the formula);
- the pool's count changes under no edit of a pod's labels, annotations or owner references (the tenant's fields):
  they may explain a pod (its workflow), never lower what it holds;
- a decision made on the pool's count never admits onto a squatter's GPUs, never admits on a hold or a reclaim, and
  never stops below its target.
"""

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from offhours.scripts.policy.decide import Decision, ServiceState
from offhours.scripts.policy.holding import (
    PodSeat,
    effective_request,
    for_plan,
    lent_floor,
    pod_seat,
    pool_holding,
    pool_nodes,
    quantity_units,
    squatters,
    unexplained_gpus,
)

GPU = "nvidia.com/gpu"


def container(gpus: int | None, sidecar: bool = False, as_limit: bool = False) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "c", "image": "x"}
    if gpus is not None:
        c["resources"] = {"limits" if as_limit else "requests": {GPU: str(gpus)}}
    if sidecar:
        c["restartPolicy"] = "Always"
    return c


containers = st.lists(st.builds(container, st.one_of(st.none(), st.integers(0, 8)), st.just(False), st.booleans()),
                      max_size=4)
inits = st.lists(st.builds(container, st.one_of(st.none(), st.integers(0, 8)), st.booleans(), st.booleans()),
                 max_size=4)


def timeline_peak(spec: dict[str, Any]) -> int:
    """The most GPUs in use at any moment of the pod's life, walking it step by step."""
    def req(c: dict[str, Any]) -> int:
        values = c.get("resources", {})
        return int(next(iter((values.get("requests") or values.get("limits") or {GPU: "0"}).values())))

    running_sidecars, peak = 0, 0
    for c in spec.get("initContainers", []):
        if c.get("restartPolicy") == "Always":
            running_sidecars += req(c)
            peak = max(peak, running_sidecars)
        else:
            peak = max(peak, running_sidecars + req(c))  # runs alone but for the sidecars, then ends
    peak = max(peak, running_sidecars + sum(req(c) for c in spec.get("containers", [])))
    return peak + int(spec.get("overhead", {}).get(GPU, "0"))


@given(containers, inits, st.integers(0, 2))
def test_the_effective_request_is_the_peak_of_the_pods_life(main: list[Any], init: list[Any], overhead: int) -> None:
    spec: dict[str, Any] = {"containers": main, "initContainers": init}
    if overhead:
        spec["overhead"] = {GPU: str(overhead)}
    assert effective_request(spec, GPU) == timeline_peak(spec)


def test_quantities_round_up_and_bad_ones_hold_nothing() -> None:
    assert [quantity_units(q) for q in ("1", "2", "500m", "1k", "+3", "1e3", 4, "x", "", None, True, -2)] == \
        [1, 2, 1, 1000, 3, 1000, 4, 0, 0, 0, 0, 0]
    assert quantity_units("9" * 40) == 1 << 20  # bounded


def pod(name: str, namespace: str, node: str, gpus: int, phase: str = "Running", deleting: bool = False,
        nominated: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: dict[str, Any] = {"containers": [container(gpus)]}
    status: dict[str, Any] = {"phase": phase}
    if nominated:
        status["nominatedNodeName"] = node
    else:
        spec["nodeName"] = node
    return {"metadata": meta, "spec": spec, "status": status}


pods = st.lists(st.builds(pod, st.sampled_from(["a", "b", "c", "d", "e"]), st.sampled_from(["serving", "research"]),
                          st.sampled_from(["n1", "n2", "n3"]), st.integers(0, 8),
                          st.sampled_from(["Pending", "Running", "Succeeded", "Failed"]), st.booleans(), st.booleans()),
                max_size=8)
tenant_edits = st.fixed_dictionaries({
    "labels": st.dictionaries(st.sampled_from(["workflows.argoproj.io/workflow", "offhours.io/state", "app"]),
                              st.sampled_from(["", "a", "wf-1", "serving"]), max_size=3),
    "annotations": st.dictionaries(st.sampled_from(["offhours.io/gpus", "x"]), st.sampled_from(["0", "-4"]),
                                   max_size=2),
    "ownerReferences": st.lists(st.fixed_dictionaries({"uid": st.sampled_from(["u1", "uid-a"]),
                                                       "controller": st.booleans()}), max_size=2),
})


@given(pods, st.lists(tenant_edits, min_size=8, max_size=8))
def test_no_label_annotation_or_owner_a_tenant_writes_lowers_the_pools_count(raw: list[Any], edits: list[Any]) -> None:
    def count(docs: list[Any]) -> tuple[int, int]:
        seats = [pod_seat(d, GPU) for d in docs]
        nodes = pool_nodes([s for s in seats if s.namespace == "serving"], {"n3"})
        held = pool_holding(seats, nodes, "serving")
        return held.serving_gpus, held.other_gpus

    before = count(raw)
    edited = [{**d, "metadata": {**d["metadata"], **e}} for d, e in zip(raw, edits, strict=False)]
    assert count(edited) == before
    # And the count is what the scheduler charges: bound or nominated, non-terminal, terminating included.
    seats = [pod_seat(d, GPU) for d in raw]
    nodes = pool_nodes([s for s in seats if s.namespace == "serving"], {"n3"})
    assert before[1] == sum(s.gpus for s in seats if s.namespace != "serving" and s.node in nodes and not s.terminal)


def test_a_pod_nothing_explains_is_a_squatter_and_a_terminating_one_is_counted_but_left_to_end() -> None:
    docs = [pod("srv", "serving", "n1", 4), pod("wf-main", "research", "n1", 4), pod("bare", "research", "n1", 4),
            pod("leaving", "research", "n1", 4, deleting=True), pod("done", "research", "n1", 4, phase="Succeeded"),
            pod("elsewhere", "research", "n9", 4)]
    docs[1]["metadata"]["labels"] = {"workflows.argoproj.io/workflow": "wf"}
    docs[1]["metadata"]["ownerReferences"] = [{"uid": "wf-uid", "controller": True}]
    seats = [pod_seat(d, GPU) for d in docs]
    held = pool_holding(seats, pool_nodes([seats[0]]), "serving")
    assert (held.serving_gpus, held.other_gpus) == (4, 12)
    loan = {("wf", "wf-uid"): 4}
    # The admission explains its pod; what else holds the pool is squatted, however much was lent to others.
    assert unexplained_gpus(held, loan) == 8 and unexplained_gpus(held, {**loan, ("other", "u"): 16}) == 8
    assert unexplained_gpus(held, {}) == 12 and unexplained_gpus(held, {("wf", "wf-uid"): 2}) == 10
    assert lent_floor(1, unexplained_gpus(held, loan), 4) == 3 and lent_floor(1, 8, 5) == 3 and lent_floor(2, 0, 4) == 2
    assert [s.name for s in squatters(held, "research", {("wf", "wf-uid")})] == ["bare"]
    # The label alone (a tenant's) explains nothing: the owner's uid must be the listed workflow's too.
    assert [s.name for s in squatters(held, "research", {("wf", "other")})] == ["wf-main", "bare"]


def decision(lent: int, target: int, ceiling: int = 0) -> Decision:
    action = "lend" if target > lent else "reclaim" if target < lent else "hold"
    return Decision("chat", action, target, lent, None, "", ServiceState(), max(ceiling, target))


@given(st.integers(0, 10), st.integers(0, 10), st.integers(0, 12))
def test_a_decision_on_the_pools_count_admits_only_its_step_and_never_stops_below_its_target(
        jobs: int, excess: int, target: int) -> None:
    made = decision(jobs + excess, target)
    planned = for_plan(made, jobs)
    assert planned.lent == jobs
    if made.target_lent > made.lent:  # a lend: the jobs get the step, not the squatter's GPUs
        assert planned.target_lent - planned.lent == made.target_lent - made.lent
    else:  # a hold or a reclaim admits nothing, and stops no more than the decision's target asks
        assert planned.target_lent <= planned.lent and planned.target_lent == min(target, jobs)
    assert planned.ceiling >= planned.target_lent
    if excess == 0:
        assert planned == made


def _seat(name: str, claims: tuple[str, str], gpus: int) -> PodSeat:
    return PodSeat("research", name, f"uid-{name}", "n1", False, False, gpus, None, claims)


admissions = st.dictionaries(st.sampled_from([("wf", "u1"), ("job", "u2"), ("run", "u3")]), st.integers(0, 16),
                             max_size=3)
claimed_pods = st.lists(st.tuples(st.sampled_from(["wf-main-1", "job-a-2", "run", "copycat", "wf", "jobx"]),
                                  st.sampled_from([("wf", "u1"), ("job", "u2"), ("run", "u3"), ("wf", "u9"),
                                                   ("", "")]),
                                  st.integers(0, 8)), max_size=8)


@given(admissions, claimed_pods, st.tuples(st.sampled_from(["wf-copy", "copy", "job-x"]),
                                           st.sampled_from([("wf", "u1"), ("job", "u2")]), st.integers(1, 8)))
def test_copied_claims_never_lower_the_squatted_count_and_no_admission_explains_beyond_its_loan(
        loans: dict[tuple[str, str], int], raw: list[tuple[str, tuple[str, str], int]],
        copy: tuple[str, tuple[str, str], int]) -> None:
    """Generated admissions (their loans) and pods claiming them, or others, under any name, then one more copy.

    Invariants: what is squatted is exactly what the pods hold beyond each admission's loan (a pod explains
    nothing under a name Argo never gives that workflow's pods); adding a pod, whatever it claims, never lowers it;
    all admissions together never explain more than they were lent.
    """
    seats = [_seat(f"{name}-{i}" if name != "wf" else name, claims, gpus) for i, (name, claims, gpus) in enumerate(raw)]
    held = pool_holding(seats, {"n1"}, "serving")
    squatted = unexplained_gpus(held, loans)
    by_claim: dict[tuple[str, str], int] = {}
    for s in seats:
        workflow = s.claims[0]
        if workflow and (s.name == workflow or s.name.startswith(f"{workflow}-")) and s.claims in loans:
            by_claim[s.claims] = by_claim.get(s.claims, 0) + s.gpus
    assert squatted == held.other_gpus - sum(min(g, loans[c]) for c, g in by_claim.items())
    assert squatted >= held.other_gpus - sum(loans.values())
    name, claims, gpus = copy
    more = pool_holding([*seats, _seat(name, claims, gpus)], {"n1"}, "serving")
    assert unexplained_gpus(more, loans) >= squatted
    # A pod whose name Argo never gives its claimed workflow's pods is a squatter, whatever is running.
    strangers = [s.name for s in squatters(more, "research", set(loans))
                 if s.claims[0] and not s.name.startswith(f"{s.claims[0]}-") and s.name != s.claims[0]]
    assert strangers == [s.name for s in more.others
                         if s.claims[0] and not s.name.startswith(f"{s.claims[0]}-") and s.name != s.claims[0]]
