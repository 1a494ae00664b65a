"""When a requested job would start and how often it would be stopped: the service's history replayed.

The estimate asks the simulator (the gate's own `decide` and `plan`, engine.py) what happened to
such a job on the service's recent days: for each past day with enough history, the replay starts
`WARMUP_MINUTES` before the same minute of the day as now, the jobs ahead of the request (those
running now first, then the parked ones the queue puts before it) are submitted at the replay's
start, and the request at "now". Each day is one outcome; the estimate is their spread:

- start: minutes from submission to the first admission (median and 90th percentile); a day on
  which it was never admitted within the horizon counts as "later than the horizon";
- the share of days with at least one preemption while it ran;
- the mean GPU-hours of work lost to preemption (work since the last checkpoint, at its size).

What it assumes is in `ASSUMPTIONS`, and the page shows it: tomorrow's load is like one of the
recent days at the same time of day; each job ahead needs as long as the request (their own
remaining time is nobody's to know); the fleet's timing (cold start, grace, check period) is the
gate configuration's.
"""

import dataclasses
import math
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from offhours.scripts.policy.config import GateConfig, ServicePolicy
from offhours.scripts.policy.estimate import (
    MAX_BRIDGED_MINUTES,
    MAX_DAYS,
    MAX_HOURS,
    Estimate,
    EstimateError,
    JobAhead,
    JobRequest,
    Outcome,
    percentile,
    usable_from,
)
from offhours.scripts.policy.partial import Missing
from offhours.scripts.simulate.engine import GateController, ServiceSim, SimJob, service_rates
from offhours.scripts.simulate.fleet import Fleet, JobSpec, ServiceSpec
from offhours.scripts.simulate.trace import Trace

DAY = 1440
WARMUP_MINUTES = 120  # the gate's memory (stabilisation window) and the jobs ahead settle before "now"
REQUEST = "estimate-request"  # the request's name in a replay (every job ahead is "ahead-<n>")
# A loader's answer: the trace and "now" in it, and optionally what it could not read exactly (Missing items).
Loaded = tuple[Trace, int] | tuple[Trace, int, tuple[Missing, ...]]

class _TrackedJob(SimJob):
    """A replayed job that remembers when it was first admitted (a resume overwrites `started_at`)."""

    first_started_at: float | None = None

    def start(self, t: float) -> None:
        """Start or resume at `t`, keeping the first start."""
        if self.first_started_at is None:
            self.first_started_at = t
        super().start(t)


def horizon_minutes(request: JobRequest) -> int:
    """Return how far each replay looks past "now": a day to be admitted, then the request's own hours."""
    return DAY + int(math.ceil(min(request.hours, MAX_HOURS) * 60.0))


def _check(request: JobRequest, baseline: int, ahead: list[JobAhead]) -> None:
    if not 1 <= request.replicas <= max(1, baseline):
        raise EstimateError(f"replicas {request.replicas}: the service runs {baseline} replica(s) at baseline")
    if not (0 < request.hours <= 24 * 365) or math.isnan(request.hours):
        raise EstimateError(f"expected hours {request.hours:g}: expected more than 0 and at most a year")
    if not (1 <= request.checkpoint_minutes <= 24 * 60):
        raise EstimateError(f"checkpoint interval {request.checkpoint_minutes:g} min: expected 1 to 1440 minutes")
    if len(ahead) > 10_000:
        raise EstimateError(f"{len(ahead)} jobs ahead: more than an estimate replays")


def replay_day(trace: Trace, now: int, offset_days: int, policy: ServicePolicy, baseline: int, fleet: Fleet,
               request: JobRequest, ahead: list[JobAhead]) -> Outcome:
    """Replay the request on the day `offset_days` before `now` (minute index into `trace`)."""
    horizon = horizon_minutes(request)
    at = now - offset_days * DAY
    first, last = at - WARMUP_MINUTES, at + horizon
    if first < 0 or last > trace.minutes:
        raise EstimateError(f"the history holds no replay {offset_days} day(s) back")
    window = Trace(trace.requests[first:last], trace.input_tokens[first:last], trace.output_tokens[first:last],
                   trace.name)
    spec = ServiceSpec(policy, baseline, 1.0)
    work = min(request.hours, MAX_HOURS)
    # Running jobs first: they hold replicas now, so in the replay they are admitted before anything parked.
    ordered = sorted(ahead, key=lambda j: (not j.running,))
    jobs = [_TrackedJob(JobSpec(f"ahead-{i}", policy.name, min(j.replicas, baseline), work, request.checkpoint_minutes,
                                j.priority + (10**6 if j.running else 0), 0))
            for i, j in enumerate(ordered)]
    mine = _TrackedJob(JobSpec(REQUEST, policy.name, request.replicas, work, request.checkpoint_minutes,
                               request.priority, WARMUP_MINUTES))
    sim = ServiceSim(spec, fleet, service_rates(window, spec), [*jobs, mine])
    sim.run(GateController(sim))
    started = mine.first_started_at
    lost = mine.lost_minutes / 60.0 * request.replicas * policy.gpus_per_replica
    return Outcome(offset_days, math.inf if started is None else started - WARMUP_MINUTES, mine.preemptions, lost)


def estimate(trace: Trace, now: int, policy: ServicePolicy, baseline: int, fleet: Fleet, request: JobRequest,
             ahead: list[JobAhead] | None = None, days: int = MAX_DAYS, gaps: Sequence[Missing] = ()) -> Estimate:
    """Estimate the request's start and preemptions from the service's history before minute `now` of `trace`.

    `trace` is the service's own load per minute (its requests and tokens), `baseline` its replicas
    when nothing is lent; EstimateError when the history holds no whole replay. `gaps`: what the history's reader
    could not read exactly; with fewer whole replays than `days`, the estimate says how many it made.
    """
    ahead = list(ahead or [])
    _check(request, baseline, ahead)
    horizon = horizon_minutes(request)
    need = math.ceil(horizon / DAY)  # the first day back whose replay ends before now
    offsets = [k for k in range(need, need + max(1, min(days, MAX_DAYS)))
               if now - k * DAY - WARMUP_MINUTES >= 0 and now - k * DAY + horizon <= min(now, trace.minutes)]
    if not offsets:
        have = max(0, min(now, trace.minutes)) / 60.0
        raise EstimateError(f"the history holds {have:.1f} h before now: an estimate needs "
                            f"{(need * DAY + WARMUP_MINUTES) / 60.0:.0f} h (a whole replay of {horizon / 60.0:.0f} h "
                            "on an earlier day)")
    outcomes = tuple(replay_day(trace, now, k, policy, baseline, fleet, request, ahead) for k in offsets)
    starts = [o.start_minutes for o in outcomes]
    wanted = max(1, min(days, MAX_DAYS))
    short = () if len(offsets) >= wanted else (Missing(
        f"{len(offsets)} of the {wanted} days an estimate replays: the history holds "
        f"{max(0, min(now, trace.minutes)) / 60.0:.1f} h before now", lower_bound=False),)
    return Estimate(days=len(outcomes), horizon_minutes=horizon, start_median_minutes=percentile(starts, 0.5),
                    start_p90_minutes=percentile(starts, 0.9),
                    preemption_chance=sum(o.preemptions > 0 for o in outcomes) / len(outcomes),
                    lost_gpu_hours=float(np.mean([o.lost_gpu_hours for o in outcomes])), outcomes=outcomes,
                    missing=(*short, *gaps))


class HistoryEstimator:
    """Estimates for the console: each service's history (from `load`) replayed with the gate configuration's policy.

    `load(service)` returns the service's per-minute load and the index of "now" in it; its answer is
    kept `keep_seconds` (a history of days changes little in minutes, and reading it is the cost). A
    failed read is kept `retry_seconds`: while Prometheus hangs, one page waits its timeout, not every one.
    """

    def __init__(self, config: GateConfig, load: Callable[[str], Loaded], source: str,
                 keep_seconds: float = 600.0, clock: Callable[[], float] = time.monotonic,
                 retry_seconds: float = 60.0, speed: float = 1.0) -> None:
        self.config, self.load, self.source, self.speed = config, load, source, speed
        self.keep_seconds, self.clock, self.retry_seconds = keep_seconds, clock, retry_seconds
        self._kept: dict[str, tuple[float, Loaded]] = {}
        self._failed: dict[str, tuple[float, EstimateError]] = {}
        self._lock = threading.Lock()
        # `speed`: history minutes per wall minute (a sandbox replays its trace faster than the clock, and its gate
        # configuration's durations are wall seconds): the replay runs in the history's time, the answer is in wall time.
        self.fleet = Fleet(services=(), tick_minutes=max(1, round(config.tick_seconds * speed / 60.0)),
                           reclaim_check_seconds=float(config.reclaim_check_seconds) * speed)

    def history(self, service: str) -> Loaded:
        """Return the service's history (kept for a while): its trace, "now" in it, and what it could not read."""
        now = self.clock()
        with self._lock:
            hit = self._kept.get(service)
            if hit is not None and now - hit[0] < self.keep_seconds:
                return hit[1]
            failed = self._failed.get(service)
            if failed is not None and now - failed[0] < self.retry_seconds:
                raise EstimateError(str(failed[1]))
        try:
            answer = self.load(service)
        except Exception as err:  # noqa: BLE001 - an unreadable history is no estimate, never a failed page
            why = err if isinstance(err, EstimateError) else EstimateError(
                f"the history of {service} cannot be read: {str(err)[:200]}")
            with self._lock:
                self._failed[service] = (now, why)
            raise why from None
        with self._lock:
            self._kept[service] = (now, answer)
            self._failed.pop(service, None)
        return answer

    def estimate(self, service: str, baseline: int, request: JobRequest, ahead: list[JobAhead]) -> Estimate:
        """Estimate `request` on `service`, or EstimateError naming why none can be made."""
        try:
            policy = self.config.service(service)
        except KeyError:
            raise EstimateError(f"{service} is not a service of the gate configuration") from None
        trace, now, *gaps = self.history(service)  # a loader may say what it could not read exactly
        if self.speed == 1.0:
            return estimate(trace, now, policy, baseline, self.fleet, request, ahead, gaps=tuple(gaps[0]) if gaps else ())
        return in_wall_time(estimate(trace, now, in_history_time(policy, self.speed), baseline, self.fleet,
                                     dataclasses.replace(request, hours=request.hours * self.speed,  # a replay's
                                                         # checkpoints a history day apart at most (_check's bound)
                                                         checkpoint_minutes=min(DAY, request.checkpoint_minutes
                                                                                * self.speed)),
                                     ahead, gaps=tuple(gaps[0]) if gaps else ()), self.speed)


def in_history_time(policy: ServicePolicy, speed: float) -> ServicePolicy:
    """Return `policy` with its durations in history time: a wall second is `speed` seconds of a sped-up history."""
    cold = policy.cold_start_seconds
    return dataclasses.replace(policy, stabilization_seconds=policy.stabilization_seconds * speed,
                               cold_start_seconds=None if cold is None else cold * speed,
                               max_grace_seconds=policy.max_grace_seconds * speed,
                               volatility_lookback_seconds=policy.volatility_lookback_seconds * speed)


def in_wall_time(made: Estimate, speed: float) -> Estimate:
    """Return an estimate replayed in history time with its minutes and GPU-hours in wall time."""
    return dataclasses.replace(
        made, horizon_minutes=max(1, round(made.horizon_minutes / speed)),
        start_median_minutes=made.start_median_minutes / speed, start_p90_minutes=made.start_p90_minutes / speed,
        lost_gpu_hours=made.lost_gpu_hours / speed,
        outcomes=tuple(dataclasses.replace(o, start_minutes=o.start_minutes / speed,
                                           lost_gpu_hours=o.lost_gpu_hours / speed) for o in made.outcomes))


def trace_history(trace: Trace, clock: Callable[[], float] = time.time) -> Callable[[str], tuple[Trace, int]]:
    """Return a loader that replays `trace` as every service's load, "now" at this UTC minute of its last day."""
    def load(service: str) -> tuple[Trace, int]:
        minute_of_day = int(clock() // 60) % DAY
        return trace, max(0, trace.minutes - DAY) + minute_of_day

    return load


def sped_up_history(trace: Trace, scale: float, speed: float, start_minute: int, began: float,
                    clock: Callable[[], float] = time.time) -> Callable[[str], tuple[Trace, int]]:
    """Return a loader of the load a sandbox's emulated servers serve: `trace` times `scale`, `speed` times faster.

    The sandbox began replaying at `start_minute` at unix time `began`; "now" is the minute it serves now.
    The recent days replayed are the trace's own at the sandbox's time of day (it replays the trace on and on).
    """
    scaled = Trace(trace.requests * scale, trace.input_tokens * scale, trace.output_tokens * scale, trace.name)

    def load(service: str) -> tuple[Trace, int]:
        minute = int(start_minute + max(0.0, clock() - began) * speed / 60.0) % trace.minutes
        # "now" at the sandbox's time of day on the trace's last day: the trace's days before it are the recent days.
        return scaled, max(0, trace.minutes - DAY) + minute % DAY

    return load


def prometheus_history(config: GateConfig, url: str, days: int = MAX_DAYS,
                       clock: Callable[[], float] = time.time) -> Callable[[str], Loaded]:
    """Return a loader of a service's last `days` days of vLLM counters from Prometheus, per minute, "now" at the end.

    Only the history after its last stretch of more than MAX_BRIDGED_MINUTES without a sample of any
    of its pods is returned (none before a service's first sample, none across an outage, where the
    history spreads or draws what it does not know): an estimate replays days that happened.
    """
    from offhours.scripts.history.read import read_history
    from offhours.scripts.simulate.history import traces_from_history

    def load(service: str) -> Loaded:
        end = math.floor(clock() / 60.0) * 60.0
        steps = days * DAY
        history = read_history(url, config.metrics.service_label, [service], end - steps * 60.0, steps, 60.0,
                               config.metrics.extra_selector, timeout=config.metrics.prometheus_timeout_seconds)
        traces = traces_from_history(history)
        if service not in traces:
            raise EstimateError(f"Prometheus at {url} holds no complete vLLM history of {service}")
        known = history.services[service].pods > 0
        first = usable_from(known)
        if first >= steps:
            raise EstimateError(f"Prometheus at {url} has had no vLLM samples of {service} for more than "
                                f"{MAX_BRIDGED_MINUTES} minutes")
        whole = traces[service]
        trace = Trace(whole.requests[first:], whole.input_tokens[first:], whole.output_tokens[first:], whole.name)
        return trace, trace.minutes, history_gaps(known[first:], [w.kind for w in history.warnings
                                                                   if w.service == service])

    return load


def history_gaps(known: Sequence[bool] | np.ndarray, warnings: Sequence[str]) -> tuple[Missing, ...]:
    """Return what of a replayed history was not read but drawn: minutes without a sample, the reader's warnings."""
    gaps = []
    drawn = int(np.size(known) - np.count_nonzero(known))
    if drawn:
        gaps.append(Missing(f"{drawn} minute(s) of its history had no sample of any pod (drawn as straight lines)",
                            lower_bound=False))
    if warnings:
        kinds = ", ".join(f"{warnings.count(k)} {k}" for k in sorted(set(warnings)))
        gaps.append(Missing(f"its history was not read exactly ({kinds})", lower_bound=False))
    return tuple(gaps)

