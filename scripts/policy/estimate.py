"""An estimate of a requested job's start and preemptions: its types and the summary of outcomes (pure).

The replays that make the outcomes are the simulator's (scripts/simulate/estimate.py); the console
and the job page read these types only.
"""

import json
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from offhours.scripts.policy.partial import Missing

MAX_DAYS = 14  # outcomes: one per past day
MAX_HOURS = 48.0  # a request longer than this is estimated over its first 48 hours
# A hole in a service's history (no pod sampled) this long at most is bridged by a straight line; before a
# longer one nothing is replayed: a day drawn flat across a scrape outage is a made-up day, not a recent one.
MAX_BRIDGED_MINUTES = 15

ASSUMPTIONS = (
    "the load of the coming hours is like that of one of the service's recent days at the same time of day "
    "(one outcome per day)",
    "the gate's own policy (decide and plan, as the simulator replays them) with the gate configuration's "
    "capacity, headroom, stabilisation window, tick, check period and cold start",
    "the jobs ahead (running now, then the parked ones before it in the queue) each need as long as this request",
    "a preempted job loses its work since its last checkpoint and waits again; GPU-hours lost count that work "
    "at the request's size",
)


@dataclass(frozen=True)
class JobAhead:
    """A job the request would queue behind: its size, priority, and whether it holds lent replicas now."""

    replicas: int
    priority: int = 0
    running: bool = False


@dataclass(frozen=True)
class JobRequest:
    """What a researcher asks for: replicas of a service, for so many hours, checkpointing that often."""

    replicas: int
    hours: float
    checkpoint_minutes: float
    priority: int = 0


@dataclass(frozen=True)
class Outcome:
    """What happened to the request on one replayed day."""

    day_offset: int  # days before now
    start_minutes: float  # math.inf: not admitted within the horizon
    preemptions: int
    lost_gpu_hours: float


@dataclass(frozen=True)
class Estimate:
    """The spread of the outcomes, and what it rests on."""

    days: int  # outcomes (replayed days)
    horizon_minutes: int
    start_median_minutes: float  # math.inf: later than the horizon
    start_p90_minutes: float
    preemption_chance: float  # share of days with at least one preemption
    lost_gpu_hours: float  # mean over the days
    outcomes: tuple[Outcome, ...]
    assumptions: tuple[str, ...] = ASSUMPTIONS
    missing: tuple[Missing, ...] = ()  # inputs it was made without (policy/partial.py says them); () when whole
    kind: Literal["estimate"] = "estimate"


class EstimateError(ValueError):
    """No estimate can be made: names why (too little history, a request out of range)."""


def percentile(values: list[float], share: float) -> float:
    """Return the nearest-rank percentile (inf-aware: an unfinished wait is later than any finished one)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(share * len(ordered)))
    return ordered[rank - 1]


def usable_from(known: np.ndarray, bridged: int = MAX_BRIDGED_MINUTES) -> int:
    """Return the first minute after the history's last hole of more than `bridged` unknown minutes (0: none).

    `known[m]`: some pod of the service was sampled in minute m. The history from there to its end is what a replay
    may use; all of it unknown returns its length.
    """
    known = np.asarray(known, dtype=np.bool_)
    unknown = np.flatnonzero(~known)
    if unknown.size == 0:
        return 0
    # Runs of unknown minutes: where consecutive indices break.
    breaks = np.flatnonzero(np.diff(unknown) > 1)
    starts = np.concatenate(([unknown[0]], unknown[breaks + 1]))
    ends = np.concatenate((unknown[breaks], [unknown[-1]]))
    long = np.flatnonzero(ends - starts + 1 > bridged)
    return 0 if long.size == 0 else int(ends[long[-1]]) + 1


RECORD_BYTES = 2048  # an estimate record on a workflow is a tenant-writable annotation: longer is not ours


def estimate_record(estimate: Estimate, request: JobRequest, made_at: str) -> str:
    """Return the estimate as the JSON the job page keeps on the workflow (inf as null: later than the horizon)."""
    def minutes(value: float) -> float | None:
        return None if math.isinf(value) else round(value, 1)

    return json.dumps({"madeAt": made_at, "days": estimate.days, "horizonMinutes": estimate.horizon_minutes,
                       "startMedianMinutes": minutes(estimate.start_median_minutes),
                       "startP90Minutes": minutes(estimate.start_p90_minutes),
                       "preemptionChance": round(estimate.preemption_chance, 3),
                       "lostGpuHours": round(estimate.lost_gpu_hours, 2), "hours": request.hours,
                       "checkpointMinutes": request.checkpoint_minutes, "partial": bool(estimate.missing)},
                      separators=(",", ":"))


_RECORD_NUMBERS = ("days", "horizonMinutes", "preemptionChance", "lostGpuHours", "hours", "checkpointMinutes")


def parse_estimate_record(text: object) -> dict[str, object] | None:
    """Return a kept estimate, or None for anything that is not one (the annotation is anyone's to edit)."""
    if not isinstance(text, str) or len(text.encode()) > RECORD_BYTES:
        return None
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("madeAt"), str) or len(raw["madeAt"]) > 40:
        return None
    for key in _RECORD_NUMBERS:
        value = raw.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            return None
    for key in ("startMedianMinutes", "startP90Minutes"):
        value = raw.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value) or value < 0):
            return None
    if raw["preemptionChance"] > 1:
        return None
    # Made without part of its inputs (policy/partial.py): the job page says so beside it. Absent in older records.
    return {**{k: raw[k] for k in ("madeAt", "startMedianMinutes", "startP90Minutes", *_RECORD_NUMBERS)},
            "partial": raw.get("partial") is True}
