"""Read every service's load from Prometheus with a handful of PromQL queries (HTTP API).

The answer is decoded strictly: anything that is not the documented instant-vector shape
(`data.result` a list of `{"metric": {...}, "value": [<unix time>, "<number>"]}`) raises
`PrometheusError` naming what is wrong, never another exception.
"""

import math
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from offhours.scripts.inputs.errors import InputError
from offhours.scripts.inputs.httpget import http_get
from offhours.scripts.inputs.jsondoc import load_json
from offhours.scripts.inputs.limits import PROMETHEUS_ANSWER_BYTES
from offhours.scripts.metrics import vllm


class PrometheusError(RuntimeError):
    """Prometheus could not be queried or answered something unusable; names the query."""


@dataclass(frozen=True)
class ServiceReading:
    """What Prometheus says about one service; a quantity it did not answer is None."""

    request_rate: float | None
    prompt_token_rate: float | None
    generation_token_rate: float | None
    running: float | None
    waiting: float | None
    kv_cache_usage: float | None
    pods: int
    newest_sample_age: float | None
    problem: str | None = None


# Prometheus writes sample values as Go's strconv.FormatFloat does, plus NaN and +/-Inf.
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|NaN|[-+]Inf")


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


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def answer_data(status_code: int, body: object, where: str) -> object:
    """Return the `data` of a Prometheus API answer; raise `PrometheusError` if the answer is not a success."""
    if not isinstance(body, dict):
        raise PrometheusError(f"{where}: HTTP {status_code}, the answer is {type(body).__name__}, not an object")
    if status_code != 200 or body.get("status") != "success":
        raise PrometheusError(f"{where}: {body.get('errorType', status_code)}: {body.get('error', '')}")
    # A store that could read only part of the data (Thanos, Cortex, Mimir) says so here and nowhere else:
    # the series that came back are whole, so a pod or a day left out would read as less load (the gate
    # would lend on it). `infos` are hints about the query, not missing data.
    warnings = body.get("warnings", [])
    if not isinstance(warnings, list):
        raise PrometheusError(f"{where}: warnings is {_shown(warnings)}, not a list")
    if warnings:
        raise PrometheusError(f"{where}: the answer is partial (its warnings: {_shown(warnings)}); "
                              "nothing is read from an answer with parts missing")
    return body.get("data")


def decode_vector(status_code: int, body: object, promql: str) -> list[tuple[dict[str, str], float]]:
    """Decode an instant-query answer into (labels, value) pairs; raise `PrometheusError` naming any flaw."""
    where = f"query {promql!r}"
    data = answer_data(status_code, body, where)
    if not isinstance(data, dict):
        raise PrometheusError(f"{where}: data is {_shown(data)}, not an object")
    if data.get("resultType") != "vector":
        raise PrometheusError(f"{where}: expected a vector result, got {_shown(data.get('resultType'))}")
    result = data.get("result")
    if not isinstance(result, list):
        raise PrometheusError(f"{where}: data.result is {_shown(result)}, not a list")
    decoded = []
    for i, series in enumerate(result):
        if not isinstance(series, dict):
            raise PrometheusError(f"{where}: data.result[{i}] is {_shown(series)}, not an object")
        metric, value = series.get("metric"), series.get("value")
        if not isinstance(metric, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in metric.items()):
            raise PrometheusError(f"{where}: data.result[{i}].metric is {_shown(metric)}, not an object of strings")
        if (not isinstance(value, list) or len(value) != 2 or isinstance(value[0], bool)
                or not isinstance(value[0], (int, float)) or not isinstance(value[1], str)
                or not _NUMBER.fullmatch(value[1])):
            raise PrometheusError(f'{where}: data.result[{i}].value is {_shown(value)}, not [<time>, "<number>"]')
        decoded.append((metric, float(value[1].replace("Inf", "inf"))))
    return decoded


def ask(url: str, api: str, params: dict[str, str], timeout: float, where: str) -> tuple[int, object]:
    """GET a Prometheus API path; return (HTTP status, decoded JSON body); `PrometheusError` naming `where` else.

    `timeout` bounds the whole answer, not each read (the input layer's HTTP reader), and its bytes are capped.
    """
    try:
        answer = http_get(f"{url.rstrip('/')}{api}", timeout, PROMETHEUS_ANSWER_BYTES, params)
    except InputError as err:
        raise PrometheusError(f"{where}: {err}") from None
    try:
        return answer.status, load_json(answer.body, f"{where}: the answer")
    except InputError as err:
        raise PrometheusError(f"{where}: HTTP {answer.status}, not JSON ({err.problem})") from None


def _query(url: str, promql: str, timeout: float) -> list[tuple[dict[str, str], float]]:
    status, body = ask(url, "/api/v1/query", {"query": promql}, timeout, f"query {promql!r}")
    return decode_vector(status, body, promql)


def read_services(url: str, label: str, window: str, extra: str = "", timeout: float = 10.0) -> dict[str, ServiceReading]:
    """Query Prometheus once per quantity; return a reading for every service that has series.

    Values are passed on as Prometheus gave them (NaN and infinities included): judging them is
    the caller's job, so that a bad value is named for its own service.
    """
    values: dict[str, dict[str, float]] = {}
    asked = queries(label, window, extra)
    # All at once: Prometheus evaluates them in parallel, so a tick waits for the slowest query, not
    # for their sum, and the whole reading stays within one timeout.
    with ThreadPoolExecutor(max_workers=len(asked)) as pool:
        answers = {key: pool.submit(_query, url, promql, timeout) for key, promql in asked.items()}
        for key, answer in answers.items():
            for metric, number in answer.result():  # the first failing query, in order, is the one named
                service = metric.get(label)
                if service is None:
                    continue
                values.setdefault(service, {})[key] = number
    readings = {}
    for service, v in values.items():
        pods, problem = v.get("pods", 0.0), None
        if not (math.isfinite(pods) and pods >= 0 and pods.is_integer()):
            pods, problem = 0.0, f"Prometheus counts {pods} pods, not a whole number"
        readings[service] = ServiceReading(
            request_rate=v.get("request_rate"),
            prompt_token_rate=v.get("prompt_token_rate"),
            generation_token_rate=v.get("generation_token_rate"),
            running=v.get("running"),
            waiting=v.get("waiting"),
            kv_cache_usage=v.get("kv_cache_usage"),
            pods=int(pods),
            newest_sample_age=v.get("newest_sample_age"),
            problem=problem,
        )
    return readings
