"""A lending window's end is a deadline for serving to be whole, not the moment the return starts.

Class: a return timed from the wrong instant (the window's end, where the return then runs past it).
Mechanism: `window.opening` keeps a lend only while more than the return bound plus one decision interval
(plus the server clock's error) is left, and starts a new one only with one interval more; the gate's
`serving_decision` and the simulator both read it.

Invariants, over window shapes and zones (daylight-saving days included), return bounds, decision times at
any phase (one exactly at the deadline and one an interval before it), gaps up to an interval, and a gate
clock off the server's within `ServerClock`'s model:
- whenever replicas are lent or still returning (from a lend until the reclaim's return bound has passed),
  the window is open: at its end serving is at baseline;
- no lend starts with less than the return bound plus an interval left, so what is admitted runs before
  its return must begin.
"""

from datetime import date, datetime, timedelta, timezone
from datetime import time as clock
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from offhours.scripts.cluster.clock import STEP_SECONDS
from offhours.scripts.policy.capacity import Load
from offhours.scripts.policy.config import Capacity, Schedule, ServicePolicy
from offhours.scripts.policy.decide import ServiceState
from offhours.scripts.policy.forecast import return_seconds
from offhours.scripts.policy.serving import Rules, ServingInput, serving_decision
from offhours.scripts.policy.window import (
    CLOCK_ERROR_SECONDS,
    lending_allowed,
    opening,
    opening_at,
    seconds_left,
    seconds_left_at_clock,
)

ZONES = ("UTC", "America/New_York", "Europe/Berlin", "Asia/Kolkata", "Australia/Lord_Howe")
IDLE = Load(0.0, 0.0, 0.0, running=0.0, waiting=0.0, kv_cache_usage=0.0, pods_read=8, pods_expected=8)
BASELINE = 8


def open_throughout(schedule: Schedule, start: float, end: float) -> bool:
    """Whether the window is open at every moment of [start, end): it opens and closes on whole minutes only."""
    minute = (int(start) // 60) * 60
    if not lending_allowed(schedule, datetime.fromtimestamp(start, timezone.utc)):
        return False
    t = minute + 60
    while t < end:
        if not lending_allowed(schedule, datetime.fromtimestamp(t, timezone.utc)):
            return False
        t += 60
    return True


@st.composite
def scenarios(draw: st.DrawFn) -> dict:
    zone = draw(st.sampled_from(ZONES))
    start = draw(st.integers(0, 1439))
    end = draw(st.integers(0, 1439).filter(lambda m: m != start))
    schedule = Schedule("window", clock(start // 60, start % 60), clock(end // 60, end % 60), zone)
    grace = draw(st.floats(0, 900, allow_nan=False))
    cold = draw(st.floats(0, 1800, allow_nan=False))
    interval = draw(st.floats(1, 900, allow_nan=False))
    day = date(2026, 1, 1) + timedelta(days=draw(st.integers(0, 364)))
    anchor = draw(st.sampled_from(("deadline", "interval before", "end - bound", "end - bound - interval",
                                   "any phase")))
    phase = draw(st.floats(0, 1, allow_nan=False))
    # The gate's clock against the server's (ServerClock): behind by at most the Date's truncation and a step
    # it ignores, ahead by at most that step.
    skew = draw(st.floats(-STEP_SECONDS, CLOCK_ERROR_SECONDS, allow_nan=False))
    gaps = draw(st.lists(st.floats(0.05, 1, allow_nan=False), min_size=0, max_size=30))
    before = draw(st.integers(1, 12))
    return dict(schedule=schedule, grace=grace, cold=cold, interval=interval, day=day, anchor=anchor, phase=phase,
                skew=skew, gaps=gaps, before=before)


def decision_times(s: dict, bound: float) -> list[float]:
    """Decisions (server time) around the window's nominal end: regular up to the anchor (the deadline, a return
    bound before the end, or an interval before either), then gaps up to an interval."""
    zone = ZoneInfo(s["schedule"].timezone)
    nominal = datetime.combine(s["day"], s["schedule"].end, tzinfo=zone).timestamp()
    deadline = nominal - bound - s["interval"] - CLOCK_ERROR_SECONDS
    anchor = {"deadline": deadline, "interval before": deadline - s["interval"], "end - bound": nominal - bound,
              "end - bound - interval": nominal - bound - s["interval"],
              "any phase": deadline - s["phase"] * s["interval"]}[s["anchor"]]
    times = [anchor + k * s["interval"] for k in range(-s["before"], 1)]
    for gap in s["gaps"]:  # after the anchor: gaps of any length up to an interval
        times.append(times[-1] + gap * s["interval"])
    while times[-1] < nominal + s["interval"]:
        times.append(times[-1] + s["interval"])
    return times


@settings(max_examples=400, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
@example(dict(schedule=Schedule("window", clock(22, 0), clock(2, 30), "America/New_York"), grace=120.0, cold=240.0,
              interval=300.0, day=date(2026, 3, 8), anchor="deadline", phase=0.0, skew=CLOCK_ERROR_SECONDS, gaps=[],
              before=12)).via("an end the wall clock skips (spring forward): the window closes at 02:00")
@example(dict(schedule=Schedule("window", clock(22, 0), clock(1, 30), "America/New_York"), grace=120.0, cold=240.0,
              interval=60.0, day=date(2026, 11, 1), anchor="interval before", phase=0.0, skew=CLOCK_ERROR_SECONDS,
              gaps=[1.0] * 30, before=3)).via("an end the wall clock shows twice (fall back)")
def test_serving_is_whole_at_the_window_end_and_no_lend_starts_within_the_return(s: dict) -> None:
    policy = ServicePolicy("chat", Capacity(requests_per_second=10.0), stabilization_seconds=0.0, lend_hysteresis=0,
                           max_grace_seconds=s["grace"], cold_start_seconds=s["cold"], schedule=s["schedule"])
    bound = return_seconds(policy)
    rules = Rules(s["interval"], float("inf"), 3)
    lent, state = 0, ServiceState()
    since: float | None = None  # when the lent replicas were first lent (serving short from then)
    for t in decision_times(s, bound):
        d = serving_decision(rules, ServingInput(policy, BASELINE, lent, IDLE, None, state), t - s["skew"])
        state = d.state
        if d.target_lent > lent:
            assert open_throughout(s["schedule"], t, t + bound + 2 * s["interval"]), \
                f"a lend at {t} would have to return before it ran an interval"
            since = t if since is None else since
        elif d.target_lent < lent and d.target_lent == 0:
            assert since is not None
            # Serving is short from the first lend until this return has served: the window must be open throughout.
            assert open_throughout(s["schedule"], since, t + bound), \
                f"serving short past the window's end: lent from {since}, return begun at {t}, bound {bound}"
            since = None
        lent = d.target_lent
    if since is not None:  # still lent at the last decision (the window may have opened again): open all along
        assert open_throughout(s["schedule"], since, t), f"lent from {since} across a closed window to {t}"


@pytest.mark.parametrize("offset, keep, lend", [
    (0.0, False, False),  # exactly at the deadline: the return begins now
    (0.001, True, False),  # just before it: kept, but nothing new
    (60.0, True, False),  # one interval before: the last decision that keeps; a new lend would not run
    (60.001, True, True),
])
def test_the_deadline_and_one_interval_before_it(offset: float, keep: bool, lend: bool) -> None:
    bound, interval = 360.0, 60.0
    window = opening(bound + interval + CLOCK_ERROR_SECONDS + offset, bound, interval)
    assert (window.keep, window.lend) == (keep, lend)


def test_no_window_is_always_open_and_a_bad_bound_is_refused() -> None:
    assert opening(None, 10.0, 10.0).lend
    for bad in (float("nan"), float("inf"), -1.0):
        with pytest.raises(ValueError, match="lending window: return bound"):
            opening(3600.0, bad, 10.0)


def test_the_clock_error_covers_the_server_clock() -> None:
    """The gate's now may lag the server by the Date's truncation (1 s) plus a step it ignores."""
    assert CLOCK_ERROR_SECONDS >= STEP_SECONDS + 1.0


def test_seconds_left_in_real_time_across_a_daylight_saving_change() -> None:
    """22:00-06:00 in Berlin on the night summer time ends is nine hours long, not eight."""
    night = Schedule("window", clock(22, 0), clock(6, 0), "Europe/Berlin")
    at = datetime(2026, 10, 24, 22, 0, tzinfo=ZoneInfo("Europe/Berlin"))
    assert seconds_left(night, at) == 9 * 3600.0
    assert seconds_left_at_clock(night, clock(22, 0)) == 8 * 3600.0  # the simulator's wall-clock day
    assert seconds_left(night, datetime(2026, 10, 25, 7, 0, tzinfo=timezone.utc)) == 0.0  # closed


def test_gate_and_simulator_read_the_same_opening() -> None:
    """The simulator's masks are `opening` with the fleet's return bound and a tick between decisions."""
    import dataclasses

    import numpy as np

    from offhours.scripts.simulate import engine as E
    from offhours.scripts.simulate.fleet import default_fleet
    from offhours.scripts.simulate.trace import load_trace

    fleet = default_fleet(load_trace())
    night = Schedule("window", clock(22, 0), clock(6, 0), "UTC")
    spec = dataclasses.replace(fleet.services[0], policy=dataclasses.replace(fleet.services[0].policy, schedule=night))
    fleet = dataclasses.replace(fleet, start_time=datetime(2026, 7, 1, tzinfo=timezone.utc).timestamp())
    assert fleet.start_time is not None
    minutes = np.arange(0, 1440)
    masks = E.window_openings(spec, fleet, minutes)
    assert masks is not None
    bound = E.return_minutes(spec, fleet) * 60.0
    for m in (0, 300, 359, 360 - int(bound // 60) - 2, 1319, 1320):
        expected = opening_at(night, fleet.start_time + 60.0 * m, bound, fleet.tick_minutes * 60.0)
        assert (bool(masks[0][m]), bool(masks[1][m])) == (expected.keep, expected.lend), m
    # Serving is whole at 06:00: the last kept minute is at least the return bound and a tick before it.
    last_kept = int(np.flatnonzero(masks[0][:360])[-1])
    assert 360 - (last_kept + fleet.tick_minutes) >= bound / 60.0


@pytest.mark.parametrize("grace, cold", [(2.0, 4.0), (0.5, 9.0)])
def test_the_simulator_shows_serving_whole_at_each_window_end(grace: float, cold: float) -> None:
    """Replayed over two nights with jobs that would run all night, serving is at its baseline at 06:00 each day."""
    import dataclasses

    import numpy as np

    from offhours.scripts.simulate import engine as E
    from offhours.scripts.simulate.fleet import JobSpec, parse_fleet
    from offhours.scripts.simulate.trace import parse_trace

    rows = "".join(f"{i},60,0,0\n" for i in range(2 * 1440))  # 1 request/s: 1 of 10 replicas busy
    trace = parse_trace("minute,requests,input_tokens,output_tokens\n" + rows)
    fleet = parse_fleet({"tickMinutes": 1, "coldStartMinutes": cold, "graceMinutes": grace, "services": {"chat": {
        "baseline": 10, "capacity": {"requestsPerSecond": 1.0}, "stabilizationSeconds": 300, "maxLendStep": 10,
        "trend": False, "volatilityHeadroomMax": 0.0, "lendHysteresis": 0, "maxGraceSeconds": 60 * grace}}})
    night = Schedule("window", clock(22, 0), clock(6, 0), "UTC")  # minute 0 of the trace: a local midnight
    spec = dataclasses.replace(fleet.services[0], policy=dataclasses.replace(fleet.services[0].policy, schedule=night))
    jobs = [JobSpec(f"job-{i}", "chat", 4, 20.0, 30.0) for i in range(4)]
    sim = E.ServiceSim(spec, fleet, E.service_rates(trace, spec), [E.SimJob(j) for j in jobs])
    sim.run(E.GateController(sim))
    capacity = E.events_to_array(sim.capacity_events, spec.baseline, trace.minutes)
    lent = E.events_to_array(sim.lent_events, 0, trace.minutes)
    assert lent[:360].max() > 0 and lent[1320:1800].max() > 0  # it lends at night
    for end in (360, 1800):
        assert capacity[end] == spec.baseline, f"serving short at the window's end (minute {end})"
        bound = E.return_minutes(spec, fleet)
        returned = int(np.flatnonzero(lent[:end] > 0)[-1]) + 1  # the minute the last lend was reclaimed
        assert end - returned >= bound, "the return began less than a return bound before the end"
