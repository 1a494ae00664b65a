"""Turn pod readings into a service's `Load`: counter increases over time, gauges summed."""

from collections.abc import Mapping
from dataclasses import dataclass

from offhours.scripts.metrics.vllm import PodMetrics
from offhours.scripts.policy.capacity import Load


@dataclass(frozen=True)
class CounterSample:
    """A pod's three counters at a moment: what the next tick needs to compute rates."""

    at: float
    counters: tuple[float, float, float]


def _increase(now: float, before: float) -> float:
    # A counter that went down was reset (the pod restarted): all of `now` is new.
    return now - before if now >= before else now


def load_from_pods(
    readings: Mapping[str, PodMetrics],
    previous: Mapping[str, CounterSample],
    now: float,
    pods_expected: int,
) -> tuple[Load | None, dict[str, CounterSample]]:
    """Compute a service's load from this tick's pod readings and the last tick's counters.

    A pod without an earlier sample gives gauges but no rates, so it does not count as read:
    its rate is unknown, and unknown is never taken for zero.
    """
    samples = {pod: CounterSample(now, m.counters) for pod, m in readings.items()}
    rates = [0.0, 0.0, 0.0]
    with_rates = 0
    for pod, reading in readings.items():
        before = previous.get(pod)
        if before is None or now <= before.at:
            continue
        dt = now - before.at
        for i, (cur, old) in enumerate(zip(reading.counters, before.counters)):
            rates[i] += _increase(cur, old) / dt
        with_rates += 1
    if not readings:
        return None, samples
    load = Load(
        request_rate=rates[0],
        prompt_token_rate=rates[1],
        generation_token_rate=rates[2],
        running=sum(m.running for m in readings.values()),
        waiting=sum(m.waiting for m in readings.values()),
        kv_cache_usage=max(m.kv_cache_usage for m in readings.values()),
        pods_read=with_rates,
        pods_expected=pods_expected,
    )
    return load, samples
