"""Benchmark: harvest quality and speed of the simulator on the bundled trace, and the defaults under stress.

Harvest: the gate's default policy against the fixed nightly window, the fixed reference (oracle at
headroom 0.2, same reaction time) and the same-headroom oracle. Goals: >= 75% of the fixed
reference with zero minutes of queueing delay above 30 s, and more GPU-hours than the previous
defaults (headroom 1.0, no look-ahead) at no more strict SLO-minutes. The frontier (headroom x
look-ahead terms, each alone) is the single-trace view; the defaults themselves are picked over every shipped
trace and the stress traces by bench/bench_frontier.py; the what-if table what each second of
reaction time is worth; the stress traces what the same defaults do on loads the trace lacks.
Speed: the 14-day trace for a 50-service, 1,000-replica fleet, goal <= 2 s.
Writes bench/results/simulate.json.
"""

import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results" / "simulate.json"
# The defaults before the look-ahead (headroom 1.0, no look-ahead term, no hysteresis).
PREVIOUS_DEFAULTS = {"headroom": 1.0, "trend": False, "volatility_headroom_max": 0.0, "lend_hysteresis": 0}
# The frontier rows vary headroom and one look-ahead term each, nothing else on (no volatility, no hysteresis).
ALONE = {"volatility_headroom_max": 0.0, "lend_hysteresis": 0}
PREVIOUS_RETURN = {"reclaim_check_seconds": 0.0, "grace_minutes": 2.0}  # a rise seen at the next tick, 2-min grace


def _timed(fn, runs: int = 3) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _with(fleet: Any, fleet_changes: dict[str, Any] | None = None, **policy: Any) -> Any:
    return dataclasses.replace(fleet, **(fleet_changes or {}), services=tuple(
        dataclasses.replace(s, policy=dataclasses.replace(s.policy, **policy)) for s in fleet.services))


def _row(report: Any) -> dict[str, Any]:
    return {"shareOfReference": round(report.share_of_reference, 4), "gpuHoursLent": round(report.gpu_hours_lent),
            "sloMinutes": report.slo_minutes, "delayMinutes": report.delay_minutes,
            "delayP99Seconds": round(report.delay_p99_seconds, 1), "delayWorstSeconds": round(report.delay_worst_seconds, 1),
            "preemptions": report.preemptions, "workLostGpuHours": round(report.work_lost_gpu_hours, 1)}


def main() -> None:
    """Run the benchmark and write its results."""
    from offhours.scripts.simulate.fleet import default_fleet, generated_jobs
    from offhours.scripts.simulate.report import simulate
    from offhours.scripts.simulate.stress import all_traces
    from offhours.scripts.simulate.trace import load_trace

    trace = load_trace()
    fleet = default_fleet(trace)
    jobs = generated_jobs(fleet)
    result = simulate(trace, fleet, jobs)
    harvest = {mode: dataclasses.asdict(r) for mode, r in result.reports.items()}
    slow = simulate(trace, _with(fleet, PREVIOUS_RETURN), jobs).reports
    previous_return = {**_row(slow["gate"]), "referenceGpuHours": round(slow["reference"].gpu_hours_lent)}
    previous = _row(simulate(trace, _with(fleet, **PREVIOUS_DEFAULTS), jobs, modes=("gate",)).reports["gate"])

    def gate(f: Any) -> dict[str, Any]:
        return _row(simulate(trace, f, jobs, modes=("gate",)).reports["gate"])

    frontier = []
    for headroom in (0.5, 0.55, 0.6, 0.65, 0.7, 1.0):
        for trend in (False, True):
            frontier.append({"headroom": headroom, "trend": trend,
                             **gate(_with(fleet, headroom=headroom, trend=trend, **ALONE))})
    for name, knobs in (("volatility 6 h, max 1.0", {"volatility_headroom_max": 1.0, "volatility_lookback_seconds": 21600.0}),
                        ("time of day, 1 day", {"time_of_day_days": 1}),
                        ("time of day, 7 days", {"time_of_day_days": 7})):
        for headroom in (0.5, 0.65):
            frontier.append({"headroom": headroom, "trend": True, "extra": name,
                             **gate(_with(fleet, headroom=headroom, **{**ALONE, **knobs}))})

    what_if = []
    # (reclaim check in seconds, 0: none, a rise waits for the 1-minute tick; grace; cold start): the first row is
    # the previous return path, the third today's defaults.
    for check, grace, cold in ((0.0, 2.0, 4.0), (15.0, 2.0, 4.0), (15.0, 0.5, 4.0), (15.0, 0.5, 2.0), (15.0, 0.5, 1.0),
                               (15.0, 0.25, 0.5)):
        changed = {"grace_minutes": grace, "cold_start_minutes": cold, "reclaim_check_seconds": check}
        for headroom in (0.3, 0.5, 0.65, 1.0):
            r = simulate(trace, _with(fleet, changed, headroom=headroom), jobs, modes=("gate",)).reports
            what_if.append({"reactionMinutes": (check / 60.0 if check else 1.0) + grace + cold,
                            "reclaimCheckSeconds": check, "graceMinutes": grace, "coldStartMinutes": cold,
                            "headroom": headroom, "referenceGpuHours": round(r["reference"].gpu_hours_lent),
                            **_row(r["gate"])})

    stress = []
    for st in all_traces():
        f = default_fleet(st)
        st_jobs = generated_jobs(f)
        now = simulate(st, f, st_jobs).reports
        before = simulate(st, _with(f, **PREVIOUS_DEFAULTS), st_jobs, modes=("gate",)).reports["gate"]
        # The same policy with the previous return path (no reclaim check, 2-minute grace).
        slow = simulate(st, _with(f, PREVIOUS_RETURN), st_jobs, modes=("gate",)).reports["gate"]
        stress.append({"trace": st.name, "defaults": _row(now["gate"]), "previousDefaults": _row(before),
                       "previousReturnPath": _row(slow), "fixedWindow": _row(now["fixed-window"])})

    big = default_fleet(trace, services=50, replicas_per_service=20)
    big_jobs = generated_jobs(big, per_service=100)
    speed = {
        "fleet_50_services_1000_replicas_s": _timed(lambda: simulate(trace, big, big_jobs)),
        "baseline_default_fleet_4_services_100_replicas_s": _timed(lambda: simulate(trace, fleet, jobs)),
        "baseline_trace_load_s": _timed(load_trace),
        "load_average_1min_at_end": os.getloadavg()[0],
    }
    out = {"python": sys.version.split()[0], "harvest": harvest, "previousDefaults": previous,
           "previousReturnPath": previous_return, "frontier": frontier,
           "whatIf": what_if, "stress": stress, "speed": speed,
           "goals": {"shareOfReference": 0.75, "delayMinutes": 0, "moreGpuHoursThanPreviousDefaults": True,
                     "sloMinutesAtMost": previous["sloMinutes"], "fleet_50_services_1000_replicas_s": 2.0}}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({"gate": _row(result.reports["gate"]), "previousDefaults": previous, "speed": speed}, indent=1))


if __name__ == "__main__":
    main()
