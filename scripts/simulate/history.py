"""Per-minute traces from a Prometheus history (scripts/history): what `simulate --prometheus` replays."""

import math
from datetime import datetime, timezone

import numpy as np

from offhours.scripts.history.read import NO_POD, History
from offhours.scripts.policy.config import GateConfig
from offhours.scripts.policy.estimate import MAX_BRIDGED_MINUTES
from offhours.scripts.simulate.fleet import Fleet, ServiceSpec
from offhours.scripts.simulate.trace import Trace

DAY = 86400.0


def traces_from_history(history: History) -> dict[str, Trace]:
    """Return each complete service's trace: finished requests, prompt and generation tokens per minute."""
    if history.step != 60.0:
        raise ValueError(f"a trace is per minute: the history's step is {history.step:g} s, not 60")
    traces = {}
    for name, svc in history.services.items():
        if svc.complete:
            traces[name] = Trace(np.asarray(svc.work["requests"], dtype=np.float64),
                                 np.asarray(svc.work["prompt_tokens"], dtype=np.float64),
                                 np.asarray(svc.work["generation_tokens"], dtype=np.float64), name)
    return traces


def baseline_replicas(history: History, name: str) -> int:
    """Return the most pods that served throughout one minute: what the service runs with when nothing is lent.

    A pod serves a whole minute when its counters have samples on both sides of it. Counting pods
    with any sample in the minute would count a rollout's old pod (its last scrape) and new pod
    (its first) in the same minute as two, and the replay would run on one replica more.
    """
    covered = list(history.services[name].pod_covered.values())
    return int(np.sum(covered, axis=0).max()) if covered and covered[0].size else 0


def _drawn_ends(history: History, name: str) -> str | None:
    """Say why a service's history starts or ends with more load drawn than a replay may use; None: it does not.

    Before a pod's first sample (a service younger than the range) or after the last (one gone),
    the history holds a flat line drawn from the nearest minute with data: replayed, or tuned on,
    it is load that never happened. A hole up to MAX_BRIDGED_MINUTES is a scrape missed, and stays.
    """
    known = history.services[name].pods > 0
    if not known.any():
        return "no pod had samples in the range"
    first, last = int(np.argmax(known)), int(known.shape[0] - 1 - np.argmax(known[::-1]))
    if first > MAX_BRIDGED_MINUTES * 60.0 / history.step:
        midnight = math.ceil((history.start + first * history.step) / DAY) * DAY
        return (f"no pod sampled in its first {first} steps: that load would be drawn, not read; "
                f"--start {_iso(midnight)} begins after its first sample")
    tail = known.shape[0] - 1 - last
    if tail > MAX_BRIDGED_MINUTES * 60.0 / history.step:
        return (f"no pod sampled in its last {tail} steps: that load would be drawn, not read; "
                f"--end {_iso(history.start + (last + 1) * history.step)} ends at its last sample")
    return None


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def fleet_from_history(config: GateConfig, history: History, baselines: dict[str, int] | None = None,
                       cold_start_minutes: float = 4.0) -> tuple[Fleet, dict[str, Trace], list[str]]:
    """Return the gate config's services as a simulated fleet, each on its own history; and what was left out, why.

    A service whose history starts or ends with a long stretch no pod was sampled in is left out
    (`_drawn_ends`). A service's replicas are `baselines[name]` if given, else the most pods serving throughout one minute; its
    GPUs per replica, capacity and policy are the gate config's, as is its reclaim check. The gate's
    tick is rounded to whole minutes (the simulator's step), at least one.
    """
    traces = traces_from_history(history)
    specs, kept, notes = [], {}, []
    for policy in config.services:
        if policy.name not in history.services:
            continue
        if policy.name not in traces:
            notes.append(f"{policy.name}: left out (its history lacks a counter)")
            continue
        drawn = _drawn_ends(history, policy.name)
        if drawn is not None:
            notes.append(f"{policy.name}: left out ({drawn})")
            continue
        given = (baselines or {}).get(policy.name)
        if not given and NO_POD in history.services[policy.name].pod_covered:
            # Series without an instance or pod label read as one pod, whatever the replicas were.
            notes.append(f"{policy.name}: left out (its series carry neither an instance nor a pod label: its "
                         f"replicas cannot be counted; simulate takes them as --replicas {policy.name}=N)")
            continue
        replicas = given or baseline_replicas(history, policy.name)
        if replicas < 1:
            notes.append(f"{policy.name}: left out (no pod had samples in the range)")
            continue
        specs.append(ServiceSpec(policy, replicas, 1.0))
        kept[policy.name] = traces[policy.name]
    tick = max(1, round(config.tick_seconds / 60.0))
    # The history's start is a moment: each service's lending window is replayed at its own hours.
    # The gate's own reclaim check: a rise is seen as that gate sees it (or at its tick without checks).
    return Fleet(services=tuple(specs), tick_minutes=tick, cold_start_minutes=cold_start_minutes,
                 reclaim_check_seconds=float(config.reclaim_check_seconds), start_time=history.start), kept, notes
