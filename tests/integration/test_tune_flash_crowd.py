"""`tune` on the shipped traces with a flash crowd planted in a fitting window: it must not buy headroom for it.

A single split fitted on a week holding one flash crowd over-protected and lent about a quarter less on the
calm week after (issue 34). With rolling folds, the flash crowd is validated by the folds fitted before it,
where it has no precedent (its delay is told apart, bounded by the reaction time), and fitted on by the folds
after it, whose calm validation days it cannot make lend less. Invariants: the recommendation with the flash
crowd lends, on every calm fold, at least what the recommendation without it lends there (less the margin
near ties leave), with no more headroom; the flash crowd's delay is reported, and apart.
"""

import dataclasses

import numpy as np
import pytest

from offhours.scripts.simulate.fleet import default_fleet, generated_jobs
from offhours.scripts.simulate.trace import Trace, load_trace
from offhours.scripts.simulate.tune import SHARE_TOLERANCE, tune

DAY = 1440
FLASH_DAY, FLASH_HOUR = 8, 11
GRID = {"headrooms": (0.3, 0.5, 0.65, 1.0), "look_ahead": ("none", "trend"), "hysteresis": (0,),
        "stabilization": (1.0,)}


def _with_flash_crowd(trace: Trace) -> Trace:
    """4x the load within a minute at day 8 11:00, decaying over an hour (scripts/simulate/stress.py's shape)."""
    start = FLASH_DAY * DAY + FLASH_HOUR * 60
    t = np.arange(120)
    factor = np.ones(trace.minutes)
    factor[start:start + 120] = 1.0 + 3.0 * np.exp(-t / 30.0)
    return Trace(trace.requests * factor, trace.input_tokens * factor, trace.output_tokens * factor,
                 f"{trace.name} + flash crowd")


@pytest.mark.parametrize("name", ["m-small", "m-mid"])
def test_a_flash_crowd_in_the_fitting_window_does_not_drive_the_headroom_up(name: str) -> None:
    calm = load_trace(name)
    fleet = default_fleet(calm)
    fleet = dataclasses.replace(fleet, services=fleet.services[:1])
    jobs = generated_jobs(fleet, per_service=400)
    [clean] = tune(calm, fleet, jobs, 0, workers=2, **GRID)
    [flash] = tune(_with_flash_crowd(calm), fleet, jobs, 0, workers=2, **GRID)
    folds = flash.folds
    validated = [i for i, f in enumerate(folds) if f.validation[0] <= FLASH_DAY < f.validation[1]]
    fitted = [i for i, f in enumerate(folds) if f.fit[0] <= FLASH_DAY < f.fit[1]]
    assert validated and fitted  # the flash crowd is validated by some folds and fitted on by others
    calm_folds = [i for i in range(len(folds)) if i not in validated]
    assert flash.chosen.knobs.headroom <= clean.chosen.knobs.headroom
    for i in calm_folds:
        assert flash.chosen.folds[i].share_of_reference >= clean.chosen.folds[i].share_of_reference - SHARE_TOLERANCE
    # Its delay is in the table, total and apart, never hidden: the defaults' too.
    for i in validated:
        d = flash.defaults.folds[i]
        assert d.delay_without_precedent <= d.delay_minutes
    assert any(flash.defaults.folds[i].delay_without_precedent > 0 for i in validated) or all(
        flash.defaults.folds[i].delay_minutes == 0 for i in validated)
