"""Whether lending is allowed at a moment: always, or inside a daily window in a time zone (pure: no I/O).

A window's end is a deadline for serving to be whole, not the moment the return starts. Giving lent replicas
back takes the service's return bound (`forecast.return_seconds`: the victims' grace cap, then the cold start),
and the gate acts only when it decides (a tick, or a reclaim check between ticks: at most one interval apart).
So `opening` keeps a lend only while more than bound + interval (+ the clock's error) is left before the end:
the last decision before that point starts the return at least one bound before the end, and serving is
back at baseline by then. A new lend (an admission) needs one interval more, so what is admitted runs for at
least one interval before its return must begin, never only to be stopped at the next decision.
The gate (`policy.serving`) and the simulator (`simulate.engine`) both call `opening` with the same inputs.
"""

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo

from offhours.scripts.policy.config import Schedule

# The gate's `now` is the API server's time as `cluster.clock.ServerClock` knows it: an HTTP Date, truncated to
# the second, and readings up to its STEP_SECONDS (2 s) behind its projection ignored. So it may lag the
# server by up to 3 s: the deadline is moved that much earlier (a test checks the two stay in step).
CLOCK_ERROR_SECONDS = 3.0
DAY_SECONDS = 86_400.0


@dataclass(frozen=True)
class Opening:
    """What a lending window allows at one moment."""

    keep: bool  # what is lent may stay lent: the return for the window's end has not had to begin
    lend: bool  # a new lend may start: it would run at least one decision interval before that return

    def __post_init__(self) -> None:
        if self.lend and not self.keep:
            raise ValueError("an opening that lends must keep what it lends")


ALWAYS = Opening(True, True)
CLOSED = Opening(False, False)


def lending_allowed(schedule: Schedule, now: datetime) -> bool:
    """Return whether `now` (timezone-aware) lies in the schedule's lending time."""
    if schedule.mode == "continuous":
        return True
    return allowed_at_clock(schedule, now.astimezone(ZoneInfo(schedule.timezone)).time())


def allowed_at_clock(schedule: Schedule, local: time) -> bool:
    """Return whether the local time of day `local` (in the schedule's time zone) lies in its lending time."""
    if schedule.mode == "continuous":
        return True
    assert schedule.start is not None and schedule.end is not None
    if schedule.start < schedule.end:
        return schedule.start <= local < schedule.end
    return local >= schedule.start or local < schedule.end  # the window crosses midnight


def seconds_left(schedule: Schedule, now: datetime) -> float | None:
    """Return the seconds from `now` (timezone-aware) to the end of the window it lies in; 0 outside; None: always.

    The end is a wall-clock time in the schedule's zone: across a daylight-saving change the window is an hour
    shorter or longer, and the seconds left are counted in real time, not on the wall clock.
    """
    if schedule.mode == "continuous":
        return None
    zone = ZoneInfo(schedule.timezone)
    local = now.astimezone(zone)
    if not allowed_at_clock(schedule, local.time()):
        return 0.0
    assert schedule.end is not None
    day: date = local.date() if local.time() < schedule.end else local.date() + timedelta(days=1)
    # An end the wall clock skips (spring forward) or shows twice (fall back) is met at the earlier instant it
    # could name: the window closes no later than that. Timestamps, not an aware difference (in one zone: wall time).
    end = min(datetime.combine(day, schedule.end, tzinfo=zone).replace(fold=f).timestamp() for f in (0, 1))
    return max(0.0, end - now.timestamp())


def seconds_left_at_clock(schedule: Schedule, local: time) -> float | None:
    """Return the seconds from the local time of day `local` to its window's end on the wall clock; 0 outside; None: always."""
    if schedule.mode == "continuous":
        return None
    if not allowed_at_clock(schedule, local):
        return 0.0
    assert schedule.end is not None
    at = local.hour * 3600.0 + local.minute * 60.0 + local.second + local.microsecond / 1e6
    end = schedule.end.hour * 3600.0 + schedule.end.minute * 60.0 + schedule.end.second
    return (end - at) % DAY_SECONDS or DAY_SECONDS


def opening(left: float | None, return_seconds: float, interval_seconds: float) -> Opening:
    """Return what the window allows with `left` seconds before its end (None: no window).

    `return_seconds`: the service's return bound; `interval_seconds`: the longest time between two decisions.
    A bound or interval that is not a finite number >= 0 is an error, never a window that stays open.
    """
    for name, value in (("return bound", return_seconds), ("decision interval", interval_seconds)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
            raise ValueError(f"lending window: {name} {value!r}: expected a finite number of seconds >= 0")
    if left is None:
        return ALWAYS
    deadline = return_seconds + interval_seconds + CLOCK_ERROR_SECONDS  # the return must have begun by here
    return Opening(keep=left > deadline, lend=left > deadline + interval_seconds)


def opening_at(schedule: Schedule, now: float, return_seconds: float, interval_seconds: float) -> Opening:
    """Return what `schedule` allows at Unix time `now` (the API server's), for a service with that return bound."""
    return opening(seconds_left(schedule, datetime.fromtimestamp(now, timezone.utc)), return_seconds, interval_seconds)
