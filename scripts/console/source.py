"""Where the console gets the pool: a reader, read at most once per interval, with 24 h of history."""

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Protocol

from offhours.scripts.pool.model import Pool
from offhours.scripts.pool.operator_metrics import MetricsState

HISTORY = timedelta(hours=24)


class Reader(Protocol):
    """Anything that reads the pool."""

    def read(self, now: datetime | None = None, require_workflows: bool = False) -> Pool:
        """Read the pool now."""
        ...


@dataclass(frozen=True)
class Point:
    """One service at one read: what the pool chart draws."""

    at: datetime
    service: str
    baseline: int | None
    replicas: int | None
    required: int | None
    lent: int | None


class PoolSource:
    """Caches the last read; every new read feeds the history and the metrics' memory."""

    def __init__(self, reader: Reader, interval: float = 15.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.reader = reader
        self.interval = interval
        self.clock = clock
        self.metrics = MetricsState()
        self.history: deque[Point] = deque()
        self._pool: Pool | None = None
        self._read_at = 0.0
        self._lock = threading.Lock()

    def pool(self) -> Pool:
        """Return the pool, read again if the last read is older than the interval; a failed read is a pool with a problem."""
        with self._lock:
            if self._pool is None or self.clock() - self._read_at >= self.interval:
                try:
                    pool = self.reader.read()
                except Exception as err:  # noqa: BLE001 - a broken cluster is shown, never a crashed console
                    pool = Pool((), (), datetime.now(timezone.utc), (f"reading the pool failed: {err}",))
                self._remember(pool)
                self._pool, self._read_at = pool, self.clock()
            return self._pool

    def _remember(self, pool: Pool) -> None:
        self.metrics.update(pool)
        for s in pool.services:
            self.history.append(Point(pool.read_at, s.name, s.baseline, s.replicas, s.required, s.lent))
        while self.history and pool.read_at - self.history[0].at > HISTORY:
            self.history.popleft()
