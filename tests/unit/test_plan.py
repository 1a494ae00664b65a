"""plan(): which jobs to admit, adopt and stop, and the scale; exact plans for the edges of each rule."""

import pytest

from offhours.scripts.policy.decide import Decision, ServiceState
from offhours.scripts.policy.plan import ADMITTED, PARKED, Job, Plan, loss_if_stopped, plan, stop_cost


def decision(target: int, lent: int, ceiling: int | None = None) -> Decision:
    action = "lend" if target > lent else "reclaim" if target < lent else "hold"
    return Decision("chat", action, target, lent, 1, "test", ServiceState(), ceiling=ceiling or target)


def job(name: str, replicas: int, state: str = PARKED, **kw: float | int | str | None) -> Job:
    return Job(name, "chat", replicas, state, **kw)  # type: ignore[arg-type]


# -- the cost of a stop ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "progress_at, started, created, cost",
    [
        (300.0, 100.0, 50.0, (400 - 300) * 2),  # work since the last checkpoint, on each of its replicas
        (None, 100.0, 50.0, (400 - 100) * 2),   # no checkpoint yet: since it started
        (None, None, 50.0, (400 - 50) * 2),     # not started either: since it was created
        (500.0, 100.0, 50.0, 0.0),              # a checkpoint stamped after now (clock skew) loses nothing
    ],
)
def test_loss_if_stopped_is_work_since_progress_times_replicas(progress_at: float | None, started: float | None,
                                                               created: float, cost: float) -> None:
    j = job("j", 2, ADMITTED, progress_at=progress_at, started=started, created=created)
    assert loss_if_stopped(j, now=400.0) == cost


def test_a_stop_costs_by_the_replicas_it_throws_away() -> None:
    # big: 4 replicas x 100 s = 400 lost; small: 1 replica x 300 s = 300 lost. Freeing one replica stops small.
    jobs = [job("big", 4, ADMITTED, progress_at=900.0), job("small", 1, ADMITTED, progress_at=700.0)]
    assert plan(decision(4, 5), 8, jobs, now=1000.0) == Plan("chat", 4, stop=(jobs[1],), lent_after=4)


def test_equal_costs_stop_the_youngest() -> None:
    jobs = [job("old", 2, ADMITTED, created=0.0, progress_at=900.0),
            job("young", 2, ADMITTED, created=50.0, progress_at=900.0),
            job("middle", 2, ADMITTED, created=20.0, progress_at=900.0)]
    assert [j.name for j in plan(decision(2, 6), 8, jobs, now=1000.0).stop] == ["young", "middle"]


def test_stops_exactly_enough() -> None:
    jobs = [job(n, 2, ADMITTED, progress_at=900.0 + i) for i, n in enumerate("abc")]
    assert plan(decision(4, 6), 8, jobs, now=1000.0) == Plan("chat", 4, stop=(jobs[2],), lent_after=4)  # c: newest checkpoint
    assert plan(decision(6, 6), 8, jobs, now=1000.0) == Plan("chat", 2, lent_after=6)


# -- admission ------------------------------------------------------------------------------------------
def test_hold_admits_nothing_even_under_a_higher_ceiling() -> None:
    jobs = [job("a", 2, ADMITTED), job("p", 2)]
    assert plan(decision(2, 2, ceiling=4), 8, jobs, 0.0) == Plan(
        "chat", 6, lent_after=2, waiting=((jobs[1], 1, "waiting: chat lends nothing more now: its recent load leaves no "
                                    "more replicas to spare; position 1 in the queue"),))


def test_without_explain_the_plan_is_the_same_but_says_nothing_of_who_waits() -> None:
    jobs = [job("a", 2, ADMITTED), job("p", 2)]
    assert plan(decision(2, 2, ceiling=4), 8, jobs, 0.0, explain=False) == Plan("chat", 6, lent_after=2)


def test_room_is_the_target_less_what_is_lent() -> None:
    jobs = [job("a", 2, ADMITTED), job("p1", 2, created=1.0), job("p2", 2, created=2.0)]
    assert plan(decision(4, 2, ceiling=4), 8, jobs, 0.0) == Plan("chat", 4, admit=(jobs[1],), lent_after=4, waiting=(
        (jobs[2], 1, "waiting: chat has no room for its 2 replica(s) now; position 1 in the queue"),))


def test_ceiling_room_is_the_ceiling_less_what_is_lent() -> None:
    jobs = [job("a", 2, ADMITTED), job("big", 4)]
    assert plan(decision(4, 2, ceiling=4), 8, jobs, 0.0) == Plan(
        "chat", 6, lent_after=2, notes=("no parked job fits in 2 lendable replicas",), waiting=(
            (jobs[1], 1, "waiting: chat has no room for its 4 replica(s) now; position 1 in the queue"),))
    assert plan(decision(3, 2, ceiling=6), 8, jobs, 0.0) == Plan("chat", 2, admit=(jobs[1],), lent_after=6)


def test_a_first_job_may_fill_the_ceiling_exactly() -> None:
    jobs = [job("big", 4)]
    assert plan(decision(2, 0, ceiling=4), 8, jobs, 0.0) == Plan("chat", 4, admit=(jobs[0],), lent_after=4)


def test_only_the_first_job_may_exceed_the_step() -> None:
    jobs = [job("small", 1, created=1.0), job("big", 4, created=2.0)]
    assert plan(decision(2, 0, ceiling=6), 8, jobs, 0.0) == Plan("chat", 7, admit=(jobs[0],), lent_after=1, waiting=(
        (jobs[1], 1, "waiting: chat has no room for its 4 replica(s) now; position 1 in the queue"),))


def test_each_admission_uses_up_room() -> None:
    jobs = [job("one", 1, created=1.0), job("two", 2, created=2.0), job("three", 1, created=3.0)]
    assert plan(decision(3, 0, ceiling=3), 8, jobs, 0.0) == Plan("chat", 5, admit=tuple(jobs[:2]), lent_after=3, waiting=(
        (jobs[2], 1, "waiting: chat has no room for its 1 replica(s) now; position 1 in the queue"),))


def test_a_job_of_zero_replicas_is_never_admitted() -> None:
    jobs = [job("empty", 0)]
    assert plan(decision(2, 0), 8, jobs, 0.0) == Plan("chat", 8, notes=("no parked job fits in 2 lendable replicas",),
                                                      waiting=((jobs[0], 1, "waiting: chat has no room for its 0 "
                                                                "replica(s) now; position 1 in the queue"),))


def test_admitted_jobs_are_not_candidates_again() -> None:
    jobs = [job("a", 2, ADMITTED), job("p", 2, created=1.0)]
    assert plan(decision(4, 2), 8, jobs, 0.0) == Plan("chat", 4, admit=(jobs[1],), lent_after=4)


def test_a_running_unadmitted_job_is_adopted_before_parked_ones() -> None:
    rogue, parked = job("rogue", 2, "unmanaged", priority=0, created=5.0), job("parked", 2, priority=9, created=1.0)
    assert plan(decision(2, 0), 8, [parked, rogue], 0.0) == Plan("chat", 6, adopt=(rogue,), lent_after=2, waiting=(
        (parked, 1, "waiting: chat has no room for its 2 replica(s) now; position 1 in the queue"),))


def test_the_no_fit_note_only_when_nothing_was_taken_and_something_waits() -> None:
    big = job("big", 6)
    assert plan(decision(2, 0), 8, [big], 0.0).notes == ("no parked job fits in 2 lendable replicas",)
    assert plan(decision(2, 0), 8, [big, job("small", 2)], 0.0).notes == ()
    assert plan(decision(2, 0), 8, [big, job("rogue", 2, "unmanaged")], 0.0).notes == ()
    rogue = job("rogue", 6, "unmanaged")
    assert plan(decision(2, 0), 8, [rogue], 0.0) == Plan(
        "chat", 8, stop=(rogue,), notes=("rogue runs without admission and does not fit: stopped and parked again",))


# -- finishing jobs and waiting reasons -------------------------------------------------------------------
def test_a_reclaim_a_finishing_job_blocks_stops_it_without_a_copy() -> None:
    # Its status says its work is done, and anyone may write that status: serving's replicas are freed from it
    # too, by a stop that parks no copy (a real exit handler runs on through Argo's stop).
    done = job("done", 4, ADMITTED, finishing=True)
    assert plan(decision(1, 4), 8, [done], 0.0) == Plan(
        "chat", 8, lent_after=0, cancel=(done,),
        notes=("done is finishing (its status says its work is done) and holds replicas serving needs: stopped, "
               "not parked again",))


def test_without_a_reclaim_serving_is_the_baseline_less_what_stays_lent() -> None:
    done = job("done", 4, ADMITTED, finishing=True)  # the snapshot shows more lent than the decision saw
    p = plan(decision(2, 2), 8, [done], 0.0)
    assert (p.scale_to, p.lent_after, p.stop, p.cancel) == (8, 0, (), (done,))  # 4 lent over 2: stopped, no copy


def test_a_copy_whose_original_still_runs_waits_outside_the_queue() -> None:
    original, copy = job("a", 2, ADMITTED), job("a-p1", 2, parked_from="a")
    assert plan(decision(4, 2), 8, [original, copy], 0.0).waiting == (
        (copy, 0, "waiting: its original a has not stopped yet"),)


def test_a_job_with_a_problem_waits_with_it_named() -> None:
    bad = job("bad", 2, problem="offhours.io/replicas 'x' is not a number")
    assert plan(decision(4, 0), 8, [bad], 0.0).waiting == ((bad, 0, "not admitted: offhours.io/replicas 'x' is not a number"),)


def test_an_admitted_job_with_a_problem_is_stopped_with_it_named() -> None:
    # A tenant rewrote its replica label: it is stopped, the note says why, and what it was lent (the gate's
    # record of it) goes back to serving in the same tick.
    bad = job("bad", 2, ADMITTED, problem="offhours.io/replicas 'x' is not a number")
    assert plan(decision(2, 2), 8, [bad], 0.0) == Plan(
        "chat", 8, stop=(bad,), lent_after=0,
        notes=("bad was admitted but offhours.io/replicas 'x' is not a number: stopped and parked again",))


def test_only_parked_copies_of_a_succeeded_original_are_deleted() -> None:
    copy = job("a-p1", 2, parked_from="a", original_succeeded=True)
    running = job("b", 2, ADMITTED, parked_from="a", original_succeeded=True)
    assert plan(decision(2, 2), 8, [copy, running], 0.0).delete == (copy,)


def test_a_stop_prefers_the_job_that_gives_its_gpus_back_soonest() -> None:
    # slow: loses 100 s of work but takes 600 s to checkpoint on SIGTERM (700); fast: loses 300 s, exits in
    # 30 s (330). Serving waits for the GPUs: the fast one is stopped, although it loses more work.
    jobs = [job("slow", 1, ADMITTED, progress_at=900.0, exit_seconds=600.0),
            job("fast", 1, ADMITTED, progress_at=700.0, exit_seconds=30.0)]
    assert plan(decision(1, 2), 8, jobs, now=1000.0) == Plan("chat", 7, stop=(jobs[1],), lent_after=1)


@pytest.mark.parametrize("exit_seconds, cost", [(30.0, 100 * 2 + 30 * 2), (None, 100 * 2), (0.0, 100 * 2)])
def test_a_stops_cost_is_the_work_lost_plus_the_exit_time_on_each_replica(exit_seconds: float | None,
                                                                           cost: float) -> None:
    # Each of its replicas loses 100 s of work, and each waits out the exit (none declared: no wait).
    assert stop_cost(job("j", 2, ADMITTED, progress_at=900.0, exit_seconds=exit_seconds), now=1000.0) == cost


def test_a_large_job_s_exit_time_counts_on_every_replica() -> None:
    # Equal exit times; wide: 2 replicas, no work lost, 100 s to exit on each (200); narrow: 1 replica,
    # 50 s lost and 100 s to exit (150).
    jobs = [job("wide", 2, ADMITTED, progress_at=1000.0, exit_seconds=100.0),
            job("narrow", 1, ADMITTED, progress_at=950.0, exit_seconds=100.0)]
    assert plan(decision(2, 3), 8, jobs, now=1000.0) == Plan("chat", 6, stop=(jobs[1],), lent_after=2)


def test_at_equal_priority_the_victim_that_frees_its_gpus_sooner_goes_first_whatever_work_it_loses() -> None:
    # quick: exits in 30 s but loses 800 s of work; careful: exits in 600 s, loses 100 s. Serving waits for
    # the GPUs: the quick one is stopped (the lost work is research's; the wait would be serving's).
    jobs = [job("quick", 1, ADMITTED, progress_at=200.0, exit_seconds=30.0),
            job("careful", 1, ADMITTED, progress_at=900.0, exit_seconds=600.0)]
    assert [j.name for j in plan(decision(1, 2), 8, jobs, now=1000.0).stop] == ["quick"]


def test_exit_times_within_one_step_count_as_equal_and_the_lost_work_decides() -> None:
    jobs = [job("a", 1, ADMITTED, progress_at=200.0, exit_seconds=20.0),
            job("b", 1, ADMITTED, progress_at=900.0, exit_seconds=25.0)]  # both within 16-30 s
    assert [j.name for j in plan(decision(1, 2), 8, jobs, now=1000.0).stop] == ["b"]


def test_two_fast_small_victims_are_stopped_before_one_slow_large_one() -> None:
    # Two replicas needed: fast-1 and fast-2 (1 each, 30 s) free them in 30 s; wide (2, 300 s) in 300 s.
    jobs = [job("wide", 2, ADMITTED, progress_at=1000.0, exit_seconds=300.0),
            job("fast-1", 1, ADMITTED, progress_at=500.0, exit_seconds=30.0),
            job("fast-2", 1, ADMITTED, progress_at=500.0, exit_seconds=30.0)]
    assert sorted(j.name for j in plan(decision(2, 4), 8, jobs, now=1000.0).stop) == ["fast-1", "fast-2"]


def test_a_job_whose_exit_time_is_unknown_goes_after_those_known() -> None:
    jobs = [job("unknown", 1, ADMITTED, progress_at=999.0), job("known", 1, ADMITTED, progress_at=0.0,
                                                                  exit_seconds=300.0)]
    assert [j.name for j in plan(decision(1, 2), 8, jobs, now=1000.0).stop] == ["known"]


def test_priority_still_comes_before_exit_time() -> None:
    jobs = [job("low-slow", 1, ADMITTED, priority=0, exit_seconds=600.0),
            job("high-fast", 1, ADMITTED, priority=5, exit_seconds=10.0)]
    assert [j.name for j in plan(decision(1, 2), 8, jobs, now=1000.0).stop] == ["low-slow"]


def test_a_job_running_without_admission_whose_work_is_done_is_stopped_without_a_copy_and_never_adopted() -> None:
    """Fault: an argo-submitted job whose work had ended (its exit handler running) was stopped and parked again,
    and its copy ran the ended job again, counted as a preemption; with room, it was adopted: lent for nothing.
    Its status is its only evidence of that (tenant-written): it is stopped, as any job running without admission."""
    done = job("done", 2, "unmanaged", finishing=True)
    note = "done runs without admission and its status says its work is done: stopped, not parked again"
    assert plan(decision(0, 0), 8, [done], 0.0) == Plan("chat", 8, cancel=(done,), notes=(note,))
    assert plan(decision(4, 0), 8, [done], 0.0) == Plan("chat", 8, cancel=(done,), notes=(note,))
