"""Benchmark: harvest quality and speed of the simulator on the bundled trace.

Harvest: the gate's default policy against the fixed nightly window and the oracle (same run,
same fleet, same jobs). Goal: >= 90% of the oracle's GPU-hours with zero SLO-minutes, better
than the fixed window on both. Also the policy's frontier (headroom x ticks), to show why the
defaults are what they are. Speed: the 14-day trace for a 50-service, 1,000-replica fleet, goal
< 2 s, with the replay of the default 4-service fleet as the baseline of the same run.
Writes bench/results/simulate.json.
"""

import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results" / "simulate.json"


def _timed(fn, runs: int = 3) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    """Run the benchmark and write its results."""
    from offhours.scripts.simulate.fleet import default_fleet, generated_jobs
    from offhours.scripts.simulate.report import simulate
    from offhours.scripts.trace import load_trace

    trace = load_trace()
    fleet = default_fleet(trace)
    jobs = generated_jobs(fleet)
    result = simulate(trace, fleet, jobs)
    harvest = {mode: dataclasses.asdict(r) for mode, r in result.reports.items()}

    frontier = []
    for headroom in (0.3, 0.5, 1.0):
        for tick in (1, 5):
            f = dataclasses.replace(fleet, tick_minutes=tick, services=tuple(
                dataclasses.replace(s, policy=dataclasses.replace(s.policy, headroom=headroom)) for s in fleet.services))
            r = simulate(trace, f, jobs).reports
            frontier.append({"headroom": headroom, "tickMinutes": tick,
                             "shareOfOracle": round(r["gate"].share_of_oracle, 4),
                             "sloMinutes": r["gate"].slo_minutes, "preemptions": r["gate"].preemptions,
                             "workLostGpuHours": round(r["gate"].work_lost_gpu_hours, 1)})

    big = default_fleet(trace, services=50, replicas_per_service=20)
    big_jobs = generated_jobs(big, per_service=100)
    speed = {
        "fleet_50_services_1000_replicas_s": _timed(lambda: simulate(trace, big, big_jobs)),
        "baseline_default_fleet_4_services_100_replicas_s": _timed(lambda: simulate(trace, fleet, jobs)),
        "baseline_trace_load_s": _timed(load_trace),
    }
    out = {"python": sys.version.split()[0], "harvest": harvest, "frontier": frontier, "speed": speed,
           "goals": {"shareOfOracle": 0.9, "sloMinutes": 0, "fleet_50_services_1000_replicas_s": 2.0}}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({"gate": {k: harvest["gate"][k] for k in ("share_of_oracle", "slo_minutes", "avg_gpus_lent")},
                      "fixed": {k: harvest["fixed-window"][k] for k in ("share_of_oracle", "slo_minutes", "avg_gpus_lent")},
                      "frontier": frontier, "speed": speed}, indent=1))


if __name__ == "__main__":
    main()
