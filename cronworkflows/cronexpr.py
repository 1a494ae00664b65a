"""Cron expressions as Argo's CronWorkflow controller reads them, and their next firings.

Argo v4 parses each of `spec.schedules` with robfig/cron's standard parser in `spec.timezone`,
and its CRD admits only digits and `* , / ? -` (no names such as MON) or a descriptor. This module
accepts exactly that: five fields (minute, hour, day of month, month, day of week 0-6 with 0 =
Sunday), `*`/`?`, lists, ranges, steps (`a/n` means `a-max/n`), and `@yearly`, `@annually`,
`@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly`. `@every` is refused: a constant delay
drifts with controller restarts, which no nightly run wants.

Day of month and day of week combine as in robfig/cron (and Vixie cron): if either field starts
with `*` or `?` (without a step above 1), both must match; otherwise either may. A wall-clock time
that does not exist in the time zone (the hour skipped when clocks go forward) is no firing; one
that exists twice (clocks go back) fires once, at its first occurrence.
"""

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12), ("day of week", 0, 6))
# Far enough for any valid expression to fire (Feb 29 on a given weekday recurs within 28 years).
_SEARCH_YEARS = 29


class CronError(ValueError):
    """A cron expression or time zone Argo would refuse; the message names it."""


@dataclass(frozen=True)
class CronSchedule:
    """A parsed five-field cron expression: the allowed values of each field."""

    expression: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    any_day: bool  # day of month started with * or ?
    any_weekday: bool  # day of week started with * or ?

    def matches_day(self, day: date) -> bool:
        """Return whether the schedule fires on `day` (month, day of month and day of week)."""
        if day.month not in self.months:
            return False
        dom = day.day in self.days
        dow = (day.isoweekday() % 7) in self.weekdays
        return dom and dow if self.any_day or self.any_weekday else dom or dow


def _field(text: str, name: str, low: int, high: int) -> tuple[frozenset[int], bool]:
    values: set[int] = set()
    star = False
    for part in text.split(","):
        span, slash, step_text = part.partition("/")
        if slash and (not step_text.isdigit() or int(step_text) == 0):
            raise CronError(f"{name} {part!r}: the step must be a whole number above 0")
        step = int(step_text) if slash else 1
        if span in ("*", "?"):
            start, end = low, high
            star = star or step == 1
        else:
            first, dash, last = span.partition("-")
            if not first.isdigit() or (dash and not last.isdigit()):
                raise CronError(f"{name} {part!r}: expected a number, a range a-b, * or ?, with an optional /step")
            start = int(first)
            end = int(last) if dash else (high if slash else start)
            if start < low or end > high:
                raise CronError(f"{name} {part!r}: out of range {low}-{high}")
            if start > end:
                raise CronError(f"{name} {part!r}: the range starts after it ends")
        values.update(range(start, end + 1, step))
    return frozenset(values), star


def parse_cron(expression: str) -> CronSchedule:
    """Parse `expression` as Argo v4 would; raise CronError naming what is wrong."""
    text = " ".join(expression.split())
    if text.startswith("@every"):
        raise CronError(f"cron {expression!r}: @every is not supported for research schedules; use five fields")
    text = _DESCRIPTORS.get(text, text)
    if text.startswith("@"):
        raise CronError(f"cron {expression!r}: unknown descriptor (known: {', '.join(_DESCRIPTORS)})")
    parts = text.split(" ")
    if len(parts) != 5:
        raise CronError(f"cron {expression!r}: expected 5 fields (minute hour day-of-month month day-of-week), "
                        f"got {len(parts)}")
    try:
        fields = [_field(part, name, low, high) for part, (name, low, high) in zip(parts, _FIELDS)]
    except CronError as err:
        raise CronError(f"cron {expression!r}: {err}") from None
    (minutes, _), (hours, _), (days, any_day), (months, _), (weekdays, any_weekday) = fields
    return CronSchedule(expression, minutes, hours, days, months, weekdays, any_day, any_weekday)


def time_zone(name: str) -> ZoneInfo:
    """Return the IANA time zone `name`; raise CronError if there is no such zone."""
    try:
        if not name or name != name.strip() or name.startswith(("/", ".")):
            raise ValueError(name)
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise CronError(f"time zone {name!r} is not an IANA time zone (e.g. UTC, Asia/Seoul)") from None


def _exists(local: datetime) -> bool:
    # A wall-clock time in a gap (clocks went forward) does not survive a round trip through UTC.
    assert local.tzinfo is not None
    return local.astimezone(ZoneInfo("UTC")).astimezone(local.tzinfo).replace(tzinfo=None) == local.replace(tzinfo=None)


def next_firings(schedule: CronSchedule, zone: ZoneInfo, after: datetime, count: int = 1) -> list[datetime]:
    """Return the next `count` firings strictly after `after` (timezone-aware), in `zone`."""
    start = after.astimezone(zone)
    # Compared as instants: aware datetimes of one tzinfo compare by wall clock, wrong across a fold.
    after_ts = after.timestamp()
    out: list[datetime] = []
    day = start.date()
    last_day = day + timedelta(days=366 * _SEARCH_YEARS)
    while len(out) < count and day <= last_day:
        if schedule.matches_day(day):
            for hour in sorted(schedule.hours):
                for minute in sorted(schedule.minutes):
                    local = datetime.combine(day, time(hour, minute), tzinfo=zone)
                    if local.timestamp() > after_ts and _exists(local):
                        out.append(local)
                        if len(out) == count:
                            return out
        day += timedelta(days=1)
    return out
