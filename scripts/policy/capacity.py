"""The capacity model: how many replicas a service needs for its load, with headroom."""

import math
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from offhours.scripts.policy.config import Capacity, ServicePolicy

Rate = TypeVar("Rate", float, np.ndarray)


@dataclass(frozen=True)
class Load:
    """A service's load over the observation window, summed over its ready pods.

    Rates come from counters' increase over the window (positive evidence: a stuck gauge must not look like load); the gauges
    are the current values. `pods_read` of `pods_expected` ready pods answered; `age_seconds`
    is how old the newest data point is.
    """

    request_rate: float
    prompt_token_rate: float
    generation_token_rate: float
    running: float
    waiting: float
    kv_cache_usage: float
    pods_read: int
    pods_expected: int
    age_seconds: float = 0.0

    @property
    def complete(self) -> bool:
        """Whether every ready pod was read."""
        return self.pods_expected > 0 and self.pods_read >= self.pods_expected


def replicas_needed(request_rate: Rate, prompt_token_rate: Rate, generation_token_rate: Rate, cap: Capacity) -> Rate:
    """Return the fractional replicas these rates take at capacity `cap` (floats or numpy arrays alike).

    The gate calls it with one tick's rates; the simulator with a whole trace at once.
    """
    # NumPy's maximum on arrays; on one tick's floats the same rule without a ufunc call per term.
    maximum = np.maximum if isinstance(request_rate, np.ndarray) else _maximum
    need = request_rate * 0.0
    if cap.requests_per_second:
        need = maximum(need, request_rate / cap.requests_per_second)
    if cap.prompt_tokens_per_second:
        need = maximum(need, prompt_token_rate / cap.prompt_tokens_per_second)
    if cap.generation_tokens_per_second:
        need = maximum(need, generation_token_rate / cap.generation_tokens_per_second)
    return need


def _maximum(a: float, b: float) -> float:
    """Return the larger of two floats, NaN if either is NaN (as `np.maximum`)."""
    return a if a > b or a != a else b


def replicas_for_rates(load: Load, policy: ServicePolicy) -> float:
    """Return the fractional replica count the load's rates take at the configured capacity."""
    return float(replicas_needed(load.request_rate, load.prompt_token_rate, load.generation_token_rate, policy.capacity))


def replicas_with_headroom(need: Rate, policy: ServicePolicy) -> Rate:
    """Return whole replicas for a fractional need: headroom on top, rounded up, at least the minimum.

    Works on one need or a numpy array of them (the simulator precomputes every tick at once).
    """
    if isinstance(need, np.ndarray):
        return np.maximum(np.ceil(need * (1.0 + policy.headroom) - 1e-9), policy.min_replicas)
    return max(float(math.ceil(need * (1.0 + policy.headroom) - 1e-9)), float(policy.min_replicas))


def required_replicas(load: Load, policy: ServicePolicy, in_service: int) -> int:
    """Return the replicas the service needs now: capacity model, headroom, minimum, queue guard.

    The queue guard: sustained waiting requests above `max_waiting_per_replica` per replica in
    service mean the replicas are short, whatever the rates say, so one more is required.
    """
    needed = int(replicas_with_headroom(replicas_for_rates(load, policy), policy))
    if in_service > 0 and load.waiting > policy.max_waiting_per_replica * in_service:
        needed = max(needed, in_service + 1)
    return needed
