"""What the demo prints, as pure functions: changes between two observations, the legend, the summary.

A person reads the demo's output as it scrolls, so each line says only what changed since the
line before it (never the whole state again), and every number says its unit and its clock: the
replayed trace's clock (`trace day 1 18:40`) runs `speed` times faster than the wall clock, and the
gate's durations are wall-clock seconds.
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from offhours.scripts.names import STATE_PREEMPTED

GPUS_PER_REPLICA = 4
HEADROOM = 0.25  # the demo gate configuration's headroom: what "needs N replicas" adds to the load
# The gate's reasons that only restate its numbers, which the gate line already says in words.
_RESTATED = re.compile(r"load needs \d+ of \d+ replicas(; \d+ lent)?")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_WALL_SECONDS = re.compile(r"for (\d+(?:\.\d+)?) s\b")


@dataclass(frozen=True)
class GateDecision:
    """The gate's last decision as its state ConfigMap records it (lent: after this tick; target: allowed)."""

    action: str
    required: int | None
    lent: int | None
    target: int | None
    reason: str
    at: float = 0.0  # the gate's clock: seconds since the epoch


@dataclass(frozen=True)
class JobState:
    """One research workflow as the demo shows it: Argo's phase, its state as the verbs say it, the gate's waiting reason."""

    phase: str
    state: str = ""
    reason: str = ""

    def status(self) -> str:
        """Return `phase, state` (the state only when there is one and it is not the phase again: `Running`)."""
        return f"{self.phase}, {self.state}" if self.state and self.state != self.phase.lower() else self.phase


@dataclass(frozen=True)
class Snapshot:
    """What the demo watches: serving replicas, the gate's last decision, each research workflow's state."""

    replicas: int
    ready: int
    decision: GateDecision | None = None
    jobs: dict[str, JobState] = field(default_factory=dict)

    @property
    def decided_at(self) -> float:
        """When the gate last decided (seconds since the epoch; 0 when it never did)."""
        return self.decision.at if self.decision else 0.0


def legend(service: str, baseline: int, speed: float) -> list[str]:
    """Return the lines, printed once, that say how to read the demo's numbers and clocks."""
    return [
        f"how to read it: [trace day D HH:MM | wall +S s] is the replayed trace's clock ({speed:g} trace seconds "
        "per wall second) and the wall-clock seconds since the demo started;",
        f"  'needs N of {baseline}': replicas the load needs with the gate's {HEADROOM:.0%} headroom and its "
        f"look-ahead of the trend, so N can exceed the {baseline} the fleet has;",
        f"  'L lent, up to T allowed': L replicas of {service} are lent to research jobs now; the gate would "
        "lend up to T (more are lent only when parked jobs ask for them);",
        "  the gate's durations ('for 15 s') are wall-clock seconds.",
    ]


def gate_line(decision: GateDecision, baseline: int, speed: float) -> str:
    """Return the gate's decision in words (its numbers named; a duration in wall and trace time)."""
    if decision.action == "failed":
        return f"gate tick failed: {decision.reason}"
    parts = [f"gate {decision.action}"]
    if decision.required is not None:
        parts.append(f"needs {decision.required} of {baseline}")
    if decision.lent is not None:
        allowed = f", up to {decision.target} allowed" if decision.target is not None else ""
        parts.append(f"{decision.lent} lent{allowed}")
    line = ": ".join(parts[:2]) + "".join(f"; {p}" for p in parts[2:])
    reason = decision.reason.strip()
    if reason and not _RESTATED.fullmatch(reason):
        line += f" ({_with_trace_time(reason, speed)})"
    return line


def _with_trace_time(reason: str, speed: float) -> str:
    def both(match: re.Match[str]) -> str:
        seconds = float(match.group(1))
        return f"for {seconds:g} wall s = {seconds * speed / 60:g} trace min"
    return _WALL_SECONDS.sub(both, reason)


def changes(before: Snapshot | None, after: Snapshot, service: str, baseline: int, speed: float) -> list[str]:
    """Return one short line per change between two snapshots (all of `after` when there is no `before`).

    The gate line appears when its action or what it lends changes (not on every tick that
    recomputes the same decision); a job line names its new status, and the gate's reason for it
    only when that reason is new in its wording (not when a tick only recomputed its numbers).
    """
    lines: list[str] = []
    if before is None or (before.replicas, before.ready) != (after.replicas, after.ready):
        lent = baseline - after.replicas
        earlier = "" if before is None else f" (was {before.ready} of {before.replicas})"
        lines.append(f"{service}: {after.ready} of {after.replicas} replicas ready{earlier}"
                     + (f", {lent} lent to research" if lent > 0 else ""))
    if after.decision and (before is None or before.decision is None
                           or _gist(before.decision) != _gist(after.decision)):
        lines.append(gate_line(after.decision, baseline, speed))
    for name, job in sorted(after.jobs.items()):
        was = None if before is None else before.jobs.get(name)
        if was is not None and was == job:
            continue
        if was is None or was.status() != job.status():
            line = f"job {name}: {job.status()}" + (f" (was {was.status()})" if was else "")
            if job.reason and (was is None or was.reason != job.reason):
                line += f"; {job.reason}"
            lines.append(line)
        elif job.reason and _shape(job.reason) != _shape(was.reason):
            lines.append(f"job {name}: {job.reason}")
    return lines


def _shape(reason: str) -> str:
    """Return a reason with its numbers blanked: the same wording with a recomputed need is no news."""
    return _NUMBER.sub("#", reason)


def _gist(decision: GateDecision) -> tuple[str, int | None, int | None, str]:
    reason = "" if _RESTATED.fullmatch(decision.reason.strip()) else decision.reason
    if decision.action == "hold":
        reason = _WALL_SECONDS.sub("", reason)
    return decision.action, decision.lent, decision.target, reason


@dataclass(frozen=True)
class Summary:
    """What a demo run amounted to, for its last lines."""

    lent_gpu_hours_trace: float  # GPU-hours lent, on the trace clock
    lent_gpu_hours_wall: float  # the same lending, on the wall clock
    preempted: tuple[str, ...]  # workflows stopped to give their GPUs back, in order
    resumed_from: dict[str, int]  # workflow -> the step it resumed from (only those that resumed)


def summarize(samples: Sequence[tuple[float, Snapshot]], baseline: int, speed: float,
              resumed_from: dict[str, int]) -> Summary:
    """Sum the lending of the samples (wall-clock seconds, snapshot) and list the preempted workflows.

    Preempted is the state the verbs read (pool/model.py: it held lent GPUs), never a stop before admission.

    Each sample's lending counts until the next sample: baseline minus the replicas the
    Deployment asks for, times the GPUs of a replica.
    """
    wall_seconds = 0.0
    for (t, snap), (t_next, _) in zip(samples, samples[1:]):
        wall_seconds += max(0, baseline - snap.replicas) * GPUS_PER_REPLICA * max(0.0, t_next - t)
    preempted: list[str] = []
    for _, snap in samples:
        for name, job in sorted(snap.jobs.items()):
            if job.state == STATE_PREEMPTED and name not in preempted:
                preempted.append(name)
    return Summary(wall_seconds * speed / 3600, wall_seconds / 3600, tuple(preempted), dict(resumed_from))


def summary_lines(summary: Summary, namespace: str, run: str, speed: float) -> list[str]:
    """Return the demo's closing lines: what was lent, preempted and resumed, and what to try next."""
    lines = [f"summary: {summary.lent_gpu_hours_trace:.1f} GPU-hours lent on the trace clock "
             f"({summary.lent_gpu_hours_wall * 60:.1f} GPU-minutes of wall clock at {speed:g}x)",
             f"  preemptions: {len(summary.preempted)}" + (f" ({', '.join(summary.preempted)})"
                                                            if summary.preempted else "")]
    if summary.resumed_from:
        lines += [f"  {name} resumed from its checkpoint at step {step}"
                  for name, step in sorted(summary.resumed_from.items())]
    elif summary.preempted:
        lines.append("  no copy resumed from a checkpoint before the demo ended")
    lines += ["try next:",
              f"  offhours jobs -n {namespace} --all      the jobs, their states and GPU-hours",
              f"  offhours why {run} -n {namespace}     its timeline: admitted, preempted, resumed",
              f"  offhours logs {run} -n {namespace}    every attempt's log, in order",
              "  make sandbox                 the same loop, kept live for your own jobs (README: Try it locally)"]
    return lines
