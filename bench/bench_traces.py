"""Benchmark: the default policy knobs chosen across traces, and how long history replay and tuning take.

Across traces: the bundled trace (m-small), the second real trace (m-mid), the four stress traces,
and the day-split halves of each (first and second half of the days). For each, the default fleet
of that trace (4 services) is replayed with fleet-wide knobs over a grid (headroom x look-ahead); the
table is the best share of the fixed reference at a delay budget of 0, 20 and 40 minutes with
queueing delay above 30 s, and the defaults' row. The worst case over the traces, per setting, is
what a default must be judged by (never one trace); `acrossTraces` lists it.
Speed: `offhours simulate --prometheus` and `offhours tune --prometheus` on 14 days of 4 services
backfilled into a real Prometheus (promtool), as a user runs them.
Writes bench/results/traces.json.
"""

import dataclasses
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
RESULTS = REPO / "bench" / "results" / "traces.json"
HEADROOMS = (0.3, 0.4, 0.5, 0.6, 0.65, 0.7, 0.85, 1.0)
LOOK_AHEAD = ("none", "trend", "trend+volatility")
BUDGETS = (0, 20, 40)


def _traces() -> list[Any]:
    from offhours.scripts.simulate.stress import all_traces
    from offhours.scripts.simulate.trace import days_of, load_trace

    out = []
    for whole in (load_trace("m-small"), load_trace("m-mid"), *all_traces()):
        days = whole.minutes // 1440
        half = days // 2
        out += [whole, days_of(whole, 0, half), days_of(whole, half, days)]
    return out


def _row(report: Any) -> dict[str, Any]:
    share = report.share_of_reference if math.isfinite(report.share_of_reference) else 0.0
    return {"shareOfReference": round(share, 4), "delayMinutes": report.delay_minutes,
            "sloMinutes": report.slo_minutes, "preemptions": report.preemptions}


def across_traces() -> dict[str, Any]:
    """Every trace x every setting of the grid, the defaults included; the worst case per setting."""
    from offhours.scripts.simulate.fleet import default_fleet, generated_jobs
    from offhours.scripts.simulate.parallel import map_replays
    from offhours.scripts.simulate.report import simulate
    from offhours.scripts.simulate.tune import Knobs

    traces = _traces()
    settings = [Knobs(h, look, 0, 900.0) for h in HEADROOMS for look in LOOK_AHEAD]
    defaults = Knobs.of(default_fleet(traces[0]).services[0].policy)
    if defaults not in settings:
        settings.append(defaults)

    def task(i: int) -> dict[str, Any]:
        trace, knobs = traces[i // len(settings)], settings[i % len(settings)]
        fleet = default_fleet(trace)
        fleet = dataclasses.replace(fleet, services=tuple(
            dataclasses.replace(s, policy=knobs.apply(s.policy)) for s in fleet.services))
        return _row(simulate(trace, fleet, generated_jobs(fleet), modes=("gate",), workers=1).reports["gate"])

    rows = map_replays(task, len(traces) * len(settings), os.cpu_count())
    per_trace = []
    for t, trace in enumerate(traces):
        mine = [{"knobs": dataclasses.asdict(k), **rows[t * len(settings) + j]} for j, k in enumerate(settings)]
        best = {}
        for budget in BUDGETS:
            within = [r for r in mine if r["delayMinutes"] <= budget]
            top = max(within, key=lambda r: r["shareOfReference"]) if within else None
            best[str(budget)] = top
        per_trace.append({"trace": trace.name, "days": round(trace.minutes / 1440, 1), "bestAtBudget": best,
                          "defaults": next(r for r in mine if r["knobs"] == dataclasses.asdict(defaults)),
                          "frontier": mine})
    worst = []
    for j, k in enumerate(settings):
        col = [rows[t * len(settings) + j] for t in range(len(traces))]
        real = [c for t, c in enumerate(col) if not traces[t].name.startswith("stress")]
        worst.append({"knobs": dataclasses.asdict(k), "worstShare": min(c["shareOfReference"] for c in col),
                      "worstShareRealTraces": min(c["shareOfReference"] for c in real),
                      "worstDelayMinutes": max(c["delayMinutes"] for c in col),
                      "worstDelayMinutesRealTraces": max(c["delayMinutes"] for c in real)})
    return {"defaults": dataclasses.asdict(defaults), "perTrace": per_trace, "acrossTraces": worst}


def speed(work: Path) -> dict[str, Any]:
    """Time `simulate --prometheus` and `tune --prometheus` on 14 days of 4 services in a real Prometheus."""
    import yaml

    from offhours.scripts.simulate.fleet import default_fleet
    from offhours.scripts.simulate.trace import load_trace
    from tests.support.backfill import RenderedService, backfill
    from tests.support.prometheus_fixture import running_prometheus

    trace = load_trace()
    fleet = default_fleet(trace)
    start = (math.floor(time.time() / 86400) - 16) * 86400.0
    services = [RenderedService(s.name, trace.scaled(s.share), pods=1, engines=1) for s in fleet.services]
    t0 = time.perf_counter()
    backfill(services, start, work / "data")
    backfill_s = time.perf_counter() - t0
    config = {"services": {s.name: {"capacity": {"requestsPerSecond": s.policy.capacity.requests_per_second,
                                                 "generationTokensPerSecond": s.policy.capacity.generation_tokens_per_second},
                                    "gpusPerReplica": 4} for s in fleet.services}}
    (work / "gate.yaml").write_text(yaml.safe_dump(config))
    iso = [time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t)) for t in (start, start + 14 * 86400)]
    out: dict[str, Any] = {"backfill_s": round(backfill_s, 1)}
    with running_prometheus([], work, retention="30d") as url:
        common = ["--prometheus", url, "--config", str(work / "gate.yaml"), "--start", iso[0], "--end", iso[1]]
        for name, argv in (("simulate_prometheus_14d_4_services_s", ["simulate", *common]),
                           ("trace_export_14d_4_services_s", ["trace", "export", *common, "--out", str(work / "csv")]),
                           ("tune_prometheus_14d_4_services_s", ["tune", *common, "--out", str(work / "t.yaml")])):
            t0 = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "offhours.scripts.cli", *argv], capture_output=True, text=True)
            out[name] = round(time.perf_counter() - t0, 1)
            if done.returncode not in (0, 1):
                raise SystemExit(f"{name}: exit {done.returncode}: {done.stderr[-2000:]}")
    out["load_average_1min_at_end"] = os.getloadavg()[0]
    return out


def main() -> None:
    """Run the benchmark and write its results."""
    t0 = time.perf_counter()
    result = across_traces()
    result["acrossTraces_s"] = round(time.perf_counter() - t0, 1)
    with tempfile.TemporaryDirectory() as tmp:
        result["speed"] = speed(Path(tmp))
    result["python"] = sys.version.split()[0]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=1) + "\n")
    for t in result["perTrace"]:
        best = {b: (r["shareOfReference"] if r else None) for b, r in t["bestAtBudget"].items()}
        d = t["defaults"]
        print(f"{t['trace'][:60]:60} best@0/20/40 {best}  defaults {d['shareOfReference']} delay {d['delayMinutes']}")
    print(json.dumps(result["speed"]))


if __name__ == "__main__":
    main()
