"""Whether lending is allowed at a moment: always, or inside a daily window in a time zone."""

from datetime import datetime
from zoneinfo import ZoneInfo

from offhours.scripts.policy.config import Schedule


def lending_allowed(schedule: Schedule, now: datetime) -> bool:
    """Return whether `now` (timezone-aware) lies in the schedule's lending time."""
    if schedule.mode == "continuous":
        return True
    assert schedule.start is not None and schedule.end is not None
    local = now.astimezone(ZoneInfo(schedule.timezone)).time()
    if schedule.start < schedule.end:
        return schedule.start <= local < schedule.end
    return local >= schedule.start or local < schedule.end  # the window crosses midnight
