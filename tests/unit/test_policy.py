"""The gate's pure decision logic: capacity model, schedule, decision, plan."""

from datetime import datetime, time, timezone
from typing import Any

import pytest

from offhours.scripts.policy.capacity import Load, required_replicas
from offhours.scripts.policy.config import Capacity, Schedule, ServicePolicy
from offhours.scripts.policy.decide import Decision, ServiceState, decide
from offhours.scripts.policy.plan import ADMITTED, PARKED, Job, plan
from offhours.scripts.policy.window import lending_allowed

POLICY = ServicePolicy("chat", Capacity(requests_per_second=10, generation_tokens_per_second=1000), headroom=0.25,
                       min_replicas=1, max_waiting_per_replica=5, stabilization_seconds=600, max_lend_step=2,
                       lend_hysteresis=0)


def load(rps: float, gen: float = 0.0, waiting: float = 0.0, read: int = 8, expected: int = 8, age: float = 0.0) -> Load:
    return Load(rps, 0.0, gen, running=rps, waiting=waiting, kv_cache_usage=0.1, pods_read=read,
                pods_expected=expected, age_seconds=age)


def tick(now: float, lent: int, ld: Load | None, state: ServiceState, error: str | None = None,
         baseline: int = 8, allowed: bool = True, **kw: Any) -> Decision:
    return decide(now=now, policy=POLICY, baseline=baseline, lent=lent, load=ld, load_error=error,
                  lending_allowed=allowed, max_age_seconds=120, failed_ticks_before_reclaim=3, state=state, **kw)


# -- capacity ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "ld, in_service, expected",
    [
        (load(0), 8, 1),              # the minimum
        (load(40), 8, 5),             # 4 replicas of requests x 1.25 headroom = 5
        (load(10, gen=6000), 8, 8),   # tokens dominate: 6 x 1.25 = 7.5 -> 8
        (load(8), 8, 1),              # 0.8 x 1.25 = 1.0 exactly: no extra replica for rounding noise
        (load(0, waiting=41), 8, 9),  # sustained queue beyond 5 per replica: one more than in service
        (load(0, waiting=40), 8, 1),
    ],
)
def test_required_replicas(ld: Load, in_service: int, expected: int) -> None:
    assert required_replicas(ld, POLICY, in_service) == expected


# -- schedule ----------------------------------------------------------------------------------
NIGHT = Schedule("window", time(20, 0), time(8, 0), "Asia/Shanghai")


@pytest.mark.parametrize(
    "utc, allowed",
    [
        (datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc), True),   # 20:00 in Shanghai
        (datetime(2026, 11, 30, 11, 59, tzinfo=timezone.utc), False),  # 19:59
        (datetime(2026, 11, 30, 23, 59, tzinfo=timezone.utc), True),   # 07:59 next day
        (datetime(2026, 12, 1, 0, 0, tzinfo=timezone.utc), False),     # 08:00: window closed
    ],
)
def test_night_window_crosses_midnight_in_its_time_zone(utc: datetime, allowed: bool) -> None:
    assert lending_allowed(NIGHT, utc) is allowed
    assert lending_allowed(Schedule(), utc) is True


@pytest.mark.parametrize(
    "utc, allowed",
    [
        (datetime(2026, 11, 30, 8, 59, tzinfo=timezone.utc), False),
        (datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc), True),    # the start is inside
        (datetime(2026, 11, 30, 16, 59, tzinfo=timezone.utc), True),
        (datetime(2026, 11, 30, 17, 0, tzinfo=timezone.utc), False),  # the end is not
    ],
)
def test_day_window_includes_its_start_and_excludes_its_end(utc: datetime, allowed: bool) -> None:
    assert lending_allowed(Schedule("window", time(9, 0), time(17, 0), "UTC"), utc) is allowed


# -- decide ------------------------------------------------------------------------------------
def run(loads: list[Load | None], lent: int = 0, period: float = 300.0) -> list[Decision]:
    state, out = ServiceState(), []
    for i, ld in enumerate(loads):
        d = tick(i * period, lent, ld, state, None if ld else "scrape failed")
        out.append(d)
        state, lent = d.state, d.target_lent
    return out


def test_lends_only_after_the_stabilisation_window_and_one_step_at_a_time() -> None:
    decisions = run([load(10)] * 6)  # needs 2 of 8 every tick
    assert [d.target_lent for d in decisions] == [0, 0, 2, 4, 6, 6]
    assert decisions[1].reason == "load is low but not yet for 600 s"


def test_reclaims_on_the_first_tick_that_needs_it_all_at_once() -> None:
    decisions = run([load(10)] * 5 + [load(60)])
    assert decisions[4].target_lent == 6
    assert decisions[5].action == "reclaim" and decisions[5].target_lent == 0  # 60 rps -> 8 of 8


def test_a_spike_bounds_lending_while_it_is_inside_the_window() -> None:
    decisions = run([load(10), load(10), load(40), load(10), load(10), load(10)])
    # The 40 rps tick (t=600) needs 5: nothing beyond 3 may be lent until it leaves the window.
    assert [d.target_lent for d in decisions] == [0, 0, 2, 3, 3, 5]


def test_missing_data_never_lends_and_fails_safe_after_n_ticks() -> None:
    d0 = tick(0, 4, None, ServiceState(), "scrape failed")
    assert d0.action == "hold" and d0.target_lent == 4 and "no lending" in d0.reason
    d2 = tick(600, 4, None, ServiceState((), 2), "scrape failed")
    assert d2.action == "reclaim" and d2.target_lent == 0 and "3 failed ticks in a row" in d2.reason


def test_stale_data_counts_as_missing() -> None:
    d = tick(0, 0, load(0, age=600), ServiceState(((-900.0, 1), (-300.0, 1)), 0))
    assert d.target_lent == 0 and "600 s old" in d.reason and d.state.failed_ticks == 1


def test_partial_data_never_lends_but_still_reclaims_what_it_proves() -> None:
    low = tick(0, 2, load(1, read=4), ServiceState(((-900.0, 1),)))
    assert low.target_lent == 2 and "partial data: 4 of 8" in low.reason
    high = tick(0, 4, load(50, read=4), ServiceState())  # half the pods already need 7
    assert high.action == "reclaim" and high.target_lent == 1


def test_outside_the_window_everything_comes_back() -> None:
    d = tick(0, 6, load(1), ServiceState(), allowed=False)
    assert d.action == "reclaim" and d.target_lent == 0 and d.reason == "outside the lending window"


def test_a_good_tick_resets_the_failure_count() -> None:
    d = tick(0, 0, load(1), ServiceState((), 2))
    assert d.state.failed_ticks == 0


def test_forecast_can_only_make_the_gate_more_careful() -> None:
    state = ServiceState(((-600.0, 1), (-300.0, 1)))
    assert tick(0, 0, load(1), state).target_lent == 2
    assert tick(0, 0, load(1), state, forecast_required=7).target_lent == 1
    assert tick(0, 0, load(1), state, forecast_required=8).target_lent == 0
    assert tick(0, 4, load(1), state, forecast_required=7).action == "reclaim"
    assert tick(0, 0, load(1), state, forecast_required=0).target_lent == 2


# Whole decisions, field by field, on every branch of `decide`.
def test_each_branch_decides_exactly() -> None:
    history = ServiceState(((-300.0, 1),), 1)
    assert tick(0, 6, load(1), history, allowed=False) == Decision(
        "chat", "reclaim", 0, 6, None, "outside the lending window", ServiceState())
    assert tick(0, 0, load(1), history, allowed=False).action == "hold"
    assert tick(0, 4, None, history, "scrape failed") == Decision(
        "chat", "hold", 4, 4, None, "scrape failed: no lending", ServiceState((), 2))
    assert tick(0, 4, None, ServiceState(((-300.0, 1),)), None) == Decision(
        "chat", "hold", 4, 4, None, "no load data: no lending", ServiceState((), 1))
    assert tick(0, 4, None, ServiceState((), 2), "scrape failed") == Decision(
        "chat", "reclaim", 0, 4, None, "scrape failed; 3 failed ticks in a row: reclaim everything", ServiceState((), 3))
    assert tick(0, 4, load(10, read=4), ServiceState((), 2)) == Decision(  # a reading, but the third partial one
        "chat", "reclaim", 0, 4, 2, "partial data: 4 of 8 ready pods read; 3 failed ticks in a row: reclaim everything",
        ServiceState((), 3))
    # Partial data: 32 rps from half the pods needs 3.2 x 1.25 = 4, the 4 in service: hold, no lending.
    assert tick(0, 4, load(32, read=4), ServiceState()) == Decision(
        "chat", "hold", 4, 4, 4, "partial data: 4 of 8 ready pods read: no lending", ServiceState((), 1))
    assert tick(0, 4, load(50, read=4), ServiceState()) == Decision(
        "chat", "reclaim", 1, 4, 7, "partial data: 4 of 8 ready pods read; the part read already needs 7 replicas",
        ServiceState((), 1))
    # 80 rps from half the pods needs 10, more than the baseline: everything back, not "all but one".
    assert tick(0, 4, load(80, read=4), ServiceState()).target_lent == 0


def test_lend_hold_and_reclaim_decide_exactly() -> None:
    decisions = run([load(10)] * 6 + [load(60)])  # needs 2 of 8, then 8 of 8
    assert decisions[1] == Decision("chat", "hold", 0, 0, 2, "load is low but not yet for 600 s",
                                    ServiceState(((0.0, 2), (300.0, 2))))
    assert decisions[2] == Decision("chat", "lend", 2, 0, 2, "load has needed at most 2 of 8 replicas for 600 s",
                                    ServiceState(((0.0, 2), (300.0, 2), (600.0, 2))), ceiling=6)
    assert decisions[5] == Decision("chat", "hold", 6, 6, 2, "load needs 2 of 8 replicas; 6 lent",
                                    ServiceState(((900.0, 2), (1200.0, 2), (1500.0, 2))))
    assert decisions[6] == Decision("chat", "reclaim", 0, 6, 8, "load needs 8 of 8 replicas",
                                    ServiceState(((1200.0, 2), (1500.0, 2), (1800.0, 8))))


def test_a_failed_tick_clears_the_window_so_the_first_good_tick_after_it_holds() -> None:
    # Lending had begun (2 lent at t=600); the scrape fails at t=900; the load is low again at t=1200.
    decisions = run([load(10)] * 3 + [None, load(10), load(10), load(10)])
    assert [d.target_lent for d in decisions] == [0, 0, 2, 2, 2, 2, 4]
    assert decisions[3].state == ServiceState((), 1)
    assert decisions[4] == Decision("chat", "hold", 2, 2, 2, "load is low but not yet for 600 s",
                                    ServiceState(((1200.0, 2),)))


@pytest.mark.parametrize(
    "age, stale",
    [(0.0, False), (120.0, False), (121.0, True), (200.0, True), (239.0, True), (600.0, True)],
)
def test_data_older_than_max_age_is_a_failed_tick(age: float, stale: bool) -> None:
    covered = ServiceState(((-600.0, 2), (-300.0, 2)))
    d = tick(0, 0, load(10, age=age), covered)
    if stale:
        assert d == Decision("chat", "hold", 0, 0, 2, f"load data is {age:.0f} s old (max 120 s): no lending",
                             ServiceState((), 1))
    else:
        assert d.action == "lend" and d.target_lent == 2 and d.state.failed_ticks == 0


# -- plan ----------------------------------------------------------------------------------------
def decision(target: int, lent: int, ceiling: int | None = None) -> Decision:
    action = "lend" if target > lent else "reclaim" if target < lent else "hold"
    return Decision("chat", action, target, lent, 1, "test", ServiceState(), ceiling=ceiling or target)


def test_plan_admits_by_priority_then_age_skipping_what_does_not_fit() -> None:
    jobs = [Job("old-small", "chat", 1, PARKED, priority=0, created=1),
            Job("new-big", "chat", 4, PARKED, priority=9, created=5),
            Job("old-mid", "chat", 2, PARKED, priority=9, created=2)]
    p = plan(decision(3, 0, ceiling=3), 8, jobs, now=100)
    assert [j.name for j in p.admit] == ["old-mid", "old-small"]
    assert p.scale_to == 5 and p.lent_after == 3


def test_plan_lets_one_large_job_exceed_the_step_under_the_ceiling() -> None:
    jobs = [Job("big", "chat", 4, PARKED, priority=1)]
    assert [j.name for j in plan(decision(2, 0, ceiling=6), 8, jobs, 0).admit] == ["big"]
    assert plan(decision(2, 0, ceiling=3), 8, jobs, 0).admit == ()


def test_plan_stops_the_jobs_whose_loss_costs_least() -> None:
    jobs = [Job("fresh-ckpt", "chat", 2, ADMITTED, priority=0, created=0, progress_at=990),
            Job("stale-ckpt", "chat", 2, ADMITTED, priority=0, created=0, progress_at=100),
            Job("important", "chat", 2, ADMITTED, priority=5, created=0, progress_at=999)]
    p = plan(decision(3, 6), 8, jobs, now=1000)
    assert [j.name for j in p.stop] == ["fresh-ckpt", "stale-ckpt"]
    assert p.scale_to == 6 and p.lent_after == 2


def test_plan_scale_converges_whatever_the_deployment_shows() -> None:
    jobs = [Job("a", "chat", 3, ADMITTED)]
    assert plan(decision(3, 3), 8, jobs, 0).scale_to == 5


def test_plan_stops_unadmitted_running_jobs_that_do_not_fit() -> None:
    jobs = [Job("rogue", "chat", 4, "unmanaged")]
    p = plan(decision(0, 0), 8, jobs, 0)
    assert [j.name for j in p.stop] == ["rogue"] and p.scale_to == 8
    adopted = plan(decision(4, 0), 8, jobs, 0)
    assert [j.name for j in adopted.adopt] == ["rogue"] and adopted.scale_to == 4


def test_plan_holds_a_parked_copy_while_its_original_still_runs() -> None:
    jobs = [Job("a", "chat", 2, ADMITTED), Job("a-p1", "chat", 2, PARKED, parked_from="a")]
    assert plan(decision(4, 2), 8, jobs, 0).admit == ()


def test_hysteresis_keeps_spare_replicas_before_lending_more() -> None:
    from dataclasses import replace

    state = ServiceState(((-600.0, 2), (-300.0, 2)))
    spare = replace(POLICY, lend_hysteresis=1)
    d = decide(now=0, policy=spare, baseline=8, lent=4, load=load(10), load_error=None, lending_allowed=True,
               max_age_seconds=120, failed_ticks_before_reclaim=3, state=state)
    assert d.target_lent == 5 and d.ceiling == 5  # needs 2: 6 lendable, one kept spare
    held = decide(now=0, policy=spare, baseline=8, lent=5, load=load(10), load_error=None, lending_allowed=True,
                  max_age_seconds=120, failed_ticks_before_reclaim=3, state=state)
    assert held.action == "hold"
    # Reclaiming ignores the spare: a replica more than the load needs is given back only when needed.
    assert decide(now=0, policy=spare, baseline=8, lent=6, load=load(10), load_error=None, lending_allowed=True,
                  max_age_seconds=120, failed_ticks_before_reclaim=3, state=state).action == "hold"


@pytest.mark.parametrize("gap, lends", [(600.0, True), (601.0, False), (900.0, False)])
def test_a_gap_longer_than_two_ticks_starts_the_window_again(gap: float, lends: bool) -> None:
    d = tick(0, 0, load(10), ServiceState(((-gap, 2),)), tick_seconds=300)
    assert (d.action, d.target_lent, d.state) == (("lend", 2, ServiceState(((-gap, 2), (0.0, 2)))) if lends
                                                  else ("hold", 0, ServiceState(((0.0, 2),))))


@pytest.mark.parametrize("field, value, shown", [("request_rate", float("nan"), "nan"), ("waiting", -1.0, "-1.0"),
                                                 ("kv_cache_usage", float("inf"), "inf")])
def test_an_unusable_number_is_a_failed_tick(field: str, value: float, shown: str) -> None:
    from dataclasses import replace

    d = tick(0, 4, replace(load(10), **{field: value}), ServiceState(((-300.0, 2),)))
    assert d == Decision("chat", "hold", 4, 4, None, f"unusable load reading: {field} = {shown}: no lending",
                         ServiceState((), 1))
