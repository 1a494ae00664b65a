"""The fleet file's victim exit and cold start from the gate's own return-path histograms: pure, no I/O.

Input: for each phase of `offhours_return_phase_seconds` (scripts/policy/return_phases.py), its cumulative
bucket counts over the range read (Prometheus' `increase` of each `le` bucket, pooled over the services
asked for). Output, as `gpu_times.ReturnTimes`, so `fleet_document` writes it the same way:

- graceMinutes: the `victims_exit` phase (the decision answered -> the victims' pods ended) at quantile `q`;
- coldStartMinutes: `scheduling` + `start` + `serving` (victims gone -> bound -> Ready -> vLLM answering),
  each at quantile `q`, summed: at least the quantile of their sum (a sum of quantiles bounds it from above),
  so the model errs on the slow side, the side serving's safety needs;
- wakeMinutes: not measured here (the gate reclaims replicas that were scaled away, none that slept).

A quantile is read from the buckets as Prometheus' `histogram_quantile` reads it (linear inside a bucket);
one that falls in the +Inf bucket is the highest finite edge, said in the note. Fewer than `min_reclaims`
served reclaims in the range is not enough evidence: the configured value stands, and the note says so.
"""

from collections.abc import Mapping, Sequence

from offhours.scripts.policy.return_phases import PHASES
from offhours.scripts.policy.return_table import HistogramError
from offhours.scripts.policy.return_table import quantile as table_quantile
from offhours.scripts.simulate.gpu_times import GpuCheckError, ReturnTimes

MIN_RECLAIMS = 5
COLD_START_PHASES = ("scheduling", "start", "serving")


def quantile(buckets: Sequence[tuple[float, float]], q: float) -> tuple[float, bool] | None:
    """`return_table.quantile` (the one decoding of the buckets), a histogram it cannot read as a `GpuCheckError`."""
    try:
        return table_quantile(buckets, q)
    except HistogramError as err:
        raise GpuCheckError(str(err)) from None


def measured_return(phases: Mapping[str, Sequence[tuple[float, float]]], q: float = 0.95,
                    min_reclaims: int = MIN_RECLAIMS) -> ReturnTimes:
    """Turn the phases' buckets into the fleet file's grace and cold start (minutes), each with a note."""
    missing = [p for p in ("victims_exit", *COLD_START_PHASES) if p not in phases]
    if missing:
        raise GpuCheckError(f"no {', '.join(missing)} phase in the history: is the gate's /metrics (--metrics-port) "
                            "scraped by this Prometheus?")
    # Prometheus' increase() extrapolates to the range's ends: counts come back as 6.1 for 6, so round them.
    served = round(max(ordered[-1][1] for ordered in (sorted(phases[p]) for p in PHASES if p in phases)))
    if served < min_reclaims:
        raise GpuCheckError(f"not enough evidence: {served} served reclaim(s) in the range, fewer than "
                            f"{min_reclaims}; the configured times stand")
    notes: dict[str, str] = {}
    label = f"p{round(q * 100):d}"
    exit_q = quantile(phases["victims_exit"], q)
    grace = None
    if exit_q is not None:
        grace = exit_q[0] / 60.0
        notes["graceMinutes"] = (f"the victims' exit at {label} over {served} served reclaim(s): {exit_q[0]:.1f} s"
                                 + (" (above the histogram's last edge: at least this)" if exit_q[1] else ""))
    else:
        notes["graceMinutes"] = "kept as configured: no victims' exit observed"
    parts = [quantile(phases[p], q) for p in COLD_START_PHASES]
    start = None
    if all(part is not None for part in parts):
        seconds = [part[0] for part in parts if part is not None]
        start = sum(seconds) / 60.0
        capped = any(part[1] for part in parts if part is not None)
        notes["coldStartMinutes"] = ("scheduling + start to Ready + to serving, each at " + label + ": "
                                     + " + ".join(f"{s:.1f}" for s in seconds) + f" = {sum(seconds):.1f} s"
                                     + (" (one above the histogram's last edge: at least this)" if capped else ""))
    else:
        notes["coldStartMinutes"] = "kept as configured: a phase of the start was never observed"
    notes["wakeMinutes"] = "not measured by the gate (it reclaims replicas scaled away, none asleep)"
    return ReturnTimes(start, None, grace, notes)
