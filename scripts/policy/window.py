"""Whether lending is allowed at a moment: always, or inside a daily window in a time zone."""

from datetime import datetime, time
from zoneinfo import ZoneInfo

from offhours.scripts.policy.config import Schedule


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
