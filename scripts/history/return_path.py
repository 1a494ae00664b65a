"""Read the gate's return-path histograms back from Prometheus: each phase's buckets over a range.

One instant evaluation at the range's end of `sum by (phase, le) (increase(<buckets>{service=~...}[range]))`:
the gate's series carry the `service` label it writes itself (not the vLLM series' label), and every
scrape target (a gate run, a restarted gate) adds its own, summed away. `increase` handles the counter
resets of a gate process that started again.
"""

import math
import re
from collections.abc import Sequence

from offhours.scripts.history.promrange import query_range
from offhours.scripts.metrics.prometheus import PrometheusError
from offhours.scripts.names import RETURN_PHASE_METRIC
from offhours.scripts.policy.return_table import PhaseRow, phase_rows


def phase_buckets(url: str, services: Sequence[str], end: float, seconds: float,
                  timeout: float = 30.0) -> dict[str, list[tuple[float, float]]]:
    """Return phase -> [(le, cumulative count)] of the served reclaims of `services` in the `seconds` before `end`."""
    names = "|".join(re.escape(s) for s in services)
    promql = (f'sum by (phase, le) (increase({RETURN_PHASE_METRIC}_bucket{{service=~"{names}"}}'
              f"[{int(math.ceil(seconds))}s]))")
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
