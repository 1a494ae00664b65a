"""Read every service's load from Prometheus with a handful of PromQL queries (HTTP API)."""

import math
from dataclasses import dataclass

import requests

from offhours.scripts.metrics import vllm


class PrometheusError(RuntimeError):
    """Prometheus could not be queried or answered something unusable; names the query."""


@dataclass(frozen=True)
class ServiceReading:
    """What Prometheus says about one service."""

    request_rate: float | None
    prompt_token_rate: float | None
    generation_token_rate: float | None
    running: float | None
    waiting: float | None
    kv_cache_usage: float | None
    pods: int
    newest_sample_age: float | None


def queries(label: str, window: str, extra: str = "") -> dict[str, str]:
    """Return the PromQL queries, each aggregated by the service label (one series per service)."""
    sel = "{" + f'{label}!=""' + (f",{extra}" if extra else "") + "}"
    by = f"sum by ({label})"
    return {
        "request_rate": f"{by} (rate({vllm.REQUESTS}{sel}[{window}]))",
        "prompt_token_rate": f"{by} (rate({vllm.PROMPT_TOKENS}{sel}[{window}]))",
        "generation_token_rate": f"{by} (rate({vllm.GENERATION_TOKENS}{sel}[{window}]))",
        "running": f"{by} ({vllm.RUNNING}{sel})",
        "waiting": f"{by} ({vllm.WAITING}{sel})",
        # Per pod the new name wins where a server exposes both; older servers have only the legacy one.
        "kv_cache_usage": (f"max by ({label}) (max by ({label}, instance) ({vllm.KV_CACHE}{sel})"
                           f" or max by ({label}, instance) ({vllm.KV_CACHE_LEGACY}{sel}))"),
        "pods": f"count by ({label}) (count by ({label}, instance) ({vllm.RUNNING}{sel}))",
        "newest_sample_age": f"time() - max by ({label}) (timestamp({vllm.RUNNING}{sel}))",
    }


def _query(session: requests.Session, url: str, promql: str, timeout: float) -> list[dict[str, object]]:
    try:
        response = session.get(f"{url.rstrip('/')}/api/v1/query", params={"query": promql}, timeout=timeout)
    except requests.RequestException as err:
        raise PrometheusError(f"query {promql!r}: {type(err).__name__}: {err}") from None
    try:
        body = response.json()
    except ValueError:
        raise PrometheusError(f"query {promql!r}: HTTP {response.status_code}, not JSON") from None
    if response.status_code != 200 or body.get("status") != "success":
        raise PrometheusError(f"query {promql!r}: {body.get('errorType', response.status_code)}: {body.get('error', '')}")
    data = body.get("data") or {}
    if data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
        raise PrometheusError(f"query {promql!r}: expected a vector result, got {data.get('resultType')!r}")
    return list(data["result"])


def read_services(url: str, label: str, window: str, extra: str = "", timeout: float = 10.0) -> dict[str, ServiceReading]:
    """Query Prometheus once per quantity; return a reading for every service that has series."""
    values: dict[str, dict[str, float]] = {}
    with requests.Session() as session:
        for key, promql in queries(label, window, extra).items():
            for series in _query(session, url, promql, timeout):
                metric = series.get("metric") or {}
                value = series.get("value")
                if not isinstance(metric, dict) or not isinstance(value, list) or len(value) != 2:
                    raise PrometheusError(f"query {promql!r}: malformed sample {series!r}")
                service = metric.get(label)
                try:
                    number = float(value[1])
                except (TypeError, ValueError):
                    raise PrometheusError(f"query {promql!r}: value {value[1]!r} is not a number") from None
                if service is None or math.isnan(number) or math.isinf(number):
                    continue
                values.setdefault(str(service), {})[key] = number
    return {
        service: ServiceReading(
            request_rate=v.get("request_rate"),
            prompt_token_rate=v.get("prompt_token_rate"),
            generation_token_rate=v.get("generation_token_rate"),
            running=v.get("running"),
            waiting=v.get("waiting"),
            kv_cache_usage=v.get("kv_cache_usage"),
            pods=int(v.get("pods", 0)),
            newest_sample_age=v.get("newest_sample_age"),
        )
        for service, v in values.items()
    }
