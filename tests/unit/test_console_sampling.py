"""The console's history does not depend on anyone looking: the pool is read on its interval, no page asked."""

import threading
from datetime import datetime, timedelta, timezone

from offhours.scripts.console.app import pool_charts
from offhours.scripts.console.source import PoolSource
from offhours.scripts.pool.model import Pool, ServiceView

START = datetime(2026, 12, 1, 2, 0, tzinfo=timezone.utc)
LENT = [0, 0, 2, 4, 4, 0, 0, 0]  # a whole lend and reclaim, read by read


class Fleet:
    """A reader whose service lends and reclaims between reads; it counts the reads."""

    def __init__(self) -> None:
        self.reads = 0
        self.done = threading.Event()

    def read(self, now: datetime | None = None, require_workflows: bool = False) -> Pool:
        lent = LENT[min(self.reads, len(LENT) - 1)]
        at = START + timedelta(minutes=10 * self.reads)
        self.reads += 1
        if self.reads >= len(LENT):
            self.done.set()
        return Pool((ServiceView("chat", "serving", baseline=8, replicas=8 - lent, required=3, lent=lent),), (), at, ())


def test_a_lend_and_reclaim_between_page_views_is_in_the_history() -> None:
    fleet = Fleet()
    source = PoolSource(fleet, interval=0.5)
    stop = source.start_sampling()
    try:
        assert fleet.done.wait(30), f"only {fleet.reads} reads in 30 s without a page"
    finally:
        stop.set()
    lent = [p.lent for p in source.series("chat")]
    assert 4 in lent and lent.index(4) < len(lent) - 1 - lent[::-1].index(0), lent  # lent, then given back
    assert 'data-series="lent"' in pool_charts(source)["chat"]


def test_a_failed_read_does_not_end_the_sampling() -> None:
    class Flaky(Fleet):
        def read(self, now: datetime | None = None, require_workflows: bool = False) -> Pool:
            if self.reads == 1:
                self.reads += 1
                raise ConnectionError("API server restarting")
            return super().read(now, require_workflows)

    fleet = Flaky()
    source = PoolSource(fleet, interval=0.5)
    stop = source.start_sampling()
    try:
        assert fleet.done.wait(30)
    finally:
        stop.set()
    assert [p.lent for p in source.series("chat")][-1] == 0
