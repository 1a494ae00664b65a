"""Synthetic stress traces: loads the bundled trace does not show, to run the same defaults against.

Each is three days per minute over a quiet diurnal base (peak 1.0 in the afternoon, 0.3 at night),
in requests per minute scaled to `peak_rpm`, with tokens proportional to requests. Deterministic
for a seed. None is used to choose a default: they report what the defaults do under stress.
"""

import math

import numpy as np

from offhours.scripts.simulate.trace import Trace

DAY = 1440
IN_TOKENS, OUT_TOKENS = 600.0, 250.0  # tokens per request


def _base(days: int) -> np.ndarray:
    minute = np.arange(days * DAY)
    return 0.65 - 0.35 * np.cos(2 * math.pi * ((minute % DAY) - 240) / DAY)  # lowest at 04:00, highest at 16:00


def _trace(load: np.ndarray, name: str, peak_rpm: float) -> Trace:
    requests = np.round(load / float(load.max()) * peak_rpm)
    return Trace(requests, requests * IN_TOKENS, requests * OUT_TOKENS, name)


def step_rises(days: int = 3, seed: int = 1, peak_rpm: float = 6000.0) -> Trace:
    """Six times a day the load jumps 2-3x within 2-5 minutes and stays up 30-90 minutes."""
    rng = np.random.default_rng(seed)
    load = _base(days) * 0.4
    for start in np.sort(rng.choice(days * DAY - 200, size=6 * days, replace=False)):
        rise, up, hold = rng.uniform(2.0, 3.0), int(rng.integers(2, 6)), int(rng.integers(30, 91))
        ramp = np.linspace(1.0, rise, up + 1)[1:]
        factor = np.concatenate((ramp, np.full(hold, rise)))
        end = min(load.shape[0], start + factor.shape[0])
        load[start:end] *= factor[: end - start]
    return _trace(load, "stress: 2-3x step rises within minutes", peak_rpm)


def flash_crowd(days: int = 3, peak_rpm: float = 6000.0) -> Trace:
    """Once a day at a different hour, 4x the load within one minute, decaying over an hour."""
    load = _base(days) * 0.3
    for day, hour in zip(range(days), (11, 3, 19)):
        start = day * DAY + hour * 60
        t = np.arange(min(120, load.shape[0] - start))
        load[start:start + t.shape[0]] *= 1.0 + 3.0 * np.exp(-t / 30.0)
    return _trace(load, "stress: flash crowd (4x in a minute)", peak_rpm)


def slow_ramp(days: int = 3, peak_rpm: float = 6000.0) -> Trace:
    """Climb from 15% to 100% of the load over six hours each day, then fall back as slowly."""
    minute = np.arange(days * DAY) % DAY
    up = np.clip((minute - 360) / 360.0, 0.0, 1.0)
    down = np.clip((1080 - minute) / 360.0, 0.0, 1.0)
    load = 0.15 + 0.85 * np.minimum(up, down)
    return _trace(load, "stress: slow six-hour ramp", peak_rpm)


def outage_day(days: int = 3, peak_rpm: float = 6000.0) -> Trace:
    """No traffic for the whole second day (an outage upstream), then the full load at once."""
    load = _base(days)
    load[DAY:2 * DAY] = 0.0
    return _trace(load, "stress: a day of outage, then full load at once", peak_rpm)


def all_traces() -> tuple[Trace, ...]:
    """Every stress trace, in the order the benchmark reports them."""
    return step_rises(), flash_crowd(), slow_ramp(), outage_day()
