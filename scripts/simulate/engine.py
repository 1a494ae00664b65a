"""The simulator's engine: one service at a time, tick by tick, skipping the ticks where nothing can change.

At every tick the controller decides how many replicas may be lent. The gate controller runs the
gate's own `decide` and `plan` (never a copy). To replay 14 days of a large fleet in seconds, the
required replicas of every tick are computed at once with the gate's capacity model, and `decide`
is called only at ticks where its answer can differ from "hold": where the load needs replicas
back, where lending more became possible, where a queue builds, or where a job or a replica
changes state. At every other tick the gate would hold, so skipping it changes nothing.

The gate's memory is carried as the gate carries it: each call to `decide` gets the state the
previous call returned. Skipped ticks are not skipped for the memory: before each decision the
ticks since the last one are replayed through `decide` (at most the stabilisation window's worth,
which is all the memory holds), so the state is the one an every-tick loop would have.
`tests/integration/test_simulate.py` compares the engine with such a loop on every service of the default fleet.

Fleet mechanics: a scale-down takes capacity away at once; a scale-up serves after the service's
vLLM cold start, plus, when the GPUs come from stopped jobs, the longest grace among them (each
job's declared checkpoint time, capped by the service's `maxGraceSeconds`). A reclaim is acted on
when the gate's reclaim check sees the rise (`reclaimCheckSeconds` after it), not at the next tick:
the tick that decides it reads the load of the minutes before it, which the checks read as it came,
so its stops and scale-up happen a check period after the first minute of that window whose own load
needs the replicas back (`ServiceSim.seen_at`), never before the rise. A stopped job loses the
work since its last checkpoint and is parked again; a finished job's exit hook gives its replicas
back at once. A service with a lending window (its schedule) lends only inside it, as the gate does:
outside it `decide` reclaims everything and starts its stabilisation window again.
"""

import bisect
import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from datetime import time as clock
from typing import Protocol

import numpy as np

from offhours.scripts.policy.capacity import Load, replicas_needed, replicas_with_headroom
from offhours.scripts.policy.decide import Decision, ServiceState
from offhours.scripts.policy.forecast import forecast_series, return_seconds
from offhours.scripts.policy.plan import ADMITTED, PARKED, Job, plan
from offhours.scripts.policy.serving import Rules, ServingInput, serving_decision
from offhours.scripts.policy.window import Opening, opening, seconds_left, seconds_left_at_clock
from offhours.scripts.simulate.fleet import Fleet, JobSpec, ServiceSpec
from offhours.scripts.simulate.trace import Trace

QUEUE_VIEW = 24  # parked jobs the planner sees per tick: the head of the queue by priority and age


@dataclass(eq=False)
class SimJob:
    """A research job's progress in the simulation (minutes of work at its size).

    Compared by identity: a job is itself whatever its progress (and list removals stay O(1) a compare).
    """

    spec: JobSpec
    progress: float = 0.0
    started_at: float | None = None
    preemptions: int = 0
    lost_minutes: float = 0.0
    gpu_minutes_used: float = 0.0
    done_at: float | None = None
    parked_view: Job | None = None  # how the planner sees it while parked (built once: it never changes)
    admitted_view: Job | None = None  # how the planner last saw it running (reused while it still holds)
    finish_at: float = math.inf  # the minute it completes if left alone, set when it starts
    view_until: float = -math.inf  # admitted_view is what the planner sees at whole minutes before this one
    whole_minutes: bool = False  # started at a whole minute, with whole minutes of progress and interval

    @property
    def work_minutes(self) -> float:
        """Total work in minutes."""
        return self.spec.work_hours * 60.0

    def progress_at(self, t: float) -> float:
        """Progress at minute `t` (running jobs progress one minute per minute)."""
        return self.progress + (t - self.started_at if self.started_at is not None else 0.0)

    def start(self, t: float) -> None:
        """Start (or resume) the job's clock at minute `t`; its progress stays fixed while it runs."""
        self.started_at = t
        self.finish_at = t + self.work_minutes - self.progress
        self.view_until = -math.inf
        # Start, progress and checkpoint interval in whole minutes (below ten million): the
        # planner's view of it can be computed exactly (see ServiceSim.running_view).
        self.whole_minutes = all(float(x).is_integer() and abs(x) < 1e7
                                 for x in (t, self.progress, self.spec.checkpoint_minutes))

    def pause(self, t: float, gpus_per_replica: int) -> float:
        """Stop the job's clock at minute `t`: count the GPU-minutes it held; return the progress it reached."""
        reached = self.progress_at(t)
        if self.started_at is not None:
            self.gpu_minutes_used += (t - self.started_at) * self.spec.replicas * gpus_per_replica
        self.started_at = None
        return reached

    def saved(self, progress: float) -> float:
        """Progress kept by the last complete checkpoint."""
        step = self.spec.checkpoint_minutes
        return math.floor(progress / step + 1e-9) * step


def cold_start_minutes(spec: ServiceSpec, fleet: Fleet) -> float:
    """Return the service's cold start in minutes: its own `coldStartSeconds`, else the fleet's."""
    seconds = spec.policy.cold_start_seconds
    return seconds / 60.0 if seconds is not None else fleet.cold_start_minutes


def grace_minutes(job: JobSpec | None, spec: ServiceSpec, fleet: Fleet) -> float:
    """Minutes a stopped job keeps its GPUs: its declared checkpoint time (else the fleet's grace), capped."""
    declared = job.checkpoint_seconds if job is not None else None
    grace = declared / 60.0 if declared is not None else fleet.grace_minutes
    return min(grace, spec.policy.max_grace_seconds / 60.0)


def detect_minutes(fleet: Fleet) -> float:
    """Minutes from a rise to the gate acting on it: a reclaim check's period, or a tick without checks."""
    check = fleet.reclaim_check_seconds / 60.0
    return check if 0 < check < fleet.tick_minutes else float(fleet.tick_minutes)


def reaction_minutes(spec: ServiceSpec, fleet: Fleet) -> float:
    """From a rise to reclaimed replicas serving: a check to see it, a job's grace, the cold start."""
    return detect_minutes(fleet) + grace_minutes(None, spec, fleet) + cold_start_minutes(spec, fleet)


def return_minutes(spec: ServiceSpec, fleet: Fleet) -> float:
    """Return the gate's return bound for the service (`forecast.return_seconds`) in minutes: grace cap, cold start.

    The gate's own bound, with the fleet's cold start where the service names none (the gate measures it): the
    simulator replays when the gate starts a window's return, and every stop it simulates exits within the cap.
    """
    policy = dataclasses.replace(spec.policy, cold_start_seconds=cold_start_minutes(spec, fleet) * 60.0)
    return return_seconds(policy) / 60.0


def window_openings(spec: ServiceSpec, fleet: Fleet, minutes: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Return what the service's lending window allows at each of `minutes`: (keep, lend) masks; None: no window.

    The gate's own `window.opening`, with the fleet's return bound and a tick between decisions: the
    return for the window's end begins early enough that serving is whole at the end.
    """
    schedule = spec.policy.schedule
    if schedule.mode == "continuous":
        return None
    bound, interval = return_minutes(spec, fleet) * 60.0, fleet.tick_minutes * 60.0
    if fleet.start_time is None:  # a trace's minute 0 is a local midnight
        left = [seconds_left_at_clock(schedule, clock(m // 60 % 24, m % 60)) for m in minutes.tolist()]
    else:
        start = fleet.start_time
        left = [seconds_left(schedule, datetime.fromtimestamp(start + 60.0 * m, timezone.utc)) for m in minutes.tolist()]
    opened = [opening(x, bound, interval) for x in left]
    return (np.array([o.keep for o in opened], dtype=np.bool_), np.array([o.lend for o in opened], dtype=np.bool_))


def lending_minutes(spec: ServiceSpec, fleet: Fleet, minutes: np.ndarray) -> np.ndarray | None:
    """Whether the service's schedule lets the gate keep replicas lent at each of `minutes` (None: at every minute)."""
    openings = window_openings(spec, fleet, minutes)
    return None if openings is None else openings[0]


def _with_checkpoint(view: Job, checkpoint_at: float) -> Job:
    """Return a copy of `view` whose last checkpoint is at `checkpoint_at`, every other field the same.

    Equal to `dataclasses.replace(view, progress_at=checkpoint_at)`, without running the frozen
    dataclass's generated `__init__`, which sets its 21 fields one by one (7 us a view; on a large
    fleet most decisions find a running job past a new checkpoint).
    """
    copy = object.__new__(Job)
    object.__setattr__(copy, "__dict__", {**view.__dict__, "progress_at": checkpoint_at})
    return copy


def _queue_order(job: SimJob) -> tuple[int, int]:
    return (-job.spec.priority, job.spec.submit_minute)


def service_rates(trace: Trace, spec: ServiceSpec) -> np.ndarray:
    """Return the service's share of the trace as per-second rates, shape (3, minutes)."""
    return np.stack([np.roll(a, spec.shift_minutes) * spec.share / 60.0
                     for a in (trace.requests, trace.input_tokens, trace.output_tokens)])


def service_demand(rates: np.ndarray, spec: ServiceSpec) -> np.ndarray:
    """Return the demand in fractional replicas per minute, via the gate's capacity model."""
    return np.asarray(replicas_needed(rates[0], rates[1], rates[2], spec.policy.capacity), dtype=np.float64)


class Controller(Protocol):
    """Decides the replicas lent at each tick; `lo`/`hi` say where its answer can change.

    At tick i the answer can only differ from "hold" if lo[i] < lent (a reclaim) or
    hi[i] > lent (a lend).
    """

    lo: np.ndarray
    hi: np.ndarray

    def target(self, sim: "ServiceSim", i: int) -> tuple[int, int]:
        """Return (replicas lent after tick i, the most that may be lent)."""
        ...

    def catch_up(self, sim: "ServiceSim", i: int) -> None:
        """Bring the controller's memory up to tick i (exclusive) through the ticks the engine skipped."""
        ...


@dataclass
class ServiceSim:
    """One service's replay: its load, its fleet state, its jobs and the record of changes."""

    spec: ServiceSpec
    fleet: Fleet
    rates: np.ndarray
    jobs: list[SimJob]
    demand: np.ndarray = field(init=False)
    ticks: np.ndarray = field(init=False)
    window_rates: np.ndarray = field(init=False)
    ready: int = 0
    pending: list[tuple[float, int]] = field(default_factory=list)
    running: list[SimJob] = field(default_factory=list)
    queue: list[SimJob] = field(default_factory=list)
    capacity_events: list[tuple[float, int]] = field(default_factory=list)
    lent_events: list[tuple[float, int]] = field(default_factory=list)
    lent: int = 0  # replicas held by running jobs
    preempted_at: list[float] = field(default_factory=list)  # the minute of each stop of a running job

    def __post_init__(self) -> None:
        self.demand = service_demand(self.rates, self.spec)
        policy = self.spec.policy
        self.cold_start_minutes = cold_start_minutes(self.spec, self.fleet)
        self.reaction_minutes = reaction_minutes(self.spec, self.fleet)
        self.detect_minutes = detect_minutes(self.fleet)
        self.reclaim_early = self.fleet.tick_minutes - self.detect_minutes  # a reclaim acts up to this much sooner
        self._minute_required: np.ndarray | None = None  # per minute, built at the first reclaim that reads it
        tick = self.fleet.tick_minutes
        minutes = self.rates.shape[1]
        self.ticks = np.arange(tick, minutes, tick)
        # Mean rate over the `tick` minutes before each tick: what rate() over the gate's window reads.
        csum = np.concatenate((np.zeros((3, 1)), np.cumsum(self.rates, axis=1)), axis=1)
        self.window_rates = (csum[:, self.ticks] - csum[:, self.ticks - tick]) / tick
        # The fractional replicas those rates need (before headroom): what the look-ahead terms read.
        self.needs = np.asarray(replicas_needed(self.window_rates[0], self.window_rates[1], self.window_rates[2],
                                                policy.capacity), dtype=np.float64)
        # Per tick as Python numbers: `load_at` reads one tick at a time.
        self._rates_at = self.window_rates.T.tolist()
        self._demand_before = self.demand[self.ticks - 1].tolist()
        self.ready = self.spec.baseline
        self.incoming = sorted(self.jobs, key=lambda j: (j.spec.submit_minute, -j.spec.priority))
        for job in self.jobs:  # the planner's views of it are built by this service as they are needed
            job.parked_view, job.admitted_view, job.view_until = None, None, -math.inf
        # Job names are unique within a service (the planner tells jobs apart by name).
        self.by_name = {job.spec.name: job for job in self.jobs}
        self._grace = {job.spec.name: grace_minutes(job.spec, self.spec, self.fleet) for job in self.jobs}

    def grace_minutes(self, job: SimJob) -> float:
        """Minutes a stopped job holds its GPUs: its checkpoint time (else the fleet's grace), capped."""
        return self._grace[job.spec.name]

    def parked_view(self, job: SimJob) -> Job:
        """How the planner sees a parked job (built when it first reaches the head of the queue; it never changes)."""
        spec = job.spec
        job.parked_view = Job(spec.name, self.spec.name, spec.replicas, PARKED, spec.priority, spec.submit_minute)
        return job.parked_view

    def running_view(self, job: SimJob, t: float) -> Job:
        """How the planner sees a running job at minute `t`: admitted, with its last checkpoint's minute.

        The view changes only when the job passes a checkpoint, so the one built last is reused
        while the minute it would be built with is the same (its other fields never change here).
        """
        if t < job.view_until and t.is_integer():
            assert job.admitted_view is not None
            return job.admitted_view
        progress = job.progress_at(t)
        saved = job.saved(progress)
        checkpoint_at = t - (progress - saved)
        view = job.admitted_view
        if view is None:
            spec = job.spec
            view = Job(spec.name, self.spec.name, spec.replicas, ADMITTED, spec.priority, spec.submit_minute,
                       progress_at=checkpoint_at, exit_seconds=self.grace_minutes(job) * 60.0)
        elif view.progress_at != checkpoint_at:
            view = _with_checkpoint(view, checkpoint_at)
        job.admitted_view = view
        # In whole minutes (start, progress, checkpoint interval, tick; all below ten million) the
        # arithmetic above is exact, so the same minute comes out at every whole minute before the
        # next checkpoint is reached.
        whole = job.whole_minutes and t.is_integer() and abs(t) < 1e7
        job.view_until = t + (saved + job.spec.checkpoint_minutes - progress) if whole else -math.inf
        return view

    def load_at(self, i: int) -> Load:
        """Return the load the gate reads at tick i: the window's rates, and the queue when capacity is short."""
        rps, prompt, gen = self._rates_at[i]
        cap = self.spec.policy.capacity
        # Requests beyond the capacity in service queue up: what vllm:num_requests_waiting shows.
        waiting = max(0.0, self._demand_before[i] - self.ready) * (cap.requests_per_second or 1.0) * 60.0
        pods = max(self.ready, 1)
        return Load(rps, prompt, gen, running=rps, waiting=waiting, kv_cache_usage=0.0, pods_read=pods,
                    pods_expected=pods)

    def _park(self, job: SimJob, front: bool = False) -> None:
        if front:
            self.queue.insert(0, job)
        else:
            bisect.insort(self.queue, job, key=_queue_order)

    # -- events between ticks ---------------------------------------------------------------
    def next_event(self) -> float:
        """Return the next minute something changes by itself: a replica ready, a job done or submitted."""
        times = [at for at, _ in self.pending] + [j.finish_at for j in self.running]
        if self.incoming:
            times.append(float(self.incoming[0].spec.submit_minute))
        return min(times) if times else math.inf

    def process_events(self, t: float) -> bool:
        """Apply what happened up to minute `t`; return whether the job queue or the lent replicas changed."""
        changed = False
        for job in [j for j in self.running if j.finish_at <= t]:
            done = job.finish_at
            job.pause(done, self.spec.policy.gpus_per_replica)
            job.progress, job.done_at = job.work_minutes, done
            self.running.remove(job)
            self.lent -= job.spec.replicas
            self.lent_events.append((done, -job.spec.replicas))
            # The exit hook gives the replicas back at once; they serve after a cold start.
            self.pending.append((done + self.cold_start_minutes, job.spec.replicas))
            changed = True
        for at, count in sorted(p for p in self.pending if p[0] <= t):
            self.ready += count
            self.capacity_events.append((at, count))
            self.pending.remove((at, count))
        while self.incoming and self.incoming[0].spec.submit_minute <= t:
            self._park(self.incoming.pop(0))
            changed = True
        return changed

    # -- one decision ---------------------------------------------------------------------------
    def apply(self, t: float, target: int, ceiling: int) -> bool:
        """Carry out the plan for `target`; return False if a lend found no job to admit."""
        lent, service = self.lent, self.spec.name
        jobs = [self.running_view(j, t) for j in self.running]
        jobs += [j.parked_view or self.parked_view(j) for j in self.queue[:QUEUE_VIEW]]
        decision = Decision(service, "lend" if target > lent else "reclaim", target, lent, None, "",
                            ServiceState(), ceiling=ceiling)
        p = plan(decision, self.spec.baseline, jobs, t, explain=False)
        by_name = self.by_name
        gpus = self.spec.policy.gpus_per_replica
        grace = 0.0
        act = self.seen_at(t, lent) if target < lent else t  # a reclaim check saw it before this tick
        for job in p.stop:
            sim = by_name[job.name]
            grace = max(grace, self.grace_minutes(sim))
            progress = sim.pause(act, gpus)
            sim.lost_minutes += progress - sim.saved(progress)
            sim.progress = sim.saved(progress)
            sim.preemptions += 1
            self.preempted_at.append(act)
            self.running.remove(sim)
            self.lent -= sim.spec.replicas
            self._park(sim)  # parked again; it resumes from its checkpoint
            self.lent_events.append((act, -job.replicas))
        for job in p.admit:
            sim = by_name[job.name]
            self.queue.remove(sim)
            sim.start(t)
            self.running.append(sim)
            self.lent += sim.spec.replicas
            self.lent_events.append((t, job.replicas))
        self._scale(act, p.scale_to, grace)
        return not (target > lent and not p.admit)

    def seen_at(self, t: float, lent: int) -> float:
        """Return the minute a reclaim the tick at `t` decides is acted on: the first check after the rise.

        The checks read the load as it comes, so the first minute of the tick's window whose own load needs
        replicas back (more than the `lent` leave in service) is seen a check period later; never before the
        rise itself. A reclaim no single minute asks for (a queue, the look-ahead) counts from the window's start.
        """
        if self.reclaim_early <= 0:
            return t
        tick = self.fleet.tick_minutes
        start = max(0, int(t) - tick)
        first = start
        if tick > 1:
            if self._minute_required is None:
                self._minute_required = np.asarray(replicas_with_headroom(self.demand, self.spec.policy))
            over = np.flatnonzero(self._minute_required[start:int(t)] > self.spec.baseline - lent)
            first = start + int(over[0]) if over.size else start
        return min(t, first + self.detect_minutes)

    def _scale(self, t: float, scale_to: int, grace: float) -> None:
        in_service = self.ready + sum(c for _, c in self.pending)
        change = scale_to - in_service
        if change < 0:  # capacity leaves at once; replicas still starting go first
            take = -change
            for at, count in sorted(self.pending, reverse=True):
                if take == 0:
                    break
                used = min(count, take)
                self.pending.remove((at, count))
                if count > used:
                    self.pending.append((at, count - used))
                take -= used
            if take:
                self.ready -= take
                self.capacity_events.append((t, -take))
        elif change > 0:
            delay = self.cold_start_minutes + grace
            self.pending.append((t + delay, change))

    def run(self, controller: Controller) -> None:
        """Replay every tick, deciding only where the decision can change."""
        ticks, tick = self.ticks, self.fleet.tick_minutes
        n = len(ticks)
        short = self.demand[ticks - 1]
        # For a level L, the next tick at or after i where the controller may reclaim (lo < L), may
        # lend (hi > L), or requests queue (demand > L ready replicas): built once per level seen.
        reclaims = _LevelTables(lambda level: controller.lo < level)
        lends = _LevelTables(lambda level: controller.hi > level)
        queues = _LevelTables(lambda level: short > level)

        # After a lend that found no job to admit, lending is worth another look only once more can
        # be lent than then, or the queue changes.
        i, blocked_at = 0, -1

        def next_decision(at: int) -> int:
            """Return the next tick at or after `at` where the gate may do anything but hold, in the current state."""
            reclaim, lend, queue = reclaims[self.lent], lends[max(self.lent, blocked_at)], queues[self.ready]
            return min(reclaim.at(at), lend.at(at), queue.at(at))

        while i < n:
            decision_at = j = next_decision(i)
            event = self.next_event()
            if event < math.inf:
                j = min(j, max(i, math.ceil(event / tick) - 1))
            if j >= n:
                break
            t = float(ticks[j])
            levels = (self.lent, self.ready, blocked_at)
            controller.catch_up(self, j)
            if event <= t and self.process_events(t):  # before `event` nothing happens by itself
                blocked_at = -1
            # If j is where next_decision led and the levels it read did not change, j is a decision tick.
            if (j != decision_at or levels != (self.lent, self.ready, blocked_at)) and next_decision(j) != j:
                i = j + 1  # the event changed nothing the gate would act on: it holds
                continue
            target, ceiling = controller.target(self, j)
            if target != self.lent:
                before = self.lent
                admitted = self.apply(t, target, ceiling)
                blocked_at = ceiling if not admitted else -1 if self.lent != before else blocked_at
            i = j + 1
        end = float(self.rates.shape[1])
        self.process_events(end)
        for job in self.running:
            job.progress = job.pause(end, self.spec.policy.gpus_per_replica)


class _LevelTables(dict[int, "_NextTrue"]):
    """The `_NextTrue` of `mask_at(level)` for each level, built the first time the level is asked for."""

    def __init__(self, mask_at: Callable[[int], np.ndarray]) -> None:
        super().__init__()
        self.mask_at = mask_at

    def __missing__(self, level: int) -> "_NextTrue":
        table = self[level] = _NextTrue(self.mask_at(level))
        return table


class _NextTrue:
    """For a boolean mask, the first index j >= i where it holds (len(mask) where none does).

    Kept as the mask's bytes and the indices where a run of True starts: if the mask does not hold
    at i, the next index where it does is the start of a run.
    """

    __slots__ = ("flags", "starts", "n")

    def __init__(self, mask: np.ndarray) -> None:
        self.n = mask.shape[0]
        self.flags = mask.astype(np.bool_).tobytes()
        rises = np.flatnonzero(mask[1:] & ~mask[:-1]) + 1
        self.starts = ([0] if self.n and mask[0] else []) + rises.tolist()

    def at(self, i: int) -> int:
        """Return the first index j >= i where the mask holds, len(mask) if none does."""
        if i >= self.n:
            return self.n
        if self.flags[i]:
            return i
        k = bisect.bisect_left(self.starts, i)
        return self.starts[k] if k < len(self.starts) else self.n


# -- controllers ---------------------------------------------------------------------------------
class GateController:
    """The gate's own policy: `decide` from the load the gate would read at each tick, its state carried.

    `lo`/`hi` over-approximate where `decide` may reclaim or lend (the engine calls it there); the
    look-ahead floor of `scripts/policy/forecast.py` enters both, as it enters `decide`.
    """

    def __init__(self, sim: ServiceSim) -> None:
        policy = sim.spec.policy
        self.policy = policy
        self.tick_seconds = sim.fleet.tick_minutes * 60.0
        # The gate's rules as the simulator plays them: every reading fresh, the fail-safe's default count.
        self.rules = Rules(self.tick_seconds, math.inf, 3)
        required = np.asarray(replicas_with_headroom(sim.needs, policy), dtype=np.int64)
        floor = forecast_series(sim.needs, policy, self.tick_seconds, sim.reaction_minutes * 60.0)
        self.floor = None if floor is None else floor.astype(np.int64).tolist()
        if floor is not None:
            required = np.maximum(required, floor.astype(np.int64))
        self.required = required
        ratio = policy.stabilization_seconds / self.tick_seconds
        # The window at tick i holds ticks i-floor(ratio)..i; it is covered from tick ceil(ratio) on.
        span, first = math.floor(ratio + 1e-9), math.ceil(ratio - 1e-9)
        padded = np.concatenate((np.full(span, np.iinfo(np.int64).max), required))
        # The max over each window of span + 1 ticks, as span whole-array passes (a strided reduction
        # over a short axis is several times slower).
        window_max = padded[span:].copy()
        for k in range(1, span + 1):
            np.maximum(window_max, padded[span - k:len(padded) - k], out=window_max)
        baseline = sim.spec.baseline
        n = len(required)
        openings = window_openings(sim.spec, sim.fleet, sim.ticks)
        allowed = None if openings is None else openings[0]
        self.windows = [Opening(True, True)] * n if openings is None else [
            Opening(bool(k), bool(m)) for k, m in zip(openings[0].tolist(), openings[1].tolist())]
        # Outside the lending window `decide` reclaims everything and forgets its window: the last closed
        # tick at or before each tick (-1: none), from which the memory fills again.
        closed = np.zeros(n, dtype=np.int64) - 1 if allowed is None else np.maximum.accumulate(
            np.where(allowed, -1, np.arange(n)))
        self.closed = closed.tolist()
        self.lo = np.maximum(0, baseline - required)  # what `decide` may keep lent (never below 0)
        lendable = baseline - np.minimum(window_max, baseline) - policy.lend_hysteresis
        self.hi = np.where(np.arange(n) >= closed + 1 + first, lendable, -1)
        if openings is not None:  # past the window's last lend nothing more is lent
            self.hi = np.where(openings[1], self.hi, -1)
        if allowed is not None:
            self.lo = np.where(allowed, self.lo, 0)
        self._times = (sim.ticks.astype(np.float64) * 60.0).tolist()
        self._required = required.tolist()
        # The memory holds the window's ticks and the one before it; a margin of two more.
        self.replay = first + 3
        self.state = ServiceState()
        self.done = -1  # the last tick `decide` was called for

    def _decide(self, sim: ServiceSim, i: int) -> Decision:
        given = ServingInput(self.policy, sim.spec.baseline, sim.lent, sim.load_at(i), None, self.state,
                             None if self.floor is None else self.floor[i], self.windows[i])
        d = serving_decision(self.rules, given, self._times[i])
        self.state, self.done = d.state, i
        return d

    def catch_up(self, sim: ServiceSim, i: int) -> None:
        """Add the ticks skipped since the last call to the state `decide` returned.

        At a skipped tick `decide` holds, and no request waits (a waiting queue makes the engine
        call it), so the recommendation it records is the capacity model's, `required[k]`, which
        is what is appended. The state stays a contiguous run of ticks ending at i-1 that reaches
        back past the stabilisation window; `decide` drops what lies before the window itself.
        """
        start = self.done + 1
        if start >= i:
            return
        kept, failed = self.state.recommendations, self.state.failed_ticks
        closed = self.closed[i - 1]
        if closed >= start:  # outside the lending window since: `decide` returned an empty memory there
            start, kept, failed = closed + 1, (), 0
        if i - start > self.replay:
            start, kept = i - self.replay, ()
        skipped = tuple(zip(self._times[start:i], self._required[start:i]))
        self.state = ServiceState((kept + skipped)[-self.replay:], failed)
        self.done = i - 1

    def target(self, sim: ServiceSim, i: int) -> tuple[int, int]:
        """Call `decide` as the gate would at tick i, with the state its previous call returned."""
        self.catch_up(sim, i)
        d = self._decide(sim, i)
        return d.target_lent, max(d.ceiling, d.target_lent)


class FixedWindowController:
    """The original practice: a fixed number of replicas lent every night from start to end hour."""

    def __init__(self, sim: ServiceSim) -> None:
        fleet = sim.fleet
        hours = (sim.ticks // 60) % 24
        start, end = fleet.fixed_window_start_hour, fleet.fixed_window_end_hour
        inside = (hours >= start) | (hours < end) if start > end else (hours >= start) & (hours < end)
        self.desired = np.where(inside, fleet.fixed_window_replicas.get(sim.spec.name, 0), 0)
        self.lo = self.hi = self.desired

    def target(self, sim: ServiceSim, i: int) -> tuple[int, int]:
        """Lend the fixed amount inside the window, nothing outside."""
        return int(self.desired[i]), int(self.desired[i])

    def catch_up(self, sim: ServiceSim, i: int) -> None:
        """Nothing to remember."""


def oracle_lendable(demand: np.ndarray, spec: ServiceSpec, fleet: Fleet, headroom: float | None = None,
                    reaction: float | None = None) -> np.ndarray:
    """Replicas that could be lent each minute knowing the future, at `headroom` (default: the policy's).

    Only inside the service's lending window (its schedule): outside it the gate may lend nothing.

    Enough is kept for the largest demand of the coming reaction time (default: the service's: a
    tick to see the rise, the grace period, the cold start), so the oracle never breaks the SLO.
    """
    reaction = reaction_minutes(spec, fleet) if reaction is None else reaction
    horizon = int(math.ceil(reaction - 1e-9))
    padded = np.concatenate((demand, np.repeat(demand[-1:], horizon)))
    future = np.lib.stride_tricks.sliding_window_view(padded, horizon + 1)[: demand.shape[0]].max(axis=1)
    policy = spec.policy if headroom is None else dataclasses.replace(spec.policy, headroom=headroom)
    lendable = np.maximum(0.0, spec.baseline - replicas_with_headroom(future, policy))
    allowed = lending_minutes(spec, fleet, np.arange(demand.shape[0]))
    return lendable if allowed is None else np.where(allowed, lendable, 0.0)


def events_to_array(events: list[tuple[float, int]], start: int, minutes: int) -> np.ndarray:
    """Turn (minute, change) events into a per-minute level starting at `start`."""
    delta = np.zeros(minutes + 1)
    if events:
        at, change = zip(*events)
        index = np.clip(np.ceil(np.asarray(at, dtype=np.float64) - 1e-9), 0, minutes).astype(np.int64)
        np.add.at(delta, index, np.asarray(change, dtype=np.float64))  # in order, as a loop would add them
    return start + np.cumsum(delta)[:minutes]
