"""Where the console gets the pool: a reader, read at most once per interval, with 24 h of history.

The history does not depend on anyone looking: `start_sampling` reads the pool on its interval in a
thread of its own whether or not a page is open, so a whole lend and reclaim between two page
views is in the chart (a page only ever reads the cache, or reads again when it is older than the
interval).

The history is bounded whatever the uptime and the read interval: at most `POINTS` points per
service (a new point only when the service's numbers changed or a spacing of HISTORY / POINTS
passed), services that left the pool are dropped after HISTORY, and the history keeps only the
services the serving namespace names (no tenant writes there).
"""

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
POINTS = 480  # per service: one each 3 minutes over the 24 h at most
MIN_SAMPLE_SECONDS = 0.5  # the sampler's shortest period, whatever the interval (the CLI refuses less anyway)


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
        self._history: dict[str, deque[Point]] = {}
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

    def refresh(self) -> None:
        """Forget the last read: the next `pool()` reads the cluster again (after a write the page must show)."""
        with self._lock:
            self._pool = None

    def sample(self) -> Pool:
        """Read the pool now, whatever the age of the last read; the history gets the point."""
        self.refresh()
        return self.pool()

    def sample_until(self, stop: threading.Event) -> None:
        """Read the pool every interval until `stop` is set (a failed read is a point with a problem, never an end)."""
        while not stop.is_set():
            self.sample()
            stop.wait(max(self.interval, MIN_SAMPLE_SECONDS))

    def start_sampling(self) -> threading.Event:
        """Sample in a daemon thread; return the event that stops it."""
        stop = threading.Event()
        threading.Thread(target=self.sample_until, args=(stop,), name="offhours-console-sampler", daemon=True).start()
        return stop

    @property
    def history(self) -> list[Point]:
        """Every point kept, oldest first per service."""
        with self._lock:
            return [p for name in sorted(self._history) for p in self._history[name]]

    def series(self, service: str) -> list[Point]:
        """Return the points kept for one service, oldest first."""
        with self._lock:
            return list(self._history.get(service, ()))

    def _remember(self, pool: Pool) -> None:
        self.metrics.update(pool)
        spacing = HISTORY / POINTS
        for s in pool.services:
            point = Point(pool.read_at, s.name, s.baseline, s.replicas, s.required, s.lent)
            points = self._history.setdefault(s.name, deque(maxlen=POINTS))
            last = points[-1] if points else None
            changed = last is None or (last.baseline, last.replicas, last.required, last.lent) != (
                point.baseline, point.replicas, point.required, point.lent)
            if changed or pool.read_at - last.at >= spacing:  # type: ignore[union-attr]
                points.append(point)
        for name in list(self._history):
            points = self._history[name]
            while points and pool.read_at - points[0].at > HISTORY:
                points.popleft()
            if not points:
                del self._history[name]
