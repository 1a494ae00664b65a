"""When another holder's Lease has expired, judged as Kubernetes leader election judges it (pure: no I/O).

The holder's `renewTime` is written by the holder's clock; comparing it with this process's clock
lets a skewed clock decide. client-go's leader election never does: a candidate remembers the record
it last observed and when, on its own monotonic clock, and takes the Lease only after observing the
same record unchanged for the lease duration. A live holder renews within that time and so changes
the record, whatever either clock says.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class LeaseObserver:
    """Remembers the last observed Lease record and since when (monotonic seconds) it has not changed."""

    monotonic: Callable[[], float] = time.monotonic
    _seen: tuple[Any, ...] | None = field(default=None, repr=False)
    _since: float = 0.0

    def expired(self, record: tuple[Any, ...], duration_seconds: float) -> bool:
        """Whether `record` (holder, times, duration) has been observed unchanged for longer than `duration_seconds`.

        A record seen for the first time (by a new process too) is live: expiry is only ever observed here.
        """
        now = self.monotonic()
        if record != self._seen:
            self._seen, self._since = record, now
            return False
        return now - self._since > duration_seconds
