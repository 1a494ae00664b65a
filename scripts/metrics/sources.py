"""Where the gate's load comes from: Prometheus, or the pods' /metrics directly.

Both give, per service, a `Load` (or the reason there is none) and the counter samples to keep
for the next tick. The same `Load` comes out of both paths for the same fleet.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from offhours.scripts.cluster.base import Pod
from offhours.scripts.metrics.load import CounterSample, load_from_pods
from offhours.scripts.metrics.prometheus import PrometheusError, read_services
from offhours.scripts.metrics.scrape import Target, scrape
from offhours.scripts.policy.capacity import Load
from offhours.scripts.policy.config import MetricsConfig


@dataclass(frozen=True)
class ServiceTarget:
    """A service to read: its ready pods and the counter samples of the last tick."""

    service: str
    pods: Sequence[Pod]
    previous: Mapping[str, CounterSample] = field(default_factory=dict)


@dataclass(frozen=True)
class Reading:
    """A service's load, or why there is none; and the samples to keep."""

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

    def read(self, targets: Sequence[ServiceTarget], now: float) -> dict[str, Reading]:
        """Scrape every pod of every target; compute rates against the previous samples."""
        all_targets = [Target(f"{t.service}/{p.name}", f"http://{p.ip}:{self.port}{self.path}")
                       for t in targets for p in t.pods]
        result = scrape(all_targets, self.timeout, self.concurrency)
        readings: dict[str, Reading] = {}
        for t in targets:
            mine = {p.name: result.readings[f"{t.service}/{p.name}"] for p in t.pods
                    if f"{t.service}/{p.name}" in result.readings}
            errors = [result.errors[f"{t.service}/{p.name}"] for p in t.pods if f"{t.service}/{p.name}" in result.errors]
            load, samples = load_from_pods(mine, t.previous, now, len(t.pods))
            error = None
            if not t.pods:
                error = "no ready pods"
            elif load is None:
                error = "no pod answered: " + "; ".join(errors[:3])
            elif errors:
                error = f"{len(errors)} of {len(t.pods)} pods unreadable: " + "; ".join(errors[:3])
            readings[t.service] = Reading(load, error, samples)
        return readings


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
        readings: dict[str, Reading] = {}
        for t in targets:
            r = services.get(t.service)
            if r is None:
                readings[t.service] = Reading(None, f"Prometheus has no vLLM series with {self.label}={t.service!r}")
                continue
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
            error = f"Prometheus lacks {', '.join(missing)} for {t.service}" if missing else None
            readings[t.service] = Reading(load, error)
        return readings


def source_from_config(config: MetricsConfig) -> LoadSource:
    """Build the load source the configuration names."""
    if config.source == "prometheus":
        return PrometheusSource.from_config(config)
    return DirectSource(config.port, config.path, config.scrape_timeout_seconds, config.concurrency)
