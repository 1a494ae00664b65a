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
from email.utils import parsedate_to_datetime


def parse_http_date(text: str | None) -> float | None:
    """Return an HTTP `Date` header (RFC 9110: `Thu, 03 Dec 2026 10:31:07 GMT`) as Unix seconds, or None if unreadable."""
    if not text:
        return None
    try:
        return parsedate_to_datetime(text).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


@dataclass
class ServerClock:
    """The API server's time as this process knows it: the `Date` of its latest answer, plus monotonic time since."""

    monotonic: Callable[[], float] = time.monotonic
    _heard: tuple[float, float] | None = field(default=None, repr=False)  # (server seconds, monotonic seconds)

    def heard(self, server_seconds: float) -> None:
        """Take the server's time from an answer received now (its `Date`: whole seconds, so never ahead of it)."""
        heard_at = self.monotonic()
        # Date truncates to the second: keep the latest reading unless this one says the server is further on.
        if self._heard is None or server_seconds > self._heard[0] + (heard_at - self._heard[1]):
            self._heard = (server_seconds, heard_at)

    def now(self) -> float | None:
        """Return the server's time now, or None before any answer was heard."""
        if self._heard is None:
            return None
        server, heard_at = self._heard
        return server + max(0.0, self.monotonic() - heard_at)
