"""The return path's counts read back from a real Prometheus are the reclaims counted in the range, exactly.

Real: Debian's Prometheus and promtool (the gate's histogram series backfilled as OpenMetrics), the query
API, `history.return_path.phase_buckets` as `report` and the console call it. Generated: many gate
histories, each under its own `service` label in one Prometheus, each one to three gate processes (own
`instance`) born before or inside the range, some stopped before its end or before its start, reclaims
at random times, scraped every 15 s; some names hold what a regex or a PromQL string reads as syntax.

Invariant: for every history whose series did not reset, the served count read back equals what its
samples counted in the range: per series, its last sample in the range less its value at the range's
start (nothing if its last sample is older than Prometheus' 5-minute lookback), or its whole last
value if it was born inside the range; a whole number, never `increase()`'s extrapolation; and a name
matches its own series only. A history
with a reset (a gate restarted under the same labels) falls back to `increase()` and is only checked
to be read at all.
"""

import math
import random
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from offhours.scripts.history.return_path import phase_buckets
from offhours.scripts.names import RETURN_PHASE_METRIC
from tests.support.backfill import promtool_blocks
from tests.support.prometheus_fixture import running_prometheus

pytestmark = pytest.mark.prometheus

START = (math.floor(time.time() / 86400) - 4) * 86400.0  # a UTC midnight four days ago
END = START + 3 * 3600
RANGE = 7200  # the range read: the last two of the three hours
STEP = 15
LOOKBACK = 300


@dataclass
class Series:
    times: list[float]
    values: list[int]
    reset: bool


def _series(rng: random.Random) -> Series:
    birth = START + STEP * rng.randrange(0, (3 * 3600 - 900) // STEP) + 7  # never on a range edge
    death = min(END - 1, birth + rng.choice([900, 1800, 3600, 3 * 3600]))
    times = [t for t in (birth + STEP * k for k in range(int((death - birth) // STEP) + 1))]
    events = sorted(rng.uniform(birth, death) for _ in range(rng.randrange(0, 15)))
    reset_at = rng.choice(times[1:]) if rng.random() < 0.2 else None
    values = []
    for t in times:
        since = reset_at if reset_at is not None and t >= reset_at else -math.inf
        values.append(sum(1 for e in events if since <= e <= t))
    return Series(times, values, reset_at is not None)


def _counted(series: Series) -> int:
    start = END - RANGE
    inside = [v for t, v in zip(series.times, series.values) if start <= t <= END]
    if not inside:
        return 0
    before = [(t, v) for t, v in zip(series.times, series.values) if t <= start]
    base = before[-1][1] if before and before[-1][0] > start - LOOKBACK else 0
    return inside[-1] - base


def test_the_served_counts_are_what_the_gates_counted_in_the_range(tmp_path: Path) -> None:
    rng = random.Random(31)
    # Names a regex or a PromQL string would read as syntax, beside the names they would then match.
    names = [f"case-{i}" for i in range(40)] + ["a.b", "axb", "a|b", 'say"hi', "back\\slash", "back\\\\slash", "x+"]
    histories = {name: [_series(rng) for _ in range(rng.randrange(1, 4))] for name in names}
    lines = []
    for service, processes in histories.items():
        value = service.replace("\\", "\\\\").replace('"', '\\"')  # OpenMetrics' label-value escapes
        for k, series in enumerate(processes):
            labels = f'service="{value}",phase="serving",le="+Inf",instance="gate-{k}:9100"'
            lines += [f"{RETURN_PHASE_METRIC}_bucket{{{labels}}} {v} {t:.0f}" for t, v in zip(series.times, series.values)]
    promtool_blocks("\n".join(lines), tmp_path / "data")
    checked = 0
    with running_prometheus([], tmp_path, retention="30d") as url:
        for service, processes in histories.items():
            read = phase_buckets(url, [service], END, RANGE)
            served = dict(read.get("serving", []))
            if any(s.reset for s in processes):
                assert all(math.isfinite(c) and c >= 0 for c in served.values()), (service, read)
                continue
            expected = sum(_counted(s) for s in processes)
            assert served.get(math.inf, 0.0) == float(expected), (service, processes, read)
            checked += 1
    assert checked >= 25  # most histories are checked exactly, not only the reset ones
