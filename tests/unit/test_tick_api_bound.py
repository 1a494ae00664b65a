"""Bounded work per tick, whatever tenants create (issue 31 §6).

The class: a tenant multiplies the gate's work. Everything on a workflow is anyone's to write, so a tenant can
create thousands of workflows that claim to be admitted, say they succeeded, point at an original, or carry
another run's id; one API call (or a stop and its copy) per such workflow made a tick as long as the tenant
liked, and a reclaim that much later.

The mechanism: the calls of a tick are reads per service (five, whatever tenants made: lists, not gets),
writes per service and per admission of the gate (which its record bounds), and three budgets a tick for
all services together: originals of parked copies read (`advisory_reads_per_tick`), waiting reasons written
(`advisory_writes_per_tick`), and stops of workflows the gate did not admit (`research_writes_per_tick`, two
calls each: the parked copy and the stop). What exceeds a budget is left for the next ticks, which find it again.

Invariants, generated over the number and kinds of hostile workflows and the load of each tick:
- a tick's API calls <= PER_SERVICE * services + PER_ADMISSION * admissions + the budgets + FIXED;
- in a tick that reclaims, serving's write comes before any research-side write;
- the gate's own admissions are stopped in the reclaim that needs their GPUs, never deferred behind the budget;
- what exceeds the budget is handled by the next ticks: the unadmitted ones still running never grow, and shrink
  by the budget each tick until none is left.
"""

import math

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from offhours.scripts.gate.tick_state import ServiceOutcome
from offhours.scripts.names import ANNOTATION_PARKED_FROM, LABEL_COPY_OF, STATE_ADMITTED
from tests.support.tick_bound import tick_call_bound

from .test_argo_verbs import running
from .test_gate_controller import World

SERVICES = 2
READS, WRITES, STOPS = 40, 30, 25  # the test's budgets: small, so that the flood exceeds them many times over

RESEARCH_WRITES = ("stop", "park-copy", "admit", "adopt", "delete", "annotate-workflow")


def bound(admissions: int) -> int:
    return tick_call_bound(SERVICES, admissions, READS, WRITES, STOPS)


def world() -> World:
    w = World()
    w.gate.advisory_reads_per_tick, w.gate.advisory_writes_per_tick = READS, WRITES
    w.gate.research_writes_per_tick = STOPS
    w.lend(2)  # two of chat's jobs admitted: 4 replicas lent
    return w


def flood(w: World, n: int, kinds: list[int]) -> None:
    """Create n hostile workflows, of the kinds drawn: each a claim a tenant can write on a workflow."""
    for i in range(n):
        kind = kinds[i % len(kinds)]
        name = f"h{kind}-{i}"
        if kind == 0:  # labelled admitted, running: the gate never admitted it
            w.park(name, svc="chat", replicas=1, state=STATE_ADMITTED)
        elif kind == 1:  # labelled admitted, its status forged to say it succeeded
            w.cluster.add_workflow("research", name, "chat", 1, state=STATE_ADMITTED, phase="Succeeded",
                                   created=w.now)
        elif kind == 2:  # a "copy" of an admitted run: parked, pointing at an original
            w.park(name, svc="code", replicas=1)
            w.wf(name)["metadata"]["annotations"][ANNOTATION_PARKED_FROM] = "job-0"
            w.wf(name)["metadata"]["labels"][LABEL_COPY_OF] = w.wf("job-0")["metadata"]["uid"]
        else:  # another run's id, waiting to be admitted (a waiting reason each)
            w.park(name, svc="chat", replicas=1, run_id="job-0", priority=i % 7)


def admissions(w: World, out: dict[str, ServiceOutcome]) -> int:
    recorded = sum(len(w.record(s).admitted or {}) for s in ("chat", "code"))
    made = sum(len(o.plan.admit) + len(o.plan.adopt) for o in out.values() if o.plan is not None)
    return recorded + made


@settings(max_examples=5, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(n=st.integers(0, 5000), kinds=st.lists(st.integers(0, 3), min_size=1, max_size=4),
       loads=st.lists(st.sampled_from([10.0, 150.0]), min_size=2, max_size=3))
@example(n=5000, kinds=[0, 1, 2, 3], loads=[10.0, 150.0])
@example(n=0, kinds=[0], loads=[150.0, 10.0])
def test_a_ticks_calls_stay_within_services_admissions_and_a_budget(n: int, kinds: list[int],
                                                                     loads: list[float]) -> None:
    w = world()
    flood(w, n, kinds)
    for load in loads:
        before = sum(len(w.record(s).admitted or {}) for s in ("chat", "code"))
        w.cluster.calls.clear()
        out = w.tick(chat=load)
        calls = list(w.cluster.calls)
        assert len(calls) <= bound(before + admissions(w, out)), (n, kinds, load, len(calls))
        serving = [i for i, c in enumerate(calls) if c.startswith(("scale", "set-max"))]
        research = [i for i, c in enumerate(calls) if c.startswith(RESEARCH_WRITES)]
        if out["chat"].decision is not None and out["chat"].decision.action == "reclaim" and serving and research:
            assert serving[0] < research[0], calls[:12]


def test_the_gates_own_stops_come_first_and_the_flood_is_stopped_over_the_next_ticks() -> None:
    w = world()
    n = 4 * STOPS + 3
    flood(w, n, [0])
    squatters = [f"h0-{i}" for i in range(n)]
    w.cluster.calls.clear()
    w.tick(chat=150.0)  # every lent replica is needed back: a reclaim
    assert w.replicas() == 8
    assert not running(w.wf("job-0")) and not running(w.wf("job-1")), "the gate's own admissions are never deferred"
    left = [sum(running(w.wf(s)) for s in squatters)]
    for _ in range(math.ceil(n / STOPS) + 1):
        w.tick(chat=150.0)
        left.append(sum(running(w.wf(s)) for s in squatters))
    assert left[0] == n - STOPS, left
    assert all(b == max(0, a - STOPS) for a, b in zip(left, left[1:])), left
    assert left[-1] == 0
    assert "left for a later tick (research writes: 25 a tick)" in w.log.getvalue()


@settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(poisoned=st.integers(1, 2 * STOPS), healthy=st.integers(1, 2 * STOPS))
@example(poisoned=STOPS, healthy=3)
def test_stops_that_always_fail_never_shield_the_rest_of_a_flood(poisoned: int, healthy: int) -> None:
    """Class: a per-tick budget spent on the same failing items first, every tick.

    A tenant's workflows whose park-copy fails every time (one the API refuses to copy, say) and that come
    first in the plan's order spent the whole budget each tick, so the flood behind them held GPUs for ever.
    The budget's window now moves on each tick (as the advisory budget's does), so every stop gets its turn.
    """
    from offhours.scripts.cluster.base import ClusterError

    w = world()
    for i in range(poisoned):
        w.park(f"a-{i:03}", svc="chat", replicas=1, state=STATE_ADMITTED)
        w.cluster.fail_next[f"park-copy a-{i:03}"] = [ClusterError("HTTP 422 refused")] * 1000
    for i in range(healthy):
        w.park(f"z-{i:03}", svc="chat", replicas=1, state=STATE_ADMITTED)
    rest = [f"z-{i:03}" for i in range(healthy)]
    for _ in range(2 * math.ceil((poisoned + healthy) / STOPS) + 2):
        w.tick(chat=150.0)
    assert not any(running(w.wf(s)) for s in rest), [s for s in rest if running(w.wf(s))]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 300), window=st.integers(1, 250), budget=st.integers(1, 250), turn0=st.integers(0, 10**6))
def test_every_stop_comes_first_in_its_turn_whatever_part_of_the_window_a_tick_spends(
        n: int, window: int, budget: int, turn0: int) -> None:
    """rotate_stops: within n ticks every one of n stops is inside the part of the window a tick spends."""
    from offhours.scripts.policy.plan import Job, rotate_stops

    stops = [Job(f"w-{i}", "chat", 1, "parked") for i in range(n)]
    seen: set[str] = set()
    for turn in range(turn0, turn0 + n):
        seen.update(j.name for j in rotate_stops(stops, turn, window)[:min(budget, window)])
    assert len(seen) == n


def test_stops_that_always_fail_never_shield_a_stop_without_copy() -> None:
    """The same class, across the two kinds of budgeted stop: the stops without a copy (`p.cancel`) came after
    every stop with one, so a budget's worth of stops that always fail shielded them for ever. They take turns."""
    from offhours.scripts.cluster.base import ClusterError

    w = world()
    for i in range(STOPS + 2):
        w.park(f"a-{i:03}", svc="chat", replicas=1, state=STATE_ADMITTED)
        w.cluster.fail_next[f"park-copy a-{i:03}"] = [ClusterError("HTTP 422 refused")] * 1000
    w.park("z-dup", svc="chat", replicas=1, state=STATE_ADMITTED, run_id="job-0")  # job-0's run, twice at once
    for _ in range(2):
        w.tick(chat=150.0)
    assert "stop z-dup" in w.cluster.calls
