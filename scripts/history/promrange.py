"""Prometheus range queries (HTTP API), split so that no query asks for more points than Prometheus allows.

Prometheus refuses a range query whose grid holds more than 11,000 points per series; a long
history at one step per minute (14 days = 20,161 points) is therefore asked for in pieces that
share no grid point, and put back together on the one grid. The answer is decoded strictly: any
shape other than the documented matrix raises `PrometheusError` naming what is wrong, as does an
answer that says it is partial (its `warnings`, refused by `answer_data`).
"""

import math
from collections.abc import Iterator

import numpy as np

from offhours.scripts.metrics.prometheus import _NUMBER, PrometheusError, _shown, answer_data, ask

MAX_POINTS = 11_000  # Prometheus' per-series limit on one range query's grid (its query API refuses more)


def chunks(points: int, max_points: int = MAX_POINTS) -> Iterator[tuple[int, int]]:
    """Yield (first, last) grid indices, inclusive, covering 0..points-1 with at most `max_points` each."""
    if max_points < 1:
        raise ValueError(f"max_points {max_points} must be at least 1")
    first = 0
    while first < points:
        last = min(points - 1, first + max_points - 1)
        yield first, last
        first = last + 1


def decode_matrix(status_code: int, body: object, promql: str) -> list[tuple[dict[str, str], list[tuple[float, float]]]]:
    """Decode a range-query answer into (labels, [(time, value), ...]); raise `PrometheusError` naming any flaw."""
    where = f"range query {promql!r}"
    data = answer_data(status_code, body, where)
    if not isinstance(data, dict) or data.get("resultType") != "matrix":
        raise PrometheusError(f"{where}: expected a matrix result, got {_shown(data)}")
    result = data.get("result")
    if not isinstance(result, list):
        raise PrometheusError(f"{where}: data.result is {_shown(result)}, not a list")
    decoded = []
    for i, series in enumerate(result):
        metric = series.get("metric") if isinstance(series, dict) else None
        values = series.get("values") if isinstance(series, dict) else None
        if not isinstance(metric, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in metric.items()):
            raise PrometheusError(f"{where}: data.result[{i}].metric is {_shown(metric)}, not an object of strings")
        if not isinstance(values, list):
            raise PrometheusError(f"{where}: data.result[{i}].values is {_shown(values)}, not a list")
        points = []
        for point in values:
            if (not isinstance(point, list) or len(point) != 2 or isinstance(point[0], bool)
                    or not isinstance(point[0], (int, float)) or not math.isfinite(point[0])
                    or not isinstance(point[1], str)
                    or not _NUMBER.fullmatch(point[1])):
                raise PrometheusError(f'{where}: data.result[{i}].values has {_shown(point)}, not [<time>, "<number>"]')
            points.append((float(point[0]), float(point[1].replace("Inf", "inf"))))
        decoded.append((metric, points))
    return decoded


def query_range(url: str, promql: str, start: float, step: float, points: int, timeout: float = 30.0,
                max_points: int = MAX_POINTS) -> dict[tuple[tuple[str, str], ...], np.ndarray]:
    """Evaluate `promql` at start, start + step, ... (`points` times); return each series' values on that grid.

    Key: the series' labels, sorted. A grid point where a series has no value is NaN, as is a value
    Prometheus gave as NaN. Pieces of at most `max_points` points are asked for one after the other.
    """
    grid: dict[tuple[tuple[str, str], ...], np.ndarray] = {}
    for first, last in chunks(points, max_points):
        params = {"query": promql, "start": _at(start + first * step), "end": _at(start + last * step),
                  "step": _at(step)}
        status, body = ask(url, "/api/v1/query_range", params, timeout, f"range query {promql!r}")
        for metric, values in decode_matrix(status, body, promql):
            key = tuple(sorted(metric.items()))
            row = grid.get(key)
            if row is None:
                row = grid[key] = np.full(points, np.nan)
            for t, value in values:
                k = (t - start) / step
                index = round(k)
                if abs(k - index) > 1e-6 or not first <= index <= last:
                    raise PrometheusError(f"range query {promql!r}: a point at {t} is not on the asked grid")
                row[index] = value
    return grid


def _at(t: float) -> str:
    # Whole milliseconds, as Prometheus keeps time: a float's repr could put the grid off by a rounding.
    if not math.isfinite(t):
        raise ValueError(f"time {t} is not finite")
    return f"{round(t * 1000) / 1000:.3f}"
