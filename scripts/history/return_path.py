"""Read the gate's return-path histograms back from Prometheus: each phase's buckets over a range.

One instant evaluation at the range's end, per bucket series, of what it counted in the range: the gate's
series carry the `service` label it writes itself (not the vLLM series' label), and every scrape target
(a gate run, a restarted gate) adds its own, summed away.

A count of reclaims is a whole number, so it is read exactly (`window_increase`): the last value in the
range less the value at its start, or the whole last value for a series born inside the range (a gate's
counters start at zero). Prometheus' `increase()` extrapolates to the range's edges, which turns six reclaims into
6.5 on a sparse scrape; it is used only for a series that reset inside the range (a gate restarted under
the same labels), where the difference of the two ends does not count what was lost.
"""

import math
from collections.abc import Sequence

from offhours.scripts.history.promrange import query_range
from offhours.scripts.history.read import selector
from offhours.scripts.metrics.prometheus import PrometheusError
from offhours.scripts.names import RETURN_PHASE_METRIC
from offhours.scripts.policy.return_table import PhaseRow, phase_rows


def window_increase(selector: str, seconds: int) -> str:
    """Return PromQL for what each counter series of `selector` counted in the `seconds` before the evaluation time.

    Exact for a series without a reset in the range: its last sample in the range less its value at the range's
    start, or its whole last value for a series born inside the range (a gate's counters start at zero). The last
    sample in the range, not the value at its end: a gate replaced halfway has no sample at the end, and what it
    counted still counts. `increase()` only for a series that reset in it. The set operators match on labels
    without the metric name, so each series lands in exactly one branch.
    """
    window = f"{selector}[{seconds}s]"
    last = f"last_over_time({window})"
    return (f"(({last} - {selector} offset {seconds}s) unless (resets({window}) > 0))"
            f" or (increase({window}) and (resets({window}) > 0))"
            f" or {last}")


def phase_buckets(url: str, services: Sequence[str], end: float, seconds: float,
                  timeout: float = 30.0) -> dict[str, list[tuple[float, float]]]:
    """Return phase -> [(le, cumulative count)] of the served reclaims of `services` in the `seconds` before `end`."""
    promql = "sum by (phase, le) ({})".format(
        window_increase(f"{RETURN_PHASE_METRIC}_bucket{selector('service', services)}", int(math.ceil(seconds))))
    # Whole seconds: Prometheus answers a fractional time rounded to the millisecond, off the asked grid.
    grid = query_range(url, promql, float(math.floor(end)), 60.0, 1, timeout)
    out: dict[str, list[tuple[float, float]]] = {}
    for key, values in grid.items():
        labels = dict(key)
        phase, le = labels.get("phase"), labels.get("le")
        if phase is None or le is None:
            raise PrometheusError(f"query {promql!r}: a series without phase or le: {labels}")
        try:
            edge = float(le.replace("Inf", "inf"))
        except ValueError:
            raise PrometheusError(f"query {promql!r}: le {le!r} is not a number") from None
        value = float(values[0])
        out.setdefault(phase, []).append((edge, 0.0 if math.isnan(value) else value))
    return out


def return_rows(url: str, services: Sequence[str], end: float, seconds: float, timeout: float = 30.0) -> list[PhaseRow]:
    """Return the return path's table (`return_table.phase_rows`): each of `services` read on its own, every phase."""
    return phase_rows({service: phase_buckets(url, [service], end, seconds, timeout) for service in services})
