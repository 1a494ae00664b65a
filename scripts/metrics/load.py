"""Turn pod readings into a service's `Load`: counter rates per series (Prometheus semantics), then sums.

A series is one engine of one pod (vLLM V1 exposes one series per data-parallel engine). Its rate
is computed against its own earlier sample, so a reset (the engine restarted, its counter went
down) affects that series alone; the service's rates are the sum of the series' rates.
"""

import math
from collections.abc import Collection, Mapping

from offhours.scripts.metrics.vllm import PodMetrics
from offhours.scripts.policy.capacity import Load
from offhours.scripts.policy.samples import Counters, CounterSample

# No fleet serves or queues a trillion requests or tokens per second; a value beyond this is a broken
# exporter, and headroom multiplied into it could overflow to infinity downstream.
MAX_PLAUSIBLE = 1e12


def series_id(pod: str, engine: str | None) -> str:
    """Name a counter series: `pod/engine`, or `pod` on a server without an engine label."""
    return pod if engine is None else f"{pod}/{engine}"


def pod_of(series: str) -> str:
    """Return the pod a series id belongs to (pod names never contain '/')."""
    return series.split("/", 1)[0]


def increase(current: float, previous: float) -> float:
    """How much a counter grew since `previous`: a drop means a reset, so all of `current` is new."""
    return current - previous if current >= previous else current


def _usable(sample: CounterSample) -> bool:
    return math.isfinite(sample.at) and all(math.isfinite(c) and c >= 0 for c in sample.counters)


def series_rate(current: CounterSample, previous: CounterSample | None, max_age: float) -> Counters | None:
    """Return the series' three rates since `previous`, or None when there is no usable earlier sample.

    None when: no earlier sample; a corrupt one; a clock that did not advance (no division by
    zero, no rate from the future); an earlier sample older than `max_age` seconds.
    """
    if previous is None or not _usable(previous):
        return None
    dt = current.at - previous.at
    if not 0 < dt <= max_age:
        return None
    r, p, g = (increase(c, b) / dt for c, b in zip(current.counters, previous.counters))
    return (r, p, g)


def load_from_pods(
    readings: Mapping[str, PodMetrics],
    previous: Mapping[str, CounterSample],
    now: float,
    pods_expected: int,
    max_sample_age: float = 300.0,
) -> tuple[Load | None, dict[str, CounterSample]]:
    """Compute a service's load from this tick's pod readings and the earlier counter samples.

    Returns the load (None if no pod was read) and this tick's samples, one per series. A pod
    counts as read only if every one of its series has a rate: a series without a usable earlier
    sample has an unknown rate, and unknown is never taken for zero.
    """
    samples: dict[str, CounterSample] = {}
    rates = [0.0, 0.0, 0.0]
    with_rates = 0
    for pod, reading in readings.items():
        pod_rates = []
        for engine, counters in reading.engine_counters.items():
            sid = series_id(pod, engine)
            samples[sid] = CounterSample(now, counters)
            pod_rates.append(series_rate(samples[sid], previous.get(sid), max_sample_age))
        if not pod_rates or any(r is None for r in pod_rates):
            continue
        for r in pod_rates:
            assert r is not None
            for i in range(3):
                rates[i] += r[i]
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


def carried_samples(previous: Mapping[str, CounterSample], unread_pods: Collection[str], now: float,
                    max_sample_age: float) -> dict[str, CounterSample]:
    """Return the earlier samples to keep for pods not read this tick, so their next good scrape has a rate.

    Only pods still expected are kept, and only samples young enough to give a rate later.
    """
    return {sid: s for sid, s in previous.items()
            if pod_of(sid) in unread_pods and _usable(s) and now - s.at < max_sample_age}


def implausible(load: Load) -> str | None:
    """Name what makes a load unusable (not finite, negative, absurdly large), or return None."""
    values = {"request_rate": load.request_rate, "prompt_token_rate": load.prompt_token_rate,
              "generation_token_rate": load.generation_token_rate, "running": load.running,
              "waiting": load.waiting, "kv_cache_usage": load.kv_cache_usage}
    for name, value in values.items():
        if not math.isfinite(value):
            return f"{name} is {value}"
        if value < 0:
            return f"{name} is negative ({value})"
        if value > MAX_PLAUSIBLE:
            return f"{name} is {value:g}, beyond any real fleet ({MAX_PLAUSIBLE:g})"
    if load.kv_cache_usage > 1:
        return f"kv_cache_usage is {load.kv_cache_usage}, above 1 (100 %)"
    if math.isnan(load.age_seconds):
        return "the data's age is NaN"
    return None
