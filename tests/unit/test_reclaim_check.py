"""The reclaim check between ticks (scripts/gate/reclaim.py): a rise is given back within a check, nothing else moves.

The cluster is the in-memory one and the load a scripted source, as in test_gate_controller.py;
each test names the fault or the move it plays and checks what survived.
"""

import io
from collections.abc import Sequence

from offhours.scripts.cluster.base import ClusterError
from offhours.scripts.gate.reclaim import ReclaimCheck
from offhours.scripts.metrics.sources import Reading, ServiceTarget

from .test_gate_controller import World


def lent_world() -> tuple[World, ReclaimCheck]:
    """chat: baseline 8, two jobs of 2 replicas admitted (4 lent); the check's basis is the last tick's."""
    w = World()
    w.lend(2)
    check = ReclaimCheck(w.gate)
    check.remember(w.gate.tick())  # the tick the loop remembers, at the same time as the last one
    w.cluster.calls.clear()
    return w, check


def between_ticks(w: World, seconds: float = 20.0) -> None:
    w.now += seconds
    w.cluster.clock = w.now


def test_a_rise_between_ticks_is_given_back_at_the_check_serving_first() -> None:
    w, check = lent_world()
    between_ticks(w)
    w.source.rps["chat"] = 60.0  # needs all 8
    outcomes = check.run()
    assert [o.service for o in outcomes] == ["chat"], "only the service that needs it is acted on"
    assert w.replicas() == 8 and w.state("job-0") == "preempted" and w.state("job-1") == "preempted"
    writes = [c for c in w.cluster.calls if c.split()[0] in ("scale", "park-copy", "stop")]
    assert writes[0] == "scale chat 8", "serving gets its replicas before any research-side write"
    assert w.cluster.lease_holder is None, "the Lease was taken for the reclaim and given back"
    assert not any(c.startswith(("scale code", "write-state code")) for c in w.cluster.calls)


def test_a_calm_check_reads_the_load_and_writes_nothing_not_even_the_lease() -> None:
    w, check = lent_world()
    between_ticks(w)
    assert check.run() == []
    assert not [c for c in w.cluster.calls if not c.startswith(("list", "get", "read"))], w.cluster.calls
    assert w.replicas() == 4


def test_a_check_never_admits_even_a_job_that_would_fit() -> None:
    # Lending is the full tick's (it needs the stabilisation window and writes state); a check only gives back.
    w, check = lent_world()
    w.park("late", replicas=2)
    for _ in range(5):
        between_ticks(w, 10.0)
        check.run()
    assert w.state("late") == "parked" and w.replicas() == 4
    w.tick()
    assert w.state("late") == "admitted"


def test_a_failing_source_at_a_check_is_no_failed_tick_and_takes_no_lease() -> None:
    # Three failed readings in a row fire the fail-safe when they are ticks; checks every few seconds must not.
    w, check = lent_world()
    w.source.errors["chat"] = "Prometheus: connection refused"
    for _ in range(5):
        between_ticks(w, 5.0)
        check.run()
    assert w.record().decision.failed_ticks == 0 and w.replicas() == 4
    assert not any(c.startswith("acquire-lease") for c in w.cluster.calls)


def test_a_source_that_raises_at_a_check_is_no_reading_not_a_crash() -> None:
    w, check = lent_world()

    def broken(_targets: Sequence[ServiceTarget], _now: float) -> dict[str, Reading]:
        raise OSError("connection reset")

    w.source.read = broken  # type: ignore[method-assign]
    between_ticks(w)
    assert check.run() == [] and w.replicas() == 4


def test_the_pass_reads_the_objects_afresh_a_job_that_ended_meanwhile_is_not_stopped() -> None:
    # The check saw the rise on the last tick's basis (4 lent); before its pass took the Lease, job-0
    # ended and its exit hook gave its replicas back: the pass decides on what the cluster holds now.
    w, check = lent_world()
    original = w.source.read

    def rise_then_job_0_ends(targets: Sequence[ServiceTarget], now: float) -> dict[str, Reading]:
        w.source.rps["chat"] = 60.0
        out = original(targets, now)
        if w.wf("job-0")["status"]["phase"] == "Running":
            w.cluster.finish("research", "job-0")
        return out

    w.source.read = rise_then_job_0_ends  # type: ignore[method-assign]
    between_ticks(w)
    outcomes = check.run()
    assert outcomes and outcomes[0].plan is not None and [j.name for j in outcomes[0].plan.stop] == ["job-1"]
    assert w.wf("job-0")["status"]["phase"] == "Succeeded" and w.state("job-1") == "preempted"
    assert w.replicas() == 8


def test_each_check_takes_its_rates_over_the_last_check_period_not_since_the_tick() -> None:
    # A step 5 s before a check must show whole there: the previous samples are the last check's.
    from offhours.scripts.policy.samples import CounterSample

    w, check = lent_world()
    seen: list[float] = []
    original = w.source.read

    def sampled(targets: Sequence[ServiceTarget], now: float) -> dict[str, Reading]:
        seen.extend(s.at for t in targets for s in t.previous.values())
        out = original(targets, now)
        return {name: Reading(r.load, r.error, {"p/0": CounterSample(now, (0.0, 0.0, 0.0))}) for name, r in out.items()}

    w.source.read = sampled  # type: ignore[method-assign]
    tick_at = w.now
    between_ticks(w, 15.0)
    check.run()
    between_ticks(w, 15.0)
    check.run()
    assert seen[-1] == tick_at + 15.0, "the second check's rate starts at the first check, not at the tick"


def test_a_lease_held_elsewhere_delays_the_reclaim_to_the_next_check_only() -> None:
    w, check = lent_world()
    w.source.rps["chat"] = 60.0
    w.cluster.fail_next["acquire-lease"] = [ClusterError("get lease: HTTP 503")]
    between_ticks(w, 10.0)
    assert check.run() == [] and w.replicas() == 4
    between_ticks(w, 10.0)
    check.run()
    assert w.replicas() == 8


def test_after_the_reclaim_the_next_check_has_nothing_lent_and_reads_nothing() -> None:
    w, check = lent_world()
    between_ticks(w)
    w.source.rps["chat"] = 60.0
    check.run()
    reads: list[str] = []
    original = w.source.read

    def counting(targets: Sequence[ServiceTarget], now: float) -> dict[str, Reading]:
        reads.extend(t.service for t in targets)
        return original(targets, now)

    w.source.read = counting  # type: ignore[method-assign]
    between_ticks(w, 10.0)
    assert check.run() == [] and "chat" not in reads


def test_a_service_that_failed_its_tick_is_not_checked_on_an_old_basis() -> None:
    # Its Deployment is gone or unreadable: the check must not act on what the tick before knew.
    w, check = lent_world()
    w.cluster.fail_next["get-deployment"] = [ClusterError("get deployment: HTTP 500")] * 4
    check.remember(w.gate.tick())
    assert "chat" not in check.basis


def test_measured_slow_replica_starts_lengthen_the_look_ahead_of_the_gate() -> None:
    # The trend looks one reaction time ahead: starts of 10 minutes (measured on the pods) mean a longer look.
    from datetime import datetime, timedelta, timezone

    from offhours.scripts.cluster.base import Pod
    from offhours.scripts.cluster.kube import start_seconds
    from offhours.scripts.gate.controller import with_measured_cold_start

    created = datetime(2026, 5, 1, tzinfo=timezone.utc)
    assert start_seconds(created, created + timedelta(seconds=75)) == 75.0
    assert start_seconds(created, created - timedelta(seconds=5)) is None  # a clock that went back: no measurement
    assert start_seconds(None, created) is None
    w = World()
    policy = w.gate.config.service("chat")
    slow = with_measured_cold_start(policy, [Pod(f"p{i}", "10.0.0.1", 600.0) for i in range(30)])
    assert slow.cold_start_seconds is not None and slow.cold_start_seconds > 500.0
    assert with_measured_cold_start(policy, [Pod("p", "10.0.0.1")]) == policy  # nothing measured: the prior


def test_the_loop_acts_on_a_rise_at_the_next_check_not_the_next_tick() -> None:
    # Ticks every 60 s, checks every 15 s (the default): load rises at t+20 s; serving is raised at the
    # check at t+30 s, and the loop keeps checking up to its deadline.
    from offhours.scripts.gate.log import Logger
    from offhours.scripts.gate.loop import TickLoop

    w = World()
    w.lend(2)
    start, raised_at = w.now, []
    raise_serving = w.cluster.raise_serving

    def scaled(dep, observed, replicas):  # type: ignore[no-untyped-def]
        raised_at.append((w.now - start, replicas))
        return raise_serving(dep, observed, replicas)

    def wait(_namespace: str, timeout: float) -> bool:
        w.now += max(0.0, timeout)
        w.cluster.clock = w.now
        if w.now - start >= 20.0:
            w.source.rps["chat"] = 60.0
        return False

    def sleep(seconds: float) -> None:
        w.now += seconds
        w.cluster.clock = w.now

    w.cluster.raise_serving = scaled  # type: ignore[method-assign]
    w.cluster.wait_for_workflow_change = wait  # type: ignore[method-assign]
    assert w.gate.config.reclaim_check_seconds == 15
    loop = TickLoop(w.gate, seconds=50, log=Logger(io.StringIO()), monotonic=lambda: w.now, sleep=sleep)
    assert loop.run() == 0
    assert raised_at == [(30.0, 8)], raised_at
    assert w.now == start + 50.0 and w.state("job-0") == "preempted"


def test_a_reclaim_pass_that_could_not_read_the_service_is_tried_again_at_the_next_check() -> None:
    # The fault: the check saw the rise, its pass's read of the Deployment failed (an API server's 500). The
    # pass dropped the service from the checks, so its replicas waited for the next full tick (up to a whole
    # tickSeconds); the next check must try the pass again.
    w, check = lent_world()
    between_ticks(w, 10.0)
    w.source.rps["chat"] = 60.0
    w.cluster.fail_next["get-deployment chat"] = [ClusterError("get deployment: HTTP 500")]
    outcomes = check.run()
    assert [o.service for o in outcomes] == ["chat"] and outcomes[0].failed and w.replicas() == 4
    between_ticks(w, 15.0)
    check.run()
    assert w.replicas() == 8 and w.state("job-0") == "preempted" and w.state("job-1") == "preempted"
