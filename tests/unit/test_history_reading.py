"""Counter history read exactly or named: increases per step, resets, gaps, split range queries, the time range."""

import argparse
import math

import numpy as np
import pytest

from offhours.scripts.cli.history_source import time_range
from offhours.scripts.history.counters import fill_line, increases, runs
from offhours.scripts.history.promrange import MAX_POINTS, chunks, decode_matrix
from offhours.scripts.metrics.prometheus import PrometheusError
from offhours.scripts.policy.config import ConfigError

NAN = math.nan


def test_plain_counter_gives_its_differences() -> None:
    inc = increases(np.array([0.0, 5.0, 7.0, 7.0, 10.0]))
    assert inc.values.tolist() == [5.0, 2.0, 0.0, 3.0]
    assert inc.covered.all() and inc.resets == () and inc.gaps == ()


def test_reset_counts_from_zero_and_is_named() -> None:
    """A restarted process: the counter falls; the step counts what it shows since, as Prometheus' increase does."""
    inc = increases(np.array([0.0, 100.0, 200.0, 30.0, 50.0]))
    assert inc.values.tolist() == [100.0, 100.0, 30.0, 20.0]
    assert inc.resets == (2,)


def test_gap_spreads_the_known_increase_and_is_named() -> None:
    """Samples missing: the total across the gap is exact, spread evenly, and the gap's steps are named."""
    inc = increases(np.array([0.0, 10.0, NAN, NAN, 40.0, 45.0]))
    assert inc.values.tolist() == [10.0, 10.0, 10.0, 10.0, 5.0]
    assert inc.gaps == ((1, 3),)


def test_a_series_counts_only_between_its_samples() -> None:
    """A pod that appears late or goes away: nothing is invented before its first sample or after its last."""
    inc = increases(np.array([NAN, NAN, 500.0, 510.0, NAN]))
    assert inc.values.tolist() == [0.0, 0.0, 10.0, 0.0]
    assert inc.covered.tolist() == [False, False, True, False]
    assert inc.gaps == () and inc.resets == ()


def test_runs_and_fill_line() -> None:
    assert runs(np.array([False, True, True, False, True])) == [(1, 2), (4, 4)]
    filled = fill_line(np.array([1.0, 0.0, 0.0, 4.0]), np.array([True, False, False, True]))
    assert filled.tolist() == [1.0, 2.0, 3.0, 4.0]


@pytest.mark.parametrize("points", [1, 10_999, 11_000, 11_001, 20_161, 100_000])
def test_chunks_cover_the_grid_within_the_point_limit(points: int) -> None:
    """Prometheus refuses more than 11,000 points per series: every piece is within it, none overlaps, none is lost."""
    pieces = list(chunks(points))
    assert all(last - first + 1 <= MAX_POINTS for first, last in pieces)
    covered = [i for first, last in pieces for i in range(first, last + 1)]
    assert covered == list(range(points))


@pytest.mark.parametrize("body, named", [
    ([], "not an object"),
    ({"status": "error", "errorType": "bad_data", "error": "exceeded maximum resolution"}, "exceeded maximum resolution"),
    ({"status": "success", "data": {"resultType": "vector", "result": []}}, "expected a matrix"),
    ({"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": [[1, 2]]}]}},
     "not [<time>"),
    ({"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {"a": 1}, "values": []}]}},
     "not an object of strings"),
])
def test_a_malformed_range_answer_is_named(body: object, named: str) -> None:
    with pytest.raises(PrometheusError, match="range query") as err:
        decode_matrix(200 if not isinstance(body, dict) or body.get("status") != "error" else 400, body, "q")
    assert named in str(err.value)


def _args(**kw: str | None) -> argparse.Namespace:
    return argparse.Namespace(**{"since": None, "start": None, "end": None, **kw})


def test_since_starts_at_the_first_midnight_inside_it() -> None:
    now = 20 * 86400 + 3600 * 5 + 17  # 05:00:17 on day 20
    r = time_range(_args(since="14d"), now=now)
    assert r.start == 7 * 86400 and r.start % 86400 == 0
    assert r.start + r.steps * 60 == 20 * 86400 + 3600 * 5  # up to the last whole minute


@pytest.mark.parametrize("kw, named", [
    ({"since": "14"}, "not a span"), ({"since": "-3d"}, "not a span"), ({"start": "yesterday"}, "ISO 8601"),
    ({"start": "2026-01-01T00:00:30Z"}, "whole minute"), ({"since": "5m"}, "no whole step"),
    ({"start": "2026-01-01T00:00Z", "since": "1d"}, "one of them"), ({"end": "2099-01-01T00:00Z"}, "future"),
    ({"start": "2020-01-01T00:00Z"}, "longer than"),
])
def test_a_range_that_cannot_be_read_is_one_error(kw: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        time_range(_args(**kw), now=1_790_000_000.0)


def test_a_negative_counter_value_is_no_sample_and_is_named() -> None:
    """No counter is below zero: such a value (a broken or forged exporter) is dropped, never a negative load."""
    inc = increases(np.array([0.0, 5.0, -3.0, 8.0, -1e9, 9.0]))
    assert (inc.values >= 0).all()
    assert inc.values.tolist() == [5.0, 1.5, 1.5, 0.5, 0.5]
    assert inc.invalid == (2, 4)
    assert inc.resets == ()
