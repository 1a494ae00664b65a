"""Benchmark: the policy defaults picked by a written rule from a sweep over every shipped trace and the stress traces.

Grid: headroom x look-ahead (none, trend, trend + volatility) x lend hysteresis x stabilisation window,
fleet-wide (every service of the trace's default fleet gets the point). Traces: the two bundled ServeGen
traces (m-small, m-mid: 14 days each, scripts/simulate/data/SOURCE*.md) and the four stress traces
(scripts/simulate/stress.py, 3 days each). Each (trace, point) is one `simulate` replay of the gate mode:
the gate's own `decide` and `plan`, the default fleet (4 services), the generated job queue.

The rule (scripts/simulate/frontier.py's docstring, applied here): not dominated on any shipped trace; of
those, zero delay-minutes outside rises without precedent (scripts/simulate/precedent.py; precedent = every
earlier day of the same trace) on the shipped traces and no more than the previous defaults' on each stress
trace; the best worst-trace share over all six. The chosen point is what scripts/policy/config.py's
ServicePolicy defaults must be: tests/unit/test_policy_defaults_frontier.py reads this file and checks it.
`--rule-only` applies the rule again to the figures table the last sweep wrote (no replay).

Cost: 2 shared cores; one replay takes ~0.3 s (14 days) or ~0.1 s (3 days), so the grid is sized to stay
near 5 minutes. Writes bench/results/frontier.json.
"""

import dataclasses
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
RESULTS = REPO / "bench" / "results" / "frontier.json"
HEADROOMS = (0.3, 0.4, 0.5, 0.6, 0.65, 0.7, 0.85, 1.0)
LOOK_AHEAD = ("none", "trend", "trend+volatility")
HYSTERESIS = (0, 1, 2)
STABILIZATION = (300.0, 900.0, 1800.0)
PREVIOUS_DEFAULTS = {"headroom": 0.65, "look_ahead": "trend", "lend_hysteresis": 0, "stabilization_seconds": 900.0}
WORKERS = 2  # the machine's cores are shared; more processes would only queue
SHIPPED = ("m-small", "m-mid")
FIELDS = ("share", "delay_minutes", "slo_minutes", "preemptions", "delay_without_precedent")


INCLUDES = [
    "share: GPU-hours lent over those of the fixed reference (an oracle that knows the demand over the same "
    "reaction time, at headroom 0.2), fleet-wide, over the whole trace",
    "delay_minutes: minutes in which some service's modelled FIFO queueing delay is above 30 s",
    "delay_without_precedent: of those, minutes only delay episodes starting within a rise without precedent (or "
    "one reaction time after it) explain; precedent: the largest rise of every earlier day of the same trace (the "
    "first day is its own)",
    "slo_minutes: service-minutes whose demand is above the capacity in service",
    "preemptions: research jobs stopped by a reclaim",
]
ASSUMES = [
    "the default fleet of each trace (4 services sized so the peak minute needs 90% of the baseline), the "
    "generated job queue (400 jobs a service), tick 60 s, reclaim check 15 s",
    "return path: vLLM cold start 4 min and a stopped job's exit 30 s (the fleet file's constants, not measured: "
    "see bench/gpu/gpu_check.py and offhours calibrate --gpu-check)",
    "per-minute traces (the ServeGen ones are flat within 10-minute windows); capacity per replica from the "
    "trace's peak",
    "trend+volatility is volatilityHeadroomMax 1.0 over a 6-hour lookback",
]


def _traces() -> list[Any]:
    from offhours.scripts.simulate.stress import all_traces
    from offhours.scripts.simulate.trace import load_trace

    return [load_trace("m-small"), load_trace("m-mid"), *all_traces()]


def short_name(trace: Any) -> str:
    """The trace's name in the tables."""
    return {"servegen_m_small_per_minute.csv": "m-small", "servegen_m_mid_per_minute.csv": "m-mid"}.get(
        trace.name, trace.name)


def figures_of(trace: Any, knobs: Any) -> dict[str, Any]:
    """Replay `trace` on its default fleet with every service at `knobs`; the four figures and delay told apart."""
    from offhours.scripts.simulate.engine import reaction_minutes
    from offhours.scripts.simulate.fleet import default_fleet, generated_jobs
    from offhours.scripts.simulate.precedent import causal_precedent, split_delay
    from offhours.scripts.simulate.report import simulate

    fleet = default_fleet(trace)
    fleet = dataclasses.replace(fleet, services=tuple(
        dataclasses.replace(s, policy=knobs.apply(s.policy)) for s in fleet.services))
    sim = simulate(trace, fleet, generated_jobs(fleet), modes=("gate",), workers=1)
    report = sim.reports["gate"]
    names = [s.name for s in fleet.services]
    horizon = {s.name: max(1, math.ceil(reaction_minutes(s, fleet) - 1e-9)) for s in fleet.services}
    needs = {n: sim.series[f"need:{n}"] for n in names}
    total, apart = split_delay({n: sim.series[f"gate:wait:{n}"] for n in names}, needs,
                               {n: causal_precedent(needs[n], horizon[n]) for n in names}, horizon,
                               fleet.delay_target_seconds)
    assert int(total.sum()) == report.delay_minutes  # the same minutes the report counts
    share = report.share_of_reference if math.isfinite(report.share_of_reference) else 0.0
    return {"share": round(share, 4), "delay_minutes": report.delay_minutes, "slo_minutes": report.slo_minutes,
            "preemptions": report.preemptions, "delay_without_precedent": int(apart.sum())}


FIRST_RULE = {  # the first version of the rule (scripts/simulate/frontier.py's docstring), on the same sweep
    "rule": "step 1 on all six traces; zero delay outside unprecedented rises on every trace where some point had zero",
    "undominatedOnEveryTrace": 3,
    "fallback": "no undominated point has zero delay outside unprecedented rises on every trace where one could: "
                "kept those with the fewest such minutes summed (295)",
    "chosen": {"headroom": 0.3, "look_ahead": "none", "lend_hysteresis": 2, "stabilization_seconds": 900.0},
    "chosenOnShipped": {"m-small": {"share": 0.7521, "delay_minutes": 40, "delay_without_precedent": 11},
                        "m-mid": {"share": 0.6685, "delay_minutes": 63, "delay_without_precedent": 40}},
}


def sweep() -> dict[str, Any]:
    """Every trace x every point: the figures table."""
    from offhours.scripts.policy.config import Capacity, ServicePolicy
    from offhours.scripts.simulate.parallel import map_replays
    from offhours.scripts.simulate.tune import Knobs

    traces = _traces()
    points = [Knobs(h, look, hy, st) for h in HEADROOMS for look in LOOK_AHEAD for hy in HYSTERESIS
              for st in STABILIZATION]
    previous = Knobs(**PREVIOUS_DEFAULTS)
    shipped = Knobs.of(ServicePolicy("x", Capacity(requests_per_second=1.0)))
    for extra in (previous, shipped):
        if extra not in points:
            points.append(extra)
    t0 = time.perf_counter()
    one = figures_of(traces[0], previous)
    single_s = time.perf_counter() - t0

    def task(i: int) -> dict[str, Any]:
        return figures_of(traces[i // len(points)], points[i % len(points)])

    t0 = time.perf_counter()
    rows = map_replays(task, len(traces) * len(points), WORKERS)
    sweep_s = time.perf_counter() - t0
    names = [short_name(t) for t in traces]
    assert rows[points.index(previous)] == one  # a replay is deterministic
    return {"points": [dataclasses.asdict(p) for p in points], "traces": names,
            "figures": {names[t]: [[rows[t * len(points) + j][k] for k in FIELDS] for j in range(len(points))]
                        for t in range(len(traces))},
            "timing": {"singleReplay_m_small_s": round(single_s, 2), "sweep_s": round(sweep_s, 1),
                       "replays": len(rows), "workers": WORKERS, "load_average_1min_at_end": os.getloadavg()[0]}}


def decide(table: dict[str, Any]) -> dict[str, Any]:
    """Apply the rule to the figures table; the choice, the frontier per trace, the comparison with the old defaults."""
    from offhours.scripts.policy.config import Capacity, ServicePolicy
    from offhours.scripts.simulate import frontier as frontier_module
    from offhours.scripts.simulate.frontier import Figures, choose_default, dominated_on, frontier_of
    from offhours.scripts.simulate.tune import Knobs

    points = [Knobs(**p) for p in table["points"]]
    names = table["traces"]
    results = {n: {p: Figures(*row) for p, row in zip(points, table["figures"][n])} for n in names}
    previous = Knobs(**PREVIOUS_DEFAULTS)
    shipped_traces = [n for n in names if n in SHIPPED]
    bounds = {n: results[n][previous].delay_with_precedent for n in names if n not in SHIPPED}
    choice = choose_default(points, results, {p: p.headroom for p in points}, shipped_traces, bounds)
    chosen = choice.point
    shipped = Knobs.of(ServicePolicy("x", Capacity(requests_per_second=1.0)))

    def entry(p: Any, trace: str) -> dict[str, Any]:
        return {"knobs": dataclasses.asdict(p), **dataclasses.asdict(results[trace][p])}

    per_trace = []
    for name in names:
        row = results[name]
        front = sorted(frontier_of(row), key=lambda p: (-row[p].share, row[p].delay_minutes))
        per_trace.append({"trace": name, "shipped": name in SHIPPED, "frontierSize": len(front),
                          "chosen": entry(chosen, name), "chosenDominatedHere": bool(dominated_on(chosen, {name: row})),
                          "previousDefaults": entry(previous, name),
                          "previousDefaultsDominatedHere": bool(dominated_on(previous, {name: row})),
                          "frontier": [entry(p, name) for p in front]})
    return {
        "rule": " ".join((frontier_module.__doc__ or "").split()),
        "grid": {"headroom": HEADROOMS, "lookAhead": LOOK_AHEAD, "lendHysteresis": HYSTERESIS,
                 "stabilizationSeconds": STABILIZATION, "points": len(points)},
        "traces": names, "shippedTraces": shipped_traces, "stressBounds": bounds,
        "chosen": dataclasses.asdict(chosen), "chosenFragment": chosen.fragment(),
        "previousDefaults": PREVIOUS_DEFAULTS, "shippedDefaults": dataclasses.asdict(shipped),
        "undominatedOnShippedTraces": len(choice.undominated),
        "safe": [dataclasses.asdict(p) for p in choice.safe],
        "fallbacks": list(choice.fallback),
        "chosenDominatedOn": dominated_on(chosen, results),
        "previousDefaultsDominatedOn": dominated_on(previous, results),
        "worstTraceShare": {"chosen": min(results[n][chosen].share for n in names),
                            "previousDefaults": min(results[n][previous].share for n in names)},
        "perTrace": per_trace,
        "firstRule": FIRST_RULE,
        "includes": INCLUDES, "assumes": ASSUMES,
    }


def main() -> None:
    """Run the sweep (or, with --rule-only, read its table back), apply the rule, write the results, print them."""
    if "--rule-only" in sys.argv[1:]:
        table = json.loads(RESULTS.read_text())["table"]
    else:
        table = sweep()
    result = {**decide(table), "timing": table["timing"], "python": sys.version.split()[0], "table": table}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=1) + "\n")
    print("chosen", result["chosen"], "fallbacks", result["fallbacks"], "undominated on shipped",
          result["undominatedOnShippedTraces"], "safe", len(result["safe"]))
    for t in result["perTrace"]:
        c, p = t["chosen"], t["previousDefaults"]
        print(f"{t['trace'][:40]:40} frontier {t['frontierSize']:3d}  chosen {c['share']:.4f} d{c['delay_minutes']} "
              f"(apart {c['delay_without_precedent']}) slo{c['slo_minutes']} p{c['preemptions']}  |  previous "
              f"{p['share']:.4f} d{p['delay_minutes']} (apart {p['delay_without_precedent']}) slo{p['slo_minutes']} "
              f"p{p['preemptions']}")
    print(json.dumps(result["timing"]))


if __name__ == "__main__":
    main()
