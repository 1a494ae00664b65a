"""A stopped job's release time, measured from its pods' status and used to order a reclaim's victims.

Invariants: only pods that held resources at the stop count, and the release ends when every one of
them has ended; the estimate never exceeds the service's grace cap; the victim order keeps priority
first whatever was measured; the record keeps a few measurements only, and a tampered one is no memory.
"""

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from offhours.scripts.policy.plan import ADMITTED, Job, victim_order
from offhours.scripts.policy.record import ServiceRecord
from offhours.scripts.policy.release import (
    MAX_RELEASES,
    MAX_RELEASES_PER_KEY,
    OVERDUE_SECONDS,
    PodExit,
    measured,
    release_estimate,
    release_seconds,
    with_release_estimates,
    with_stops,
)
from tests.unit.test_gate_controller import World, config

STOP = 1000.0


def test_the_release_ends_with_the_last_container_of_the_pods_that_held_resources_at_the_stop() -> None:
    pods = [PodExit("step", 900.0, 1012.0), PodExit("other-step", 950.0, 1030.0),
            PodExit("earlier-step", 100.0, 500.0),  # had ended before the stop: held nothing
            PodExit("exit-handler", 1005.0, 1090.0)]  # created after the stop: the exit handler, not a holder
    assert release_seconds(STOP, pods, now=1100.0) == 30.0


def test_a_pod_still_running_means_not_released_and_a_pod_gone_is_released_by_now() -> None:
    assert release_seconds(STOP, [PodExit("step", 900.0, 1010.0), PodExit("slow", 900.0, None)], now=1100.0) is None
    assert release_seconds(STOP, [], now=1060.0) == 60.0  # every pod deleted: an upper bound, the slow side
    assert release_seconds(STOP, [PodExit("late-start", 1001.0, None)], now=1060.0) == 60.0


def test_the_estimate_is_a_high_quantile_of_the_measurements_else_the_declared_grace_within_the_cap() -> None:
    assert release_estimate([10.0, 12.0, 11.0, 40.0], declared=90.0, cap_seconds=120.0) == 40.0
    assert release_estimate([10.0] * 9 + [100.0], declared=90.0, cap_seconds=120.0) == 10.0  # p90 of ten
    assert release_estimate([], declared=45.0, cap_seconds=120.0) == 45.0
    assert release_estimate([], declared=None, cap_seconds=120.0) == 120.0
    assert release_estimate([500.0], declared=45.0, cap_seconds=120.0) == 120.0
    assert release_estimate([], declared=3600.0, cap_seconds=30.0) == 30.0


def test_a_stop_is_measured_once_released_and_dropped_unmeasured_when_overdue() -> None:
    job = Job("wf-a", "chat", 2, ADMITTED, run_id="run-a")
    releasing = with_stops((), [job], STOP)
    waiting, releases = measured(releasing, (), {"wf-a": [PodExit("p", 900.0, None)]}, 1060.0, cap_seconds=120.0)
    assert waiting == releasing and releases == ()
    waiting, releases = measured(waiting, releases, {}, 1100.0, cap_seconds=120.0)  # not read this tick: kept
    assert waiting == releasing
    waiting, releases = measured(waiting, releases, {"wf-a": [PodExit("p", 900.0, 1025.0)]}, 1120.0, 120.0)
    assert waiting == () and releases == (("run-a", 1120.0, 25.0),)
    late = STOP + 120.0 + OVERDUE_SECONDS + 1
    assert measured(releasing, (), {"wf-a": [PodExit("p", 900.0, None)]}, late, 120.0) == ((), ())


def test_a_job_stopped_again_is_measured_from_its_newest_stop() -> None:
    job = Job("wf-a", "chat", 2, ADMITTED, run_id="run-a")
    assert with_stops(with_stops((), [job], STOP), [job], STOP + 60) == (("wf-a", "run-a", STOP + 60, ""),)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcdefgh"), st.floats(0, 1e5), st.floats(0, 1e4)), max_size=200))
def test_the_record_keeps_a_few_measurements_per_run_and_the_newest(entries: list[tuple[str, float, float]]) -> None:
    # Invariant: however many stops are measured, at most MAX_RELEASES are kept, at most
    # MAX_RELEASES_PER_KEY of one run, and the newest measurement is always among them.
    releases: tuple = ()
    for key, at, seconds in entries:
        _, releases = measured((("wf", key, at, ""),), releases, {"wf": []}, at + seconds, cap_seconds=1e9)
        assert releases[-1][:2] == (key, at + seconds) and math.isclose(releases[-1][2], seconds, abs_tol=1e-6)
    assert len(releases) <= MAX_RELEASES
    assert all(sum(1 for r in releases if r[0] == k) <= MAX_RELEASES_PER_KEY for k in "abcdefgh")


jobs_strategy = st.lists(st.tuples(st.integers(-2, 2), st.sampled_from(["r1", "r2", "r3", None]),
                                   st.one_of(st.none(), st.floats(0, 5000))), min_size=1, max_size=12)
releases_strategy = st.lists(st.tuples(st.sampled_from(["r1", "r2", "r3"]), st.floats(0, 1e4), st.floats(0, 5000)),
                             max_size=15)


@settings(max_examples=300, deadline=None)
@given(jobs_strategy, releases_strategy, st.floats(1, 600))
def test_the_victim_order_keeps_priority_first_and_then_the_soonest_release(
        specs: list[tuple[int, str | None, float | None]], releases: list[tuple[str, float, float]],
        cap: float) -> None:
    # Invariant: whatever was measured, a lower priority is always stopped first; at equal priority a job
    # planned to release sooner (by the order's resolution) is never stopped after a slower one; no estimate
    # exceeds the cap.
    jobs = [Job(f"wf-{i}", "chat", 1, ADMITTED, priority=p, run_id=r, exit_seconds=d)
            for i, (p, r, d) in enumerate(specs)]
    planned = with_release_estimates(jobs, releases, cap)
    assert all(j.exit_seconds is not None and 0 <= j.exit_seconds <= cap for j in planned)
    order = sorted(planned, key=lambda j: victim_order(j, 0.0))
    for a, b in zip(order, order[1:]):
        assert a.priority <= b.priority
        if a.priority == b.priority:
            assert victim_order(a, 0.0)[1] <= victim_order(b, 0.0)[1]


def test_a_tampered_release_memory_drops_the_whole_record() -> None:
    good = ServiceRecord(baseline=8, releases=(("run-a", 1.0, 25.0),), releasing=(("wf-a", "run-a", 2.0, "uid-a"),))
    assert ServiceRecord.from_json(good.to_json()) == good
    for bad in ('"releases":[["run-a",1,-5]]', '"releases":[["run-a",1,"x"]]', '"releases":[[1,1,5]]',
                '"releasing":[["wf",7,1]]', '"releases":' + str([["k", 1, 1]] * (MAX_RELEASES + 1)).replace("'", '"'),
                '"releasing":"wf"', '"releases":[["run-a",1,NaN]]', '"releasing":[["wf","k",1,7]]',
                '"releasing":[["wf","k",1,"u","x"]]'):
        text = good.to_json()[:-1] + "," + bad + "}"
        assert ServiceRecord.from_json(text).baseline is None, bad
    # An older gate's stop (no uid) reads back: measured from the pods any Workflow of its name owns.
    older = ServiceRecord(baseline=8).to_json()[:-1] + ',"releasing":[["wf-a","run-a",2.0]]}'
    assert ServiceRecord.from_json(older).releasing == (("wf-a", "run-a", 2.0, ""),)


def _grace(w: World, name: str, seconds: str) -> None:
    w.wf(name)["spec"].setdefault("arguments", {})["parameters"] = [
        {"name": "termination-grace-seconds", "value": seconds}]


def test_the_gate_measures_a_stop_from_the_pods_status_and_then_stops_the_job_that_releases_sooner() -> None:
    # job-0 declares 20 s, job-1 90 s: the first reclaim stops job-0 (its declared grace is shorter). Its pod's
    # containers end 110 s after the stop: the gate reads that from the pod's status and records it under
    # job-0's run. Its copy comes back with the same run; at the next reclaim job-1 (90 s declared, faster
    # than the 110 s job-0 really took) is stopped instead.
    w = World(config(maxGraceSeconds=300))
    for name, grace, run in (("job-0", "20", "run-0"), ("job-1", "90", "run-1")):
        w.park(name, replicas=2, run_id=run)  # the run and the grace as submitted: admitted with them
        _grace(w, name, grace)
    for _ in range(7):
        w.tick()
    assert w.replicas() == 4, w.log.getvalue()
    out = w.tick(chat=40)["chat"]
    assert out.plan is not None and [j.name for j in out.plan.stop] == ["job-0"]
    stopped_at = w.now
    assert w.record().releasing == (("job-0", "run-0", stopped_at, w.wf("job-0")["metadata"]["uid"]),)
    w.cluster.set_workflow_pods("research", "job-0", [PodExit("job-0-step", stopped_at - 300, None)])
    w.tick(chat=40)
    assert w.record().releasing and not w.record().releases  # still running: not released yet
    w.cluster.finish("research", "job-0", "Failed")
    w.cluster.set_workflow_pods("research", "job-0", [PodExit("job-0-step", stopped_at - 300, stopped_at + 110)])
    w.tick(chat=40)
    assert w.record().releasing == () and w.record().releases == (("run-0", w.now, 110.0),)
    for _ in range(10):
        w.tick(chat=0)
    assert w.state("job-0-p1") == "admitted", w.log.getvalue()
    copy = w.wf("job-0-p1")
    _grace(w, "job-0-p1", "20")
    assert copy["metadata"]["labels"].get("offhours.io/run-id") == "run-0"
    out = w.tick(chat=40)["chat"]
    assert out.plan is not None and [j.name for j in out.plan.stop] == ["job-1"]
    assert math.isclose([j for j in out.plan.stop][0].exit_seconds or 0, 90.0)


def test_a_pod_read_that_fails_loses_no_stop_and_does_not_hold_the_tick() -> None:
    # The fault: the research namespace's pod list is refused. The stop stays being measured, the tick's
    # serving writes and record still happen, and the next read measures it.
    from offhours.scripts.cluster.base import ClusterError

    w = World(config(maxGraceSeconds=300))
    w.lend(2)
    w.tick(chat=40)
    stopped_at = w.now
    w.cluster.fail_next["list-workflow-pods"] = [ClusterError("list pods: HTTP 403 Forbidden")]
    w.cluster.set_workflow_pods("research", "job-1", [PodExit("p", stopped_at - 10, stopped_at + 5)])
    w.tick(chat=40)
    assert len(w.record().releasing) == 1 and w.record().releases == ()
    assert "unreadable" in w.log.getvalue() and "HTTP 403" in w.log.getvalue()
    w.tick(chat=40)
    assert w.record().releasing == () and len(w.record().releases) == 1


def test_the_kubernetes_adapter_reads_a_release_from_real_pod_status_objects() -> None:
    # The client's own V1Pod: every container (init containers too) must have terminated; the latest finishedAt wins.
    from datetime import datetime, timezone

    from kubernetes import client

    from offhours.scripts.cluster.kube import pod_exit

    def at(s: int) -> datetime:
        return datetime.fromtimestamp(s, timezone.utc)

    def status(finished: int | None) -> client.V1ContainerStatus:
        state = client.V1ContainerState(
            terminated=client.V1ContainerStateTerminated(exit_code=75, finished_at=at(finished))
            if finished is not None else None, running=None if finished is not None else client.V1ContainerStateRunning())
        return client.V1ContainerStatus(name="c", image="i", image_id="", ready=False, restart_count=0, state=state)

    def pod(*finished: int | None) -> client.V1Pod:
        return client.V1Pod(metadata=client.V1ObjectMeta(name="p", creation_timestamp=at(900)),
                            status=client.V1PodStatus(container_statuses=[status(f) for f in finished]))

    assert pod_exit(pod(1010, 1025)) == PodExit("p", 900.0, 1025.0)
    assert pod_exit(pod(1010, None)).finished is None  # the main container still runs (checkpointing)
    assert pod_exit(client.V1Pod(metadata=client.V1ObjectMeta(name="p"), status=client.V1PodStatus())).finished is None


def test_a_reclaim_of_a_hundred_jobs_measures_its_newest_stops_within_the_records_bound() -> None:
    # A fleet 100x larger: one reclaim stops 100 jobs. The record keeps MAX_RELEASING of them being measured
    # (the rest go unmeasured: their prior stays), so the record's size stays bounded whatever the fleet.
    from offhours.scripts.policy.release import MAX_RELEASING

    jobs = [Job(f"wf-{i}", "chat", 1, ADMITTED, run_id=f"run-{i}") for i in range(100)]
    releasing = with_stops((("wf-old", "run-old", STOP - 60, ""),), jobs, STOP)
    assert len(releasing) == MAX_RELEASING and releasing[-1] == ("wf-99", "run-99", STOP, "")
    text = ServiceRecord(baseline=8, releasing=releasing).to_json()
    assert ServiceRecord.from_json(text).releasing == releasing
