"""Read one vLLM pod's load from its metrics page: V1 engine (vLLM >= 0.12) and older servers.

V1 labels every series with `model_name` and `engine` (one engine per data-parallel rank): the
pod's load is the sum over its engines (KV-cache use: the fullest engine). Counters come as
`_total` with a `_created` twin, which is ignored. Older servers name KV-cache use
`vllm:gpu_cache_usage_perc` and have no `engine` label; when both names are present the new one
wins.
"""

import math
from dataclasses import dataclass

from offhours.scripts.metrics.exposition import Page, parse

REQUESTS = "vllm:request_success_total"
PROMPT_TOKENS = "vllm:prompt_tokens_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
KV_CACHE = "vllm:kv_cache_usage_perc"
KV_CACHE_LEGACY = "vllm:gpu_cache_usage_perc"

COUNTERS = (REQUESTS, PROMPT_TOKENS, GENERATION_TOKENS)
GAUGES = (RUNNING, WAITING)


class MetricsIncomplete(ValueError):
    """A page parsed but lacks a family the gate needs, or carries a value it cannot use."""


@dataclass(frozen=True)
class PodMetrics:
    """One pod's counters (cumulative) and gauges (now), summed over its engines."""

    requests_total: float
    prompt_tokens_total: float
    generation_tokens_total: float
    running: float
    waiting: float
    kv_cache_usage: float
    engines: int

    @property
    def counters(self) -> tuple[float, float, float]:
        """The three counters: finished requests, prompt tokens, generation tokens."""
        return (self.requests_total, self.prompt_tokens_total, self.generation_tokens_total)


def _by_name(page: Page) -> dict[str, list[float]]:
    values: dict[str, list[float]] = {}
    for sample in page.samples:
        values.setdefault(sample.name, []).append(sample.value)
    return values


def _sum(families: dict[str, list[float]], name: str) -> float:
    values = families.get(name, [])
    if not values:
        raise MetricsIncomplete(f"metric family {name} is missing")
    for value in values:
        if math.isnan(value) or math.isinf(value) or value < 0:
            raise MetricsIncomplete(f"{name} has the value {value}, which a load reading cannot use")
    return float(sum(values))


def _kv(families: dict[str, list[float]]) -> float:
    name = KV_CACHE if KV_CACHE in families else KV_CACHE_LEGACY
    values = families.get(name, [])
    if not values:
        raise MetricsIncomplete(f"metric family {KV_CACHE} (or {KV_CACHE_LEGACY}) is missing")
    if any(math.isnan(v) or math.isinf(v) or v < 0 for v in values):
        raise MetricsIncomplete(f"{name} has a value a load reading cannot use: {values}")
    return max(values)


def read_pod(page: Page) -> PodMetrics:
    """Extract a pod's load from a parsed page; raise `MetricsIncomplete` if a needed family is absent."""
    families = _by_name(page)
    engines = {s.label("engine") for s in page.samples if s.name == RUNNING}
    return PodMetrics(
        requests_total=_sum(families, REQUESTS),
        prompt_tokens_total=_sum(families, PROMPT_TOKENS),
        generation_tokens_total=_sum(families, GENERATION_TOKENS),
        running=_sum(families, RUNNING),
        waiting=_sum(families, WAITING),
        kv_cache_usage=_kv(families),
        engines=max(1, len(engines)),
    )


def read_pod_text(text: str) -> PodMetrics:
    """Parse a metrics page and read the pod's load from it."""
    return read_pod(parse(text))
