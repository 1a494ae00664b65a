"""Read one vLLM pod's load from its metrics page: V1 engine (vLLM >= 0.12) and older servers.

V1 labels every series with `model_name` and `engine` (one engine per data-parallel rank). Each
engine is its own counter series (it can restart alone), so the reader keeps the counters per
engine; the pod's gauges are the sum over its engines (KV-cache use: the fullest engine).
Counters come as `_total` with a `_created` twin, which is ignored. Older servers name KV-cache
use `vllm:gpu_cache_usage_perc` and have no `engine` label; when both names are present the new
one wins.
"""

import math
from dataclasses import dataclass, field

from offhours.scripts.metrics.exposition import Page, Sample, parse
from offhours.scripts.policy.samples import Counters

REQUESTS = "vllm:request_success_total"
PROMPT_TOKENS = "vllm:prompt_tokens_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
KV_CACHE = "vllm:kv_cache_usage_perc"
KV_CACHE_LEGACY = "vllm:gpu_cache_usage_perc"

COUNTERS = (REQUESTS, PROMPT_TOKENS, GENERATION_TOKENS)
GAUGES = (RUNNING, WAITING)
# Data-parallel ranks of one pod; more engine labels than this is a broken exporter, and every
# engine costs a stored counter sample in the gate's state.
MAX_ENGINES = 256


class MetricsIncomplete(ValueError):
    """A page parsed but lacks a family the gate needs, or carries a value it cannot use."""


@dataclass(frozen=True)
class PodMetrics:
    """One pod's counters (cumulative) and gauges (now), summed over its engines.

    `engine_counters` keeps each engine's three counters apart (key: the `engine` label, None on
    servers without one): rates are computed per engine, so one engine's restart stays its own.
    """

    requests_total: float
    prompt_tokens_total: float
    generation_tokens_total: float
    running: float
    waiting: float
    kv_cache_usage: float
    engines: int
    engine_counters: dict[str | None, Counters] = field(default_factory=dict)

    @property
    def counters(self) -> Counters:
        """The three counters summed over engines: finished requests, prompt tokens, generation tokens."""
        return (self.requests_total, self.prompt_tokens_total, self.generation_tokens_total)


def _per_engine(samples: list[Sample], name: str) -> dict[str | None, float]:
    """Sum family `name` per engine (over its other labels); every value must be a usable number."""
    values: dict[str | None, float] = {}
    for sample in samples:
        value = sample.value
        if math.isnan(value) or math.isinf(value) or value < 0:
            raise MetricsIncomplete(f"{name} has the value {value}, which a load reading cannot use")
        engine = sample.label("engine")
        values[engine] = values.get(engine, 0.0) + value
    if not values:
        raise MetricsIncomplete(f"metric family {name} is missing")
    return values


def _total(name: str, values: dict[str | None, float]) -> float:
    # Finite values can sum to infinity (two engines at 1e308); an engine's own sum is part of this one.
    total = sum(values.values())
    if math.isinf(total):
        raise MetricsIncomplete(f"{name} sums to {total} over the pod's engines, which a load reading cannot use")
    return total


def read_pod(page: Page) -> PodMetrics:
    """Extract a pod's load from a parsed page; raise `MetricsIncomplete` if a needed family is absent or unusable.

    Every needed family must have a series for the same engines: an engine missing from one
    family would otherwise read as zero load on that engine.
    """
    by_name: dict[str, list[Sample]] = {}
    for sample in page.samples:
        by_name.setdefault(sample.name, []).append(sample)
    kv_name = KV_CACHE if KV_CACHE in by_name else KV_CACHE_LEGACY
    if kv_name not in by_name:
        raise MetricsIncomplete(f"metric family {KV_CACHE} (or {KV_CACHE_LEGACY}) is missing")
    families = {name: _per_engine(by_name.get(name, []), name) for name in (*COUNTERS, *GAUGES, kv_name)}
    engines = set(families[RUNNING])
    if len(engines) > MAX_ENGINES:
        raise MetricsIncomplete(f"{RUNNING} has {len(engines)} engines, more than {MAX_ENGINES}")
    for name, values in families.items():
        if set(values) != engines:
            odd = sorted(str(e) for e in set(values) ^ engines)
            raise MetricsIncomplete(f"{name} and {RUNNING} disagree on the engines (engine {', '.join(odd)})")
    requests, prompt, generation = (families[name] for name in COUNTERS)
    return PodMetrics(
        requests_total=_total(REQUESTS, requests),
        prompt_tokens_total=_total(PROMPT_TOKENS, prompt),
        generation_tokens_total=_total(GENERATION_TOKENS, generation),
        running=_total(RUNNING, families[RUNNING]),
        waiting=_total(WAITING, families[WAITING]),
        kv_cache_usage=max(families[kv_name].values()),
        engines=len(engines),
        engine_counters={e: (requests[e], prompt[e], generation[e]) for e in sorted(engines, key=str)},
    )


# The sample names read_pod looks at; parse() decodes only these (and checks every line's form).
READ = frozenset((*COUNTERS, *GAUGES, KV_CACHE, KV_CACHE_LEGACY))


def read_pod_text(text: str) -> PodMetrics:
    """Parse a metrics page and read the pod's load from it."""
    return read_pod(parse(text, keep=READ))
