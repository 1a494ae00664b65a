"""Run the three modes on one trace and account for them: harvest, work, preemptions, SLO, saving."""

import json
import math
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
    service_rates,
)
from offhours.scripts.simulate.fleet import Fleet, JobSpec
from offhours.scripts.trace import Trace

MODES = ("gate", "fixed-window", "oracle")


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


@dataclass
class Simulation:
    """The reports of every mode, and fleet-wide series per minute for the plot (in GPUs)."""

    trace: str
    minutes: int
    gpus: int
    reports: dict[str, ModeReport]
    series: dict[str, np.ndarray] = field(default_factory=dict)


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


def _run_mode(trace: Trace, fleet: Fleet, jobs: list[JobSpec], mode: str) -> tuple[ModeReport, dict[str, np.ndarray]]:
    minutes, hours = trace.minutes, trace.minutes / 60.0
    lent_gpu = np.zeros(minutes)
    capacity_gpu = np.zeros(minutes)
    all_jobs: list[SimJob] = []
    slo = 0
    worst = 0.0
    delays: list[float] = []
    for spec in fleet.services:
        gpus = spec.policy.gpus_per_replica
        sim = ServiceSim(spec, fleet, service_rates(trace, spec), [SimJob(j) for j in jobs if j.service == spec.name])
        sim.run(GateController(sim) if mode == "gate" else FixedWindowController(sim))
        capacity = events_to_array(sim.capacity_events, spec.baseline, minutes)
        lent = events_to_array(sim.lent_events, 0, minutes)
        short = sim.demand > capacity + 1e-9
        slo += int(short.sum())
        if short.any():
            worst = max(worst, float(np.max((sim.demand[short] - capacity[short]) / sim.demand[short])))
        delays += restore_delays(sim.demand, capacity, spec.policy.headroom, spec.baseline)
        lent_gpu += lent * gpus
        capacity_gpu += capacity * gpus
        all_jobs += sim.jobs
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
    )
    return report, {"lent": lent_gpu, "capacity": capacity_gpu}


def simulate(trace: Trace, fleet: Fleet, jobs: list[JobSpec]) -> Simulation:
    """Replay `trace` through the gate, the fixed window and the oracle on the same fleet and jobs."""
    reports: dict[str, ModeReport] = {}
    series: dict[str, np.ndarray] = {}
    for mode in ("gate", "fixed-window"):
        reports[mode], mode_series = _run_mode(trace, fleet, jobs, mode)
        series.update({f"{mode}:{k}": v for k, v in mode_series.items()})
    oracle_gpu = np.zeros(trace.minutes)
    demand_gpu = np.zeros(trace.minutes)
    for spec in fleet.services:
        demand = ServiceSim(spec, fleet, service_rates(trace, spec), []).demand
        oracle_gpu += oracle_lendable(demand, spec, fleet) * spec.policy.gpus_per_replica
        demand_gpu += demand * spec.policy.gpus_per_replica
    oracle_h = float(oracle_gpu.sum()) / 60.0
    reports["oracle"] = ModeReport("oracle", oracle_h, oracle_h / (trace.minutes / 60.0), share_of_oracle=1.0)
    for report in reports.values():
        report.share_of_oracle = report.gpu_hours_lent / oracle_h if oracle_h else math.nan
    series["demand"] = demand_gpu
    series["oracle:lent"] = oracle_gpu
    gpus = sum(s.baseline * s.policy.gpus_per_replica for s in fleet.services)
    return Simulation(trace.name, trace.minutes, gpus, reports, series)


_ROWS = (
    ("GPU-hours lent", "gpu_hours_lent", "{:,.0f}"),
    ("GPUs lent on average", "avg_gpus_lent", "{:,.1f}"),
    ("share of the oracle's GPU-hours", "share_of_oracle", "{:.1%}"),
    ("GPU-hours used by jobs", "gpu_hours_used", "{:,.0f}"),
    ("research work done (GPU-hours)", "work_done_gpu_hours", "{:,.0f}"),
    ("work lost to preemption (GPU-hours)", "work_lost_gpu_hours", "{:,.1f}"),
    ("jobs completed", "jobs_completed", "{:,}"),
    ("preemptions", "preemptions", "{:,}"),
    ("SLO-minutes (demand > capacity in service)", "slo_minutes", "{:,}"),
    ("worst SLO shortfall", "slo_worst_shortfall_pct", "{:.1f}%"),
    ("load rise -> capacity restored, worst (min)", "restore_worst_minutes", "{:.0f}"),
    ("load rise -> capacity restored, p99 (min)", "restore_p99_minutes", "{:.0f}"),
    ("estimated saving", "saving", "{:,.0f}"),
)


def text_table(sim: Simulation, price: float) -> str:
    """Render the reports as a text table, one column per mode."""
    width = max(len(r[0]) for r in _ROWS) + 2
    lines = [f"trace {sim.trace}: {sim.minutes / 1440:.1f} days; fleet {sim.gpus} GPUs; GPU-hour price {price:g}",
             "".ljust(width) + "".join(m.rjust(14) for m in MODES)]
    for label, attr, fmt in _ROWS:
        cells = []
        for mode in MODES:
            report = sim.reports[mode]
            value = getattr(report, attr)
            cells.append(("-" if mode == "oracle" and attr not in ("gpu_hours_lent", "avg_gpus_lent", "share_of_oracle")
                          else fmt.format(value)).rjust(14))
        lines.append(label.ljust(width) + "".join(cells))
    lines.append("oracle: the most that could be lent knowing the future demand, at the same headroom "
                 "(lendable capacity, not jobs run).")
    return "\n".join(lines)


def write_json(sim: Simulation, path: Path) -> None:
    """Write the reports as JSON."""
    body: dict[str, Any] = {"trace": sim.trace, "minutes": sim.minutes, "fleetGpus": sim.gpus,
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
