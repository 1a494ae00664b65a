"""Where the gate's load comes from: Prometheus, or the pods' /metrics directly.

Both give, per service, a `Load` (or the reason there is none) and the counter samples to keep
for the next tick. The same `Load` comes out of both paths for the same fleet.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from offhours.scripts.cluster.base import Pod
from offhours.scripts.metrics.load import carried_samples, implausible, load_from_pods
from offhours.scripts.metrics.prometheus import PrometheusError, ServiceReading, read_services
from offhours.scripts.metrics.scrape import Target, metrics_url, scrape
from offhours.scripts.metrics.vllm import PodMetrics
from offhours.scripts.policy.capacity import Load
from offhours.scripts.policy.config import MetricsConfig
from offhours.scripts.policy.samples import CounterSample


@dataclass(frozen=True)
class ServiceTarget:
    """A service to read: its ready pods and the counter samples of the last tick."""

    service: str
    pods: Sequence[Pod]
    previous: Mapping[str, CounterSample] = field(default_factory=dict)


@dataclass(frozen=True)
class Reading:
    """A service's load, or why there is none; and the counter samples to keep (key: series id `pod/engine`)."""

    load: Load | None
    error: str | None
    samples: dict[str, CounterSample] = field(default_factory=dict)


class LoadSource(Protocol):
    """Reads the load of several services at once."""

    def read(self, targets: Sequence[ServiceTarget], now: float) -> dict[str, Reading]:
        """Return a reading for each target's service."""
        ...


@dataclass
class DirectSource:
    """Scrape each ready pod's /metrics concurrently (all services in one pool)."""

    port: int = 8000
    path: str = "/metrics"
    timeout: float = 2.0
    concurrency: int = 64
    max_sample_age: float = 300.0

    def read(self, targets: Sequence[ServiceTarget], now: float) -> dict[str, Reading]:
        """Scrape every pod of every target; compute rates per series against the previous samples.

        A pod that fails its scrape keeps its earlier samples (the next good scrape has a rate);
        the other pods' samples are replaced by this tick's.
        """
        all_targets = [Target(f"{t.service}/{p.name}", metrics_url(p.ip, self.port, self.path))
                       for t in targets for p in t.pods]
        result = scrape(all_targets, self.timeout, self.concurrency)
        return {t.service: self._service(t, result.readings, result.errors, now) for t in targets}

    def _service(self, t: ServiceTarget, readings: Mapping[str, PodMetrics], errors: Mapping[str, str],
                 now: float) -> Reading:
        mine = {p.name: readings[f"{t.service}/{p.name}"] for p in t.pods if f"{t.service}/{p.name}" in readings}
        failed = [errors[f"{t.service}/{p.name}"] for p in t.pods if f"{t.service}/{p.name}" in errors]
        load, fresh = load_from_pods(mine, t.previous, now, len(t.pods), self.max_sample_age)
        unread = {p.name for p in t.pods} - set(mine)
        samples = {**carried_samples(t.previous, unread, now, self.max_sample_age), **fresh}
        error = None
        if not t.pods:
            error = "no ready pods"
        elif load is None:
            error = "no pod answered: " + "; ".join(failed[:3])
        elif failed:
            error = f"{len(failed)} of {len(t.pods)} pods unreadable: " + "; ".join(failed[:3])
        if load is not None and (problem := implausible(load)) is not None:
            return Reading(None, f"implausible load for {t.service}: {problem}" + (f"; {error}" if error else ""),
                           samples)
        return Reading(load, error, samples)


@dataclass
class PrometheusSource:
    """Query Prometheus for every service at once."""

    url: str
    label: str = "service"
    window: str = "1m"
    extra_selector: str = ""
    timeout: float = 10.0

    @classmethod
    def from_config(cls, config: MetricsConfig) -> "PrometheusSource":
        """Build from the gate configuration."""
        assert config.prometheus_url is not None
        return cls(config.prometheus_url, config.service_label, config.window, config.extra_selector,
                   config.prometheus_timeout_seconds)

    def read(self, targets: Sequence[ServiceTarget], now: float) -> dict[str, Reading]:
        """Query Prometheus; a service without every quantity gets an error naming the missing ones."""
        try:
            services = read_services(self.url, self.label, self.window, self.extra_selector, self.timeout)
        except PrometheusError as err:
            return {t.service: Reading(None, str(err)) for t in targets}
        return {t.service: self._service(t, services.get(t.service)) for t in targets}

    def _service(self, t: ServiceTarget, r: ServiceReading | None) -> Reading:
        if r is None:
            return Reading(None, f"Prometheus has no vLLM series with {self.label}={t.service!r}")
        if r.problem is not None:
            return Reading(None, f"{r.problem} for {t.service}")
        values = {"request_rate": r.request_rate, "prompt_token_rate": r.prompt_token_rate,
                  "generation_token_rate": r.generation_token_rate, "running": r.running, "waiting": r.waiting,
                  "kv_cache_usage": r.kv_cache_usage}
        missing = [k for k, v in values.items() if v is None]
        load = Load(
            request_rate=r.request_rate or 0.0,
            prompt_token_rate=r.prompt_token_rate or 0.0,
            generation_token_rate=r.generation_token_rate or 0.0,
            running=r.running or 0.0,
            waiting=r.waiting or 0.0,
            kv_cache_usage=r.kv_cache_usage or 0.0,
            pods_read=r.pods if not missing else 0,
            pods_expected=len(t.pods),
            age_seconds=r.newest_sample_age if r.newest_sample_age is not None else float("inf"),
        )
        if (problem := implausible(load)) is not None:
            return Reading(None, f"implausible load from Prometheus for {t.service}: {problem}")
        return Reading(load, f"Prometheus lacks {', '.join(missing)} for {t.service}" if missing else None)


def source_from_config(config: MetricsConfig) -> LoadSource:
    """Build the load source the configuration names."""
    if config.source == "prometheus":
        return PrometheusSource.from_config(config)
    return DirectSource(config.port, config.path, config.scrape_timeout_seconds, config.concurrency,
                        config.max_sample_age_seconds)
