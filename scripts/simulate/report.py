"""Run the modes on one trace and account for them: harvest, work, preemptions, SLO, queueing delay, saving.

Two SLOs: the strict one counts every minute whose demand is above the capacity in service; the
latency one models each service's queue (work above capacity waits, first in first out, and is
served when capacity allows) and counts the minutes whose queueing delay is above a target.
Two references, both knowing the future over the same reaction time: the oracle at a fixed
headroom (`referenceHeadroom`, 0.2), which the table leads with, and the oracle at the policy's own.
"""

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from offhours.scripts.simulate.engine import (
    FixedWindowController,
    GateController,
    ServiceSim,
    SimJob,
    events_to_array,
    oracle_lendable,
    service_demand,
    service_rates,
)
from offhours.scripts.simulate.fleet import Fleet, JobSpec, ServiceSpec
from offhours.scripts.simulate.parallel import map_replays
from offhours.scripts.simulate.trace import Trace

MODES = ("gate", "fixed-window", "reference", "oracle")


@dataclass
class ModeReport:
    """What one mode gave and what it risked over the whole trace."""

    mode: str
    gpu_hours_lent: float
    avg_gpus_lent: float
    gpu_hours_used: float = 0.0
    work_done_gpu_hours: float = 0.0
    work_lost_gpu_hours: float = 0.0
    jobs_completed: int = 0
    preemptions: int = 0
    slo_minutes: int = 0
    slo_worst_shortfall_pct: float = 0.0
    restore_worst_minutes: float = 0.0
    restore_p99_minutes: float = 0.0
    saving: float = 0.0
    share_of_oracle: float = 0.0
    share_of_reference: float = 0.0
    delay_minutes: int = 0  # minutes in which some service's queueing delay is above the target
    delay_p99_seconds: float = 0.0
    delay_worst_seconds: float = 0.0
    per_service: dict[str, dict[str, float]] = field(default_factory=dict)


@dataclass
class Simulation:
    """The reports of every mode, and fleet-wide series per minute for the plot (in GPUs)."""

    trace: str
    minutes: int
    gpus: int
    reports: dict[str, ModeReport]
    series: dict[str, np.ndarray] = field(default_factory=dict)
    reference_headroom: float = 0.2
    delay_target_seconds: float = 30.0


def restore_delays(demand: np.ndarray, capacity: np.ndarray, headroom: float, baseline: int) -> list[float]:
    """Minutes from each load rise to capacity restored.

    A rise starts when the load with its headroom (at most the baseline: more was never there)
    needs more replicas than are in service, and ends when enough are serving again.
    """
    short = np.minimum(np.ceil(demand * (1.0 + headroom) - 1e-9), baseline) > capacity
    if not short.any():
        return []
    edges = np.diff(np.concatenate(([0], short.astype(np.int8), [0])))
    return [float(e - s) for s, e in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1))]


def queue_delays(demand: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Seconds the last work arriving in each minute waits, in a first-in-first-out queue.

    Work (replica-minutes) above the capacity waits; the backlog follows Lindley's recursion
    B[t] = max(0, B[t-1] + demand[t] - capacity[t]); work arriving by the end of minute t is
    served once the cumulative service reaches the cumulative arrivals (linear within a minute).
    """
    n = demand.shape[0]
    x = np.cumsum(demand - capacity)
    backlog = x - np.minimum(np.minimum.accumulate(x), 0.0)
    backlog[backlog < 1e-9] = 0.0
    arrived = np.cumsum(demand)
    served = arrived - backlog
    delays = np.zeros(n)
    late = np.flatnonzero(backlog > 0)
    if late.size == 0:
        return delays
    done = np.searchsorted(served, arrived[late] - 1e-9, side="left")
    inside = done < n
    d, t = done[inside], late[inside]
    before = served[d - 1]
    frac = (arrived[t] - before) / np.maximum(served[d] - before, 1e-12)
    delays[t] = (d + frac - (t + 1)) * 60.0
    # Still waiting when the trace ends: the backlog at the last minute's capacity.
    t = late[~inside]
    delays[t] = ((n - 1 - t) + backlog[-1] / max(float(capacity[-1]), 1e-12)) * 60.0
    return np.maximum(delays, 0.0)


@dataclass
class ServiceRun:
    """One service's replay in one mode, with what the report needs of it (computed where it was replayed)."""

    capacity_events: list[tuple[float, int]]
    lent_events: list[tuple[float, int]]
    jobs: list[SimJob]
    wait: np.ndarray  # queueing delay each minute, seconds
    stats: dict[str, float]  # the service's line in the report's per-service table
    worst_shortfall: float  # the largest share of demand above capacity in one minute
    restore_delays: list[float]
    short: np.ndarray  # minutes whose demand is above the capacity in service (the strict SLO)
    preempted_at: list[float]  # the minute of each preemption


def _replay(trace: Trace, fleet: Fleet, spec: ServiceSpec, jobs: list[JobSpec], mode: str) -> ServiceRun:
    """Replay one service in one mode with its jobs, and account for it."""
    sim = ServiceSim(spec, fleet, service_rates(trace, spec), [SimJob(j) for j in jobs])
    sim.run(GateController(sim) if mode == "gate" else FixedWindowController(sim))
    for job in sim.jobs:  # the planner's views of the job: needed during the replay only
        job.parked_view = job.admitted_view = None
    demand, minutes = sim.demand, trace.minutes
    capacity = events_to_array(sim.capacity_events, spec.baseline, minutes)
    lent = events_to_array(sim.lent_events, 0, minutes)
    short = demand > capacity + 1e-9
    wait = queue_delays(demand, capacity)
    stats = {
        "gpu_hours_lent": float(lent.sum()) * spec.policy.gpus_per_replica / 60.0, "slo_minutes": int(short.sum()),
        "delay_minutes": int((wait > fleet.delay_target_seconds).sum()),
        "delay_p99_seconds": float(np.percentile(wait, 99)), "delay_worst_seconds": float(wait.max()),
    }
    worst = float(np.max((demand[short] - capacity[short]) / demand[short])) if short.any() else 0.0
    return ServiceRun(sim.capacity_events, sim.lent_events, sim.jobs, wait, stats, worst,
                      restore_delays(demand, capacity, spec.policy.headroom, spec.baseline), short, sim.preempted_at)


def _run_mode(trace: Trace, fleet: Fleet, mode: str, runs: list[ServiceRun]) -> tuple[ModeReport, dict[str, np.ndarray]]:
    minutes, hours = trace.minutes, trace.minutes / 60.0
    delay_target = fleet.delay_target_seconds
    lent_gpu = np.zeros(minutes)
    capacity_gpu = np.zeros(minutes)
    all_jobs: list[SimJob] = []
    delays: list[float] = []
    fleet_delay = np.zeros(minutes)
    for spec, run in zip(fleet.services, runs):
        gpus = spec.policy.gpus_per_replica
        lent_gpu += events_to_array(run.lent_events, 0, minutes) * gpus
        capacity_gpu += events_to_array(run.capacity_events, spec.baseline, minutes) * gpus
        np.maximum(fleet_delay, run.wait, out=fleet_delay)
        delays += run.restore_delays
        all_jobs += run.jobs
    slo = sum(int(run.stats["slo_minutes"]) for run in runs)
    worst = max((run.worst_shortfall for run in runs), default=0.0)
    per_service = {spec.name: run.stats for spec, run in zip(fleet.services, runs)}
    gpu_h = float(lent_gpu.sum()) / 60.0
    used = sum(j.gpu_minutes_used for j in all_jobs) / 60.0
    gpus_of = {s.name: s.policy.gpus_per_replica for s in fleet.services}

    def job_gpu_hours(job: SimJob, minutes_of_work: float) -> float:
        return minutes_of_work * job.spec.replicas * gpus_of[job.spec.service] / 60.0

    report = ModeReport(
        mode=mode,
        gpu_hours_lent=gpu_h,
        avg_gpus_lent=gpu_h / hours,
        gpu_hours_used=used,
        work_done_gpu_hours=sum(job_gpu_hours(j, min(j.progress, j.work_minutes)) for j in all_jobs),
        work_lost_gpu_hours=sum(job_gpu_hours(j, j.lost_minutes) for j in all_jobs),
        jobs_completed=sum(j.done_at is not None for j in all_jobs),
        preemptions=sum(j.preemptions for j in all_jobs),
        slo_minutes=slo,
        slo_worst_shortfall_pct=100.0 * worst,
        restore_worst_minutes=max(delays, default=0.0),
        restore_p99_minutes=float(np.percentile(delays, 99)) if delays else 0.0,
        saving=used * fleet.gpu_hour_price,
        delay_minutes=int((fleet_delay > delay_target).sum()),
        delay_p99_seconds=float(np.percentile(fleet_delay, 99)),
        delay_worst_seconds=float(fleet_delay.max()),
        per_service=per_service,
    )
    # Per minute, for accounting over some of the days (tune's folds) and delay told apart by its cause.
    series = {"lent": lent_gpu, "capacity": capacity_gpu,
              "preemptions": np.bincount(np.clip(np.ceil(np.asarray([t for run in runs for t in run.preempted_at])
                                                                 - 1e-9).astype(np.int64), 0, minutes - 1),
                                         minlength=minutes).astype(np.float64)}
    for spec, run in zip(fleet.services, runs):
        series[f"wait:{spec.name}"] = run.wait
        series[f"lent:{spec.name}"] = events_to_array(run.lent_events, 0, minutes)  # replicas: nodes.py places them
        series[f"short:{spec.name}"] = run.short.astype(np.float64)
    return report, series


def simulate(trace: Trace, fleet: Fleet, jobs: list[JobSpec], modes: tuple[str, ...] = MODES,
             workers: int | None = None, traces: Mapping[str, Trace] | None = None) -> Simulation:
    """Replay `trace` through the gate, the fixed window and both oracles on the same fleet and jobs.

    `traces`: a service's own trace (e.g. its history from Prometheus), replayed instead of its share
    of `trace`; each must be as long as `trace`. The services' replays run in up to `workers`
    processes (None: as `map_replays` chooses); the result is the same for any number.
    """
    own = dict(traces or {})
    for name, other in own.items():
        if other.minutes != trace.minutes:
            raise ValueError(f"service {name}'s trace has {other.minutes} minutes, not {trace.minutes}")
    reports: dict[str, ModeReport] = {}
    series: dict[str, np.ndarray] = {}
    target = fleet.delay_target_seconds
    replayed = [mode for mode in ("gate", "fixed-window") if mode in modes]
    n = len(fleet.services)
    jobs_of: dict[str, list[JobSpec]] = {spec.name: [] for spec in fleet.services}
    for job in jobs:
        if job.service in jobs_of:
            jobs_of[job.service].append(job)
    services = fleet.services

    def replay(k: int) -> ServiceRun:
        spec = services[k % n]
        return _replay(own.get(spec.name, trace), fleet, spec, jobs_of[spec.name], replayed[k // n])

    done = map_replays(replay, len(replayed) * n, workers)
    for m, mode in enumerate(replayed):
        reports[mode], mode_series = _run_mode(trace, fleet, mode, done[m * n:(m + 1) * n])
        series.update({f"{mode}:{k}": v for k, v in mode_series.items()})
    oracle_gpu, reference_gpu, demand_gpu = np.zeros(trace.minutes), np.zeros(trace.minutes), np.zeros(trace.minutes)
    for spec in fleet.services:
        demand = service_demand(service_rates(own.get(spec.name, trace), spec), spec)
        gpus = spec.policy.gpus_per_replica
        oracle_gpu += oracle_lendable(demand, spec, fleet) * gpus
        reference_gpu += oracle_lendable(demand, spec, fleet, headroom=fleet.reference_headroom) * gpus
        demand_gpu += demand * gpus
        series[f"need:{spec.name}"] = demand  # fractional replicas per minute: what rises are measured on
    hours = trace.minutes / 60.0
    oracle_h, reference_h = float(oracle_gpu.sum()) / 60.0, float(reference_gpu.sum()) / 60.0
    reports["reference"] = ModeReport("reference", reference_h, reference_h / hours)
    reports["oracle"] = ModeReport("oracle", oracle_h, oracle_h / hours)
    for report in reports.values():
        report.share_of_oracle = report.gpu_hours_lent / oracle_h if oracle_h else math.nan
        report.share_of_reference = report.gpu_hours_lent / reference_h if reference_h else math.nan
    series["demand"] = demand_gpu
    series["oracle:lent"] = oracle_gpu
    series["reference:lent"] = reference_gpu
    gpus = sum(s.baseline * s.policy.gpus_per_replica for s in fleet.services)
    return Simulation(trace.name, trace.minutes, gpus, reports, series, fleet.reference_headroom, target)


_ROWS = (
    ("share of the fixed reference's GPU-hours", "share_of_reference", "{:.1%}"),
    ("GPU-hours lent", "gpu_hours_lent", "{:,.0f}"),
    ("GPUs lent on average", "avg_gpus_lent", "{:,.1f}"),
    ("share of the same-headroom oracle's", "share_of_oracle", "{:.1%}"),
    ("GPU-hours used by jobs", "gpu_hours_used", "{:,.0f}"),
    ("research work done (GPU-hours)", "work_done_gpu_hours", "{:,.0f}"),
    ("work lost to preemption (GPU-hours)", "work_lost_gpu_hours", "{:,.1f}"),
    ("jobs completed", "jobs_completed", "{:,}"),
    ("preemptions", "preemptions", "{:,}"),
    ("SLO-minutes (demand > capacity in service)", "slo_minutes", "{:,}"),
    ("minutes with queueing delay > target", "delay_minutes", "{:,}"),
    ("queueing delay p99 / worst (s)", "delay", "{:.0f} / {:.0f}"),
    ("worst SLO shortfall", "slo_worst_shortfall_pct", "{:.1f}%"),
    ("load rise -> capacity restored, worst (min)", "restore_worst_minutes", "{:.0f}"),
    ("load rise -> capacity restored, p99 (min)", "restore_p99_minutes", "{:.0f}"),
    ("estimated saving", "saving", "{:,.0f}"),
)


_ORACLE_ROWS = ("gpu_hours_lent", "avg_gpus_lent", "share_of_oracle", "share_of_reference")


def text_table(sim: Simulation, price: float) -> str:
    """Render the reports as a text table, one column per mode."""
    width = max(len(r[0]) for r in _ROWS) + 2
    modes = [m for m in MODES if m in sim.reports]
    lines = [f"trace {sim.trace}: {sim.minutes / 1440:.1f} days; fleet {sim.gpus} GPUs; GPU-hour price {price:g}",
             "".ljust(width) + "".join(m.rjust(14) for m in modes)]
    for label, attr, fmt in _ROWS:
        cells = []
        for mode in modes:
            report = sim.reports[mode]
            text = (fmt.format(report.delay_p99_seconds, report.delay_worst_seconds) if attr == "delay"
                    else fmt.format(getattr(report, attr)))
            if mode in ("reference", "oracle") and attr not in _ORACLE_ROWS:
                text = "-"
            cells.append(text.rjust(14))
        lines.append(label.ljust(width) + "".join(cells))
    lines.append(f"reference: the most that could be lent knowing the future demand over the same reaction time, "
                 f"at headroom {sim.reference_headroom:g}; oracle: the same at the policy's headroom "
                 f"(lendable capacity, not jobs run). Queueing delay target: {sim.delay_target_seconds:g} s.")
    return "\n".join(lines)


def write_json(sim: Simulation, path: Path) -> None:
    """Write the reports as JSON."""
    body: dict[str, Any] = {"trace": sim.trace, "minutes": sim.minutes, "fleetGpus": sim.gpus,
                            "referenceHeadroom": sim.reference_headroom, "delayTargetSeconds": sim.delay_target_seconds,
                            "modes": {m: asdict(r) for m, r in sim.reports.items()}}
    path.write_text(json.dumps(body, indent=2) + "\n")


def write_plot(sim: Simulation, path: Path, days: float = 3.0) -> None:
    """Plot load, capacity in service and GPUs lent over time (the first `days`), as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = min(sim.minutes, int(days * 1440))
    hours = np.arange(n) / 60.0
    fig, ax = plt.subplots(figsize=(12, 5), dpi=110)
    ax.plot(hours, sim.series["demand"][:n], color="black", lw=0.8, label="load (GPUs' worth)")
    ax.plot(hours, sim.series["gate:capacity"][:n], color="tab:blue", lw=1.0, label="capacity in service, gate")
    ax.fill_between(hours, 0, sim.series["gate:lent"][:n], color="tab:green", alpha=0.35, label="GPUs lent, gate")
    if "fixed-window:lent" in sim.series:  # a history replay has no fixed window to compare with
        ax.plot(hours, sim.series["fixed-window:lent"][:n], color="tab:orange", lw=1.0, label="GPUs lent, fixed window")
    ax.plot(hours, sim.series["oracle:lent"][:n], color="tab:gray", lw=0.8, ls="--", label="lendable, oracle")
    ax.set_xlabel("hours since the trace's first midnight")
    ax.set_ylabel("GPUs")
    ax.set_xticks(np.arange(0, n / 60 + 1, 6))
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right", fontsize=8)
    ax.set_title(f"offhours simulate: {sim.trace}, first {n / 1440:.0f} days")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
