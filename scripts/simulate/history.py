"""Per-minute traces from a Prometheus history (scripts/history): what `simulate --prometheus` replays."""

import numpy as np

from offhours.scripts.history.read import History
from offhours.scripts.policy.config import GateConfig
from offhours.scripts.simulate.fleet import Fleet, ServiceSpec
from offhours.scripts.simulate.trace import Trace


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
    """Return the most pods the service had samples from in any minute: what it runs with when nothing is lent."""
    pods = history.services[name].pods
    return int(pods.max()) if pods.size else 0


def fleet_from_history(config: GateConfig, history: History, baselines: dict[str, int] | None = None,
                       cold_start_minutes: float = 4.0) -> tuple[Fleet, dict[str, Trace], list[str]]:
    """Return the gate config's services as a simulated fleet, each on its own history; and what was left out, why.

    A service's replicas are `baselines[name]` if given, else the most pods seen in one minute; its
    GPUs per replica, capacity and policy are the gate config's. The gate's tick is rounded to
    whole minutes (the simulator's step), at least one; its reclaim check period is the config's.
    """
    traces = traces_from_history(history)
    specs, kept, notes = [], {}, []
    for policy in config.services:
        if policy.name not in history.services:
            continue
        if policy.name not in traces:
            notes.append(f"{policy.name}: left out (its history lacks a counter)")
            continue
        replicas = (baselines or {}).get(policy.name) or baseline_replicas(history, policy.name)
        if replicas < 1:
            notes.append(f"{policy.name}: left out (no pod had samples in the range)")
            continue
        specs.append(ServiceSpec(policy, replicas, 1.0))
        kept[policy.name] = traces[policy.name]
    tick = max(1, round(config.tick_seconds / 60.0))
    fleet = Fleet(services=tuple(specs), tick_minutes=tick, cold_start_minutes=cold_start_minutes,
                  reclaim_check_seconds=float(config.reclaim_check_seconds))
    return fleet, kept, notes
