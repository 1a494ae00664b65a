"""`tune`: cross-validation over rolling folds of days, rises without precedent told apart, never worse than the defaults."""

import dataclasses

import numpy as np
import pytest

from offhours.scripts.config.loader import parse_config
from offhours.scripts.simulate.engine import reaction_minutes
from offhours.scripts.simulate.fleet import default_fleet, generated_jobs
from offhours.scripts.simulate.trace import Trace, TraceError
from offhours.scripts.simulate.tune import (
    REFUSE_MARGIN,
    Candidate,
    FoldScore,
    Knobs,
    choose,
    config_fragment,
    largest_rise,
    rolling_folds,
    text_report,
    tune,
    worse_than_defaults,
)

DAY = 1440


def _diurnal(days: int, step_day: int | None = None, step: float = 1.0, hour: int = 4) -> Trace:
    minute = np.arange(days * DAY)
    load = 0.65 - 0.35 * np.cos(2 * np.pi * ((minute % DAY) - 240) / DAY)
    if step_day is not None:  # one unprecedented step: 1 + `step` times the load for an hour, from `hour`
        at = step_day * DAY + hour * 60
        load[at:at + 60] *= 1.0 + step
    requests = np.round(load * 3000.0)
    return Trace(requests, requests * 600.0, requests * 250.0, "synthetic")


def _one_service(trace: Trace) -> tuple:
    """One service configured lean (no hysteresis, no volatility term): a step it was not fitted on costs delay."""
    fleet = default_fleet(trace)
    spec = fleet.services[0]
    spec = dataclasses.replace(spec, policy=dataclasses.replace(spec.policy, lend_hysteresis=0,
                                                                 volatility_headroom_max=0.0))
    fleet = dataclasses.replace(fleet, services=(spec,))
    return fleet, generated_jobs(fleet, per_service=60)


def _cand(headroom: float, shares: list[float], delays: list[int], apart: list[int] | None = None,
          look: str = "trend") -> Candidate:
    apart = apart or [0] * len(shares)
    return Candidate(Knobs(headroom, look, 0, 900.0),
                     tuple(FoldScore(s, d, a, 0, 0, 0.0) for s, d, a in zip(shares, delays, apart)))


def test_folds_are_every_window_of_half_the_days_validated_on_the_days_after_it() -> None:
    folds = rolling_folds(14)
    assert [(f.fit, f.validation) for f in folds] == [((i, i + 7), (i + 7, i + 9)) for i in range(6)]
    assert [(f.fit, f.validation) for f in rolling_folds(3)] == [((0, 1), (1, 2)), ((1, 2), (2, 3))]
    for days in range(3, 30):  # invariant: validation days always follow their fitting window, inside the trace
        for f in rolling_folds(days):
            assert f.fit[1] == f.validation[0] and f.validation[1] <= days and f.fit[0] >= 0
        assert rolling_folds(days)[-1].validation[1] == days  # the last days are validated
    with pytest.raises(TraceError, match="at least 3 whole days"):
        rolling_folds(2)


def test_the_best_worst_fold_within_the_budget_is_chosen_not_the_best_average() -> None:
    steady = _cand(0.5, [0.70, 0.70, 0.70], [0, 0, 0])
    spiky = _cand(0.4, [0.95, 0.95, 0.60], [0, 0, 0])
    lean = _cand(0.3, [0.90, 0.90, 0.90], [0, 3, 0])
    assert choose([steady, spiky, lean], 0) == (steady, True)
    assert choose([steady, spiky, lean], 3) == (lean, True)


def test_delay_a_rise_without_precedent_explains_does_not_count_against_the_budget() -> None:
    excused = _cand(0.3, [0.90, 0.90], [0, 8], apart=[0, 8])
    wide = _cand(1.0, [0.50, 0.50], [0, 0])
    assert choose([excused, wide], 0) == (excused, True)


def test_near_ties_go_to_the_safer_setting_and_nothing_within_the_budget_is_said() -> None:
    lean = _cand(0.5, [0.800], [0], look="none")
    safe = _cand(0.6, [0.795], [0], look="trend")
    assert choose([lean, safe], 0)[0] is safe
    a, b = _cand(0.3, [0.9], [5]), _cand(0.6, [0.7], [2])
    assert choose([a, b], 0) == (b, False)


def test_a_setting_worse_than_the_defaults_on_one_fold_is_refused() -> None:
    defaults = _cand(0.65, [0.70, 0.70], [0, 0])
    better = _cand(0.5, [0.75, 0.70 - REFUSE_MARGIN + 0.001], [0, 0])
    worse = _cand(0.4, [0.90, 0.70 - REFUSE_MARGIN - 0.01], [0, 0])
    delayed = _cand(0.4, [0.90, 0.90], [0, 2])
    assert worse_than_defaults(better, defaults, 0) == []
    assert [w.split(":")[0] for w in worse_than_defaults(worse, defaults, 0)] == ["fold 1"]
    assert worse_than_defaults(delayed, defaults, 2) == []
    assert "delay-minutes" in worse_than_defaults(delayed, defaults, 1)[0]


def test_largest_rise_is_measured_over_one_reaction_time() -> None:
    """A 3x step (from 1 to 3 times the level within a minute) reads as +200% of the level where it starts."""
    trace = _diurnal(3, step_day=1, step=2.0)
    fleet, _ = _one_service(trace)
    rise = largest_rise(trace, fleet.services[0], fleet)
    assert rise.ratio == pytest.approx(2.0, rel=0.02)
    spec = fleet.services[0]
    assert rise.minute // DAY == 1 and rise.reaction_minutes == reaction_minutes(spec, fleet)


def test_tuned_fragment_is_a_valid_gate_config_with_the_chosen_knobs() -> None:
    trace = _diurnal(4)
    fleet, jobs = _one_service(trace)
    [t] = tune(trace, fleet, jobs, 0, workers=1, headrooms=(0.3, 0.65, 1.0), look_ahead=("none", "trend"),
               hysteresis=(0, 1), stabilization=(1.0,))
    assert t.within_budget and t.chosen.worst_delay == 0 and len(t.chosen.folds) == len(t.folds) == 2
    policy = parse_config(config_fragment([t], fleet)).service(fleet.services[0].name)
    assert (policy.headroom, policy.trend, policy.lend_hysteresis) == (
        t.chosen.knobs.headroom, t.chosen.knobs.look_ahead != "none", t.chosen.knobs.lend_hysteresis)
    assert t.defaults in t.candidates  # the defaults are replayed beside every setting


def test_an_unprecedented_step_on_a_validation_day_is_told_apart_and_shown_beside_the_total() -> None:
    """A 2x step no fitting day showed: its delay (about one reaction time) is apart, the total beside it."""
    trace = _diurnal(4, step_day=3, step=1.0)
    fleet, jobs = _one_service(trace)
    [t] = tune(trace, fleet, jobs, 0, workers=1, headrooms=(0.3,), look_ahead=("trend",), hysteresis=(0,),
               stabilization=(1.0,))
    lean = next(c for c in t.candidates if c.knobs.headroom == 0.3)
    last = lean.folds[-1]  # fit on days 1-2, validated on day 3: the step
    assert last.delay_minutes > 0 and last.delay_without_precedent == last.delay_minutes
    assert last.delay_minutes <= t.rise.reaction_minutes + 2
    assert lean.worst_delay == 0  # it does not count against the budget
    report = text_report([t], 0, 30.0)
    assert f"{last.delay_minutes:5d} ({last.delay_without_precedent:3d})" in report
    assert "rise without precedent" in report and "defaults:" in report
