"""The one clock offhours dates and ages anything by: the API server's (pure: no I/O).

Every process of offhours (the gate's loop, a one-shot tick, the reclaim check, the backstop CronJob)
runs on some node whose clock may be a day off. A time one of them writes (the gate's record, its
lending lease) and another reads must come from one clock, or skew decides: a backstop on a node
ahead would restore serving while the gate is live, one behind would never restore. So no decision
reads a node's wall clock: `now` is the API server's, as this process last heard it (the `Date` of
an answer), advanced on this process's own monotonic clock since (a process's monotonic clock has
no meaning to any other, and a node's wall clock stepping does not move it).

Liveness of another process is judged without any clock of its own: the Lease's holder by observing
its record change (`lease.LeaseObserver`), the gate's lending by the server time of its last renewal.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timezone
from email.utils import parsedate_to_datetime


def parse_http_date(text: str | None) -> float | None:
    """Return an HTTP `Date` header (RFC 9110: `Thu, 03 Dec 2026 10:31:07 GMT`) as Unix seconds, or None if unreadable."""
    if not text:
        return None
    try:
        parsed = parsedate_to_datetime(text)
        # An asctime or "-0000" date parses naive: HTTP dates are UTC, never the pod's local time.
        return (parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=timezone.utc)).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


# A reading this far below the clock's projection is the server's clock stepped back, not the Date's truncation
# to the whole second (1 s) nor an answer's transit.
STEP_SECONDS = 2.0
# A reading this far from the clock's projection is taken only once a second reading confirms it: one garbage Date
# (year 9998, a badly skewed replica) must not move the clock by days.
ABSURD_SECONDS = 86_400.0


@dataclass
class ServerClock:
    """The API server's time as this process knows it: the `Date` of its latest answer, plus monotonic time since.

    It follows the server both ways (a clock stepped back, a replica behind the one heard before), so one answer
    dated ahead cannot hold it ahead for the process's life; a jump of more than `ABSURD_SECONDS` waits for a
    second reading that agrees with it.
    """

    monotonic: Callable[[], float] = time.monotonic
    _heard: tuple[float, float] | None = field(default=None, repr=False)  # (server seconds, monotonic seconds)
    _unconfirmed: tuple[float, float] | None = field(default=None, repr=False)  # a far jump, until confirmed

    def heard(self, server_seconds: float) -> None:
        """Take the server's time from an answer received now (its `Date`: whole seconds, so never ahead of it)."""
        heard_at = self.monotonic()
        if self._heard is None:
            self._heard = (server_seconds, heard_at)
            return
        gap = server_seconds - _projected(self._heard, heard_at)
        if abs(gap) > ABSURD_SECONDS:
            candidate, self._unconfirmed = self._unconfirmed, (server_seconds, heard_at)
            if candidate is None or abs(server_seconds - _projected(candidate, heard_at)) > STEP_SECONDS:
                return  # not (yet) confirmed: the clock stays where the earlier readings put it
        self._unconfirmed = None
        # Date truncates to the second: a reading a little behind the projection says nothing new.
        if gap > 0 or gap < -STEP_SECONDS:
            self._heard = (server_seconds, heard_at)

    def now(self) -> float | None:
        """Return the server's time now, or None before any answer was heard."""
        if self._heard is None:
            return None
        return _projected(self._heard, self.monotonic())


def _projected(reading: tuple[float, float], at: float) -> float:
    server, heard_at = reading
    return server + max(0.0, at - heard_at)
