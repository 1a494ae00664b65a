"""Benchmark: the console's estimate of a request's start against the simulator, on the bundled trace.

For each of the default fleet's services and queue depths (jobs of 2 replicas ahead), a 4-hour job of
2 replicas is submitted every STRIDE minutes over days 7 to 11 of the bundled trace. The simulator
replays it with the trace's own future (what happened), and the estimate predicts it from the days
before only (what the console would have said). Measured: the share of submissions whose predicted
median start lies in the simulated start's 10-minute bucket, the share whose simulated start is at or
below the predicted 90th percentile, and the time one estimate takes. Writes bench/results/estimate.json.
"""

import json
import math
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
RESULTS = REPO / "bench" / "results" / "estimate.json"
STRIDE, DEPTHS, DAYS = 53, (0, 2, 4), 7


def bucket(minutes: float) -> float:
    return math.inf if math.isinf(minutes) else minutes // 10


def main() -> None:
    from offhours.scripts.policy.estimate import JobAhead, JobRequest
    from offhours.scripts.simulate.estimate import DAY, estimate, replay_day
    from offhours.scripts.simulate.fleet import default_fleet
    from offhours.scripts.simulate.trace import Trace, load_trace

    trace = load_trace()
    fleet = default_fleet(trace)
    request = JobRequest(2, 4.0, 30.0)
    rows, took = [], []
    for spec in fleet.services:
        own = Trace(trace.requests * spec.share, trace.input_tokens * spec.share, trace.output_tokens * spec.share,
                    spec.name)
        for depth in DEPTHS:
            ahead = [JobAhead(2)] * depth
            hits = within_p90 = cases = 0
            waits = []
            for now in range(7 * DAY, 12 * DAY, STRIDE):
                start = time.perf_counter()
                predicted = estimate(own, now, spec.policy, spec.baseline, fleet, request, ahead, days=DAYS)
                took.append(time.perf_counter() - start)
                simulated = replay_day(own, now, 0, spec.policy, spec.baseline, fleet, request, ahead).start_minutes
                hits += bucket(predicted.start_median_minutes) == bucket(simulated)
                within_p90 += simulated <= predicted.start_p90_minutes
                cases += 1
                waits.append(simulated)
            rows.append({"service": spec.name, "jobs_ahead": depth, "cases": cases, "median_in_bucket": hits / cases,
                         "at_or_below_p90": within_p90 / cases,
                         "simulated_waits_over_10_min": sum(w >= 10 for w in waits) / cases})
            print(rows[-1])
    total = sum(r["cases"] for r in rows)
    share = sum(r["median_in_bucket"] * r["cases"] for r in rows) / total
    result = {"stride_minutes": STRIDE, "days_replayed": DAYS, "request": "2 replicas, 4 h, checkpoint 30 min",
              "rows": rows, "cases": total, "median_in_bucket": share,
              "estimate_seconds_median": statistics.median(took), "estimate_seconds_max": max(took),
              "machine": platform.machine(), "python": platform.python_version()}
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"median in the simulated start's 10-minute bucket: {share:.1%} of {total}; "
          f"one estimate {statistics.median(took) * 1000:.0f} ms median")


if __name__ == "__main__":
    main()
