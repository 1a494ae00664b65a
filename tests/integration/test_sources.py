"""The load sources over real HTTP: the direct scraper against emulated vLLM pods (IPv4 and IPv6
loopback), and the Prometheus reader's handling of answers a broken Prometheus or proxy could give."""

import json
import math
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offhours.scripts.cluster.base import Pod
from offhours.scripts.config.loader import parse_config
from offhours.scripts.metrics.emulator import EmulatedServer, Fleet
from offhours.scripts.metrics.prometheus import PrometheusError, decode_vector, queries
from offhours.scripts.metrics.scrape import metrics_url
from offhours.scripts.metrics.sources import DirectSource, PrometheusSource, Reading, ServiceTarget
from offhours.scripts.policy.capacity import Load
from offhours.scripts.policy.samples import CounterSample
from tests.support.fleet import free_port

PAGE_TWO_ENGINES = """\
vllm:num_requests_running{{engine="0"}} {running0}
vllm:num_requests_running{{engine="1"}} {running1}
vllm:num_requests_waiting{{engine="0"}} 0
vllm:num_requests_waiting{{engine="1"}} 0
vllm:kv_cache_usage_perc{{engine="0"}} 0.1
vllm:kv_cache_usage_perc{{engine="1"}} 0.1
vllm:request_success_total{{engine="0"}} {requests0}
vllm:request_success_total{{engine="1"}} 1
vllm:prompt_tokens_total{{engine="0"}} 1
vllm:prompt_tokens_total{{engine="1"}} 1
vllm:generation_tokens_total{{engine="0"}} 1
vllm:generation_tokens_total{{engine="1"}} 1
"""


def _page(running0: str = "1", running1: str = "1", requests0: str = "1") -> str:
    return PAGE_TWO_ENGINES.format(running0=running0, running1=running1, requests0=requests0)


class Pods:
    """Three emulated two-engine vLLM pods on 127.0.71.1-3, read through DirectSource with a fake clock."""

    def __init__(self, port: int) -> None:
        self.port, self.servers = port, [EmulatedServer(engines=2) for _ in range(3)]
        self.pods = [Pod(f"chat-{i}", f"127.0.71.{i + 1}") for i in range(3)]
        self.samples: dict[str, CounterSample] = {}
        self.source = DirectSource(port=port)

    def read(self, now: float) -> Reading:
        reading = self.source.read([ServiceTarget("chat", self.pods, self.samples)], now)["chat"]
        self.samples = reading.samples
        return reading


@pytest.fixture
def pods() -> Iterator[Pods]:
    p = Pods(free_port())
    fleet = Fleet([(pod.ip, p.port, server) for pod, server in zip(p.pods, p.servers)]).start()
    try:
        yield p
    finally:
        fleet.stop()


def _feed_all(p: Pods, requests: float, seconds: float) -> None:
    for server in p.servers:
        server.feed(requests, requests * 100, requests * 10, seconds)


def test_series_are_keyed_by_pod_and_engine_and_rates_are_exact(pods: Pods) -> None:
    first = pods.read(1000.0)
    assert first.load is not None and first.load.pods_read == 0 and first.error is None
    assert sorted(first.samples) == ["chat-0/0", "chat-0/1", "chat-1/0", "chat-1/1", "chat-2/0", "chat-2/1"]
    _feed_all(pods, 600, 60)
    second = pods.read(1060.0)
    assert second.error is None and second.load is not None and second.load.pods_read == 3
    assert second.load.request_rate == 30.0 and second.load.prompt_token_rate == 3000.0
    assert second.samples["chat-1/0"] == CounterSample(1060.0, (300.0, 30000.0, 3000.0))


def test_one_engine_restarting_counts_only_its_own_work(pods: Pods) -> None:
    _feed_all(pods, 6000, 60)
    pods.read(1000.0)
    pods.servers[1].restart(engine=0)  # engine 0 of chat-1 restarts, its counters start from zero
    pods.servers[1].feed(120, 12000, 1200, 60)  # then both engines of chat-1 do 60 requests each
    second = pods.read(1060.0)
    assert second.error is None and second.load is not None and second.load.pods_read == 3
    # chat-1 engine 0: 60 since its restart; engine 1: 60 more. Nothing else moved.
    assert second.load.request_rate == 2.0
    assert second.load.prompt_token_rate == 200.0


def test_a_pod_that_failed_one_scrape_keeps_its_samples_and_the_next_scrape_has_a_rate(pods: Pods) -> None:
    pods.read(1000.0)
    first_of_chat_1 = {k: v for k, v in pods.samples.items() if k.startswith("chat-1/")}
    _feed_all(pods, 600, 60)
    pods.servers[1].failing = True
    blip = pods.read(1060.0)
    assert blip.error is not None and blip.error.startswith("1 of 3 pods unreadable: chat/chat-1: scrape failed")
    assert blip.load is not None and blip.load.pods_read == 2 and blip.load.request_rate == 20.0
    # chat-1 keeps its last good samples; the others' are this tick's.
    assert {k: v for k, v in blip.samples.items() if k.startswith("chat-1/")} == first_of_chat_1
    assert blip.samples["chat-0/0"].at == 1060.0 and blip.samples["chat-2/1"].at == 1060.0
    pods.servers[1].failing = False
    _feed_all(pods, 600, 60)
    after = pods.read(1120.0)
    assert after.error is None and after.load is not None and after.load.pods_read == 3
    # chat-0 and chat-2: 600 over 60 s each; chat-1: 1,200 over the 120 s since its last good scrape.
    assert after.load.request_rate == 30.0


def test_a_stale_previous_sample_gives_no_rate(pods: Pods) -> None:
    pods.read(1000.0)
    _feed_all(pods, 600, 60)
    stale = pods.read(1301.0)
    assert stale.load is not None and stale.load.pods_read == 0 and not stale.load.complete
    fresh = pods.read(1361.0)
    assert fresh.load is not None and fresh.load.pods_read == 3 and fresh.load.request_rate == 0.0


def test_the_sample_age_bound_comes_from_the_gate_config() -> None:
    raw = {"metrics": {"source": "direct", "maxSampleAgeSeconds": 120},
           "services": {"chat": {"capacity": {"requestsPerSecond": 1}}}}
    assert parse_config(raw).metrics.max_sample_age_seconds == 120
    del raw["metrics"]["maxSampleAgeSeconds"]  # type: ignore[attr-defined]
    assert parse_config(raw).metrics.max_sample_age_seconds == 300


@pytest.mark.parametrize("page, problem", [
    (_page(running0="1e308", running1="1e308"),
     "chat-0: vllm:num_requests_running sums to inf over the pod's engines"),
    (_page().replace('vllm:request_success_total{engine="1"} 1', 'vllm:request_success_total{engine="1",'
                     'finished_reason="stop"} 1e308\nvllm:request_success_total{engine="1",finished_reason="length"} 1e308'),
     "chat-0: vllm:request_success_total sums to inf over the pod's engines"),
    (_page(running0="NaN"), "chat-0: vllm:num_requests_running has the value nan"),
    (_page(running0="-3"), "chat-0: vllm:num_requests_running has the value -3.0"),
])
def test_non_finite_or_negative_values_fail_the_reading_and_name_it(pods: Pods, page: str, problem: str) -> None:
    for server in pods.servers:
        server.page = page
    reading = pods.read(1000.0)
    assert reading.load is None and reading.error is not None
    assert reading.error.startswith("no pod answered: ") and problem in reading.error


def test_gauges_each_plausible_but_summing_past_any_fleet_fail_the_reading(pods: Pods) -> None:
    for server in pods.servers:
        server.page = _page(running0="4e11")
    reading = pods.read(1000.0)
    assert reading.load is None
    assert reading.error == "implausible load for chat: running is 1.2e+12, beyond any real fleet (1e+12)"


@pytest.mark.parametrize("jump, dt, problem", [
    ("1e300", 50.0, "request_rate is 2e+298, beyond any real fleet (1e+12)"),
    ("1e300", 1e-300, "request_rate is inf"),
])
def test_a_rate_that_is_not_finite_or_absurd_fails_the_reading(pods: Pods, jump: str, dt: float, problem: str) -> None:
    for server in pods.servers:
        server.page = _page()
    pods.read(0.0)
    pods.servers[0].page = _page(requests0=jump)
    reading = pods.read(dt)
    assert reading.load is None and reading.error == f"implausible load for chat: {problem}"
    assert reading.samples["chat-0/0"] == CounterSample(dt, (float(jump), 1.0, 1.0))


def test_engines_that_disagree_across_families_are_refused(pods: Pods) -> None:
    for server in pods.servers:
        server.page = _page().replace('vllm:prompt_tokens_total{engine="1"} 1\n', "")
    reading = pods.read(1000.0)
    assert reading.load is None and reading.error is not None
    assert "vllm:prompt_tokens_total and vllm:num_requests_running disagree on the engines (engine 1)" in reading.error


@pytest.mark.parametrize("ip, url", [
    ("fd00::1", "http://[fd00::1]:8000/metrics"),
    ("2001:db8::a:1", "http://[2001:db8::a:1]:8000/metrics"),
    ("fe80::1%eth0", "http://[fe80::1%25eth0]:8000/metrics"),
    ("10.1.2.3", "http://10.1.2.3:8000/metrics"),
])
def test_scrape_urls_bracket_ipv6_literals(ip: str, url: str) -> None:
    assert metrics_url(ip, 8000, "/metrics") == url


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _has_ipv6_loopback(), reason="this machine has no IPv6 loopback (the URL builder is tested above)")
def test_direct_source_reads_a_pod_on_ipv6_loopback() -> None:
    with socket.socket(socket.AF_INET6) as s:
        s.bind(("::1", 0))
        port = s.getsockname()[1]
    server = EmulatedServer(engines=2)
    with Fleet([("::1", port, server)]):
        source = DirectSource(port=port)
        first = source.read([ServiceTarget("chat", [Pod("chat-0", "::1")])], 0.0)["chat"]
        server.feed(120, 1200, 120, 60)
        second = source.read([ServiceTarget("chat", [Pod("chat-0", "::1")], first.samples)], 60.0)["chat"]
    assert first.error is None and second.error is None
    assert second.load is not None and second.load.pods_read == 1 and second.load.request_rate == 2.0


# --- Prometheus answers -------------------------------------------------------------------------

OK = {"status": "success", "data": {"resultType": "vector", "result": []}}


@pytest.mark.parametrize("body, problem", [
    ([1, 2], "the answer is list, not an object"),
    ("ok", "the answer is str, not an object"),
    ({"status": "success", "data": []}, "data is [], not an object"),
    ({"status": "success", "data": {"resultType": "matrix", "result": []}}, "expected a vector result, got 'matrix'"),
    ({"status": "success", "data": {"resultType": "vector", "result": "x"}}, "data.result is 'x', not a list"),
    ({"status": "success", "data": {"resultType": "vector", "result": {"a": 1}}}, "data.result is {'a': 1}, not a list"),
    ({"status": "success", "data": {"resultType": "vector", "result": [1]}}, "data.result[0] is 1, not an object"),
    ({"status": "success", "data": {"resultType": "vector", "result": [{"metric": [], "value": [1, "1"]}]}},
     "data.result[0].metric is [], not an object of strings"),
    ({"status": "success", "data": {"resultType": "vector", "result": [{"metric": {"service": 3}, "value": [1, "1"]}]}},
     "data.result[0].metric is {'service': 3}, not an object of strings"),
    ({"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, 1]}]}},
     'data.result[0].value is [1, 1], not [<time>, "<number>"]'),
    ({"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": ["1", "1"]}]}},
     'data.result[0].value is [\'1\', \'1\'], not [<time>, "<number>"]'),
    ({"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, "one"]}]}},
     'data.result[0].value is [1, \'one\'], not [<time>, "<number>"]'),
    ({"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1]}]}},
     'data.result[0].value is [1], not [<time>, "<number>"]'),
    ({"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}}]}},
     'data.result[0].value is None, not [<time>, "<number>"]'),
    ({"status": "error", "errorType": "bad_data", "error": "parse error"}, "bad_data: parse error"),
])
def test_malformed_prometheus_answers_are_named(body: object, problem: str) -> None:
    with pytest.raises(PrometheusError) as err:
        decode_vector(200, body, "up")
    assert str(err.value) == f"query 'up': {problem}" or str(err.value) == f"query 'up': HTTP 200, {problem}"


def test_well_formed_answer_decodes() -> None:
    body = {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"service": "chat"}, "value": [1700000000.5, "2.5"]},
        {"metric": {"service": "code"}, "value": [1700000000, "+Inf"]},
        {"metric": {"service": "x"}, "value": [1700000000, "NaN"]}]}}
    decoded = decode_vector(200, body, "up")
    assert decoded[:2] == [({"service": "chat"}, 2.5), ({"service": "code"}, math.inf)]
    assert decoded[2][0] == {"service": "x"} and math.isnan(decoded[2][1])


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                     max_leaves=12)
_result_item = st.fixed_dictionaries({}, optional={"metric": _json | st.dictionaries(st.text(max_size=8), _json),
                                                   "value": _json | st.tuples(_json, _json).map(list)})
_answer = st.fixed_dictionaries({}, optional={
    "status": st.sampled_from(["success", "error"]) | _json,
    "data": _json | st.fixed_dictionaries({}, optional={"resultType": st.just("vector") | _json,
                                                        "result": _json | st.lists(_result_item | _json, max_size=3)}),
})


@settings(max_examples=400, deadline=None)
@given(_answer | _json)
def test_fuzz_any_json_answer_decodes_or_raises_prometheus_error(body: object) -> None:
    # Invariant: no answer raises anything but PrometheusError, and what decodes is the documented shape.
    try:
        decoded = decode_vector(200, body, "up")
    except PrometheusError as err:
        assert str(err).startswith("query 'up': ")
        return
    for labels, value in decoded:
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items())
        assert isinstance(value, float)


class _Answers(BaseHTTPRequestHandler):
    """A broken Prometheus (or a proxy in front of one): answers each query with `answer(query)`."""

    answer: Callable[[str], object] = staticmethod(lambda query: {})

    def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
        query = parse_qs(urlparse(self.path).query).get("query", [""])[0]
        body = json.dumps(type(self).answer(query)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def broken_prometheus() -> Iterator[tuple[str, type[_Answers]]]:
    handler = type("Answers", (_Answers,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


TARGETS = [ServiceTarget("chat", [Pod("chat-0", "127.0.0.9")]), ServiceTarget("code", [Pod("code-0", "127.0.0.10")])]


def _vector(value: str) -> object:
    return {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"service": "chat"}, "value": [1, value]}]}}


@pytest.mark.parametrize("body, problem", [
    ({"status": "success", "data": {"resultType": "vector", "result": "oops"}}, "data.result is 'oops', not a list"),
    ({"status": "success", "data": {"resultType": "vector", "result": ["x"]}}, "data.result[0] is 'x', not an object"),
    ({"status": "success", "data": {"resultType": "vector", "result": {}}}, "data.result is {}, not a list"),
    ([], "the answer is list, not an object"),
])
def test_a_malformed_answer_becomes_every_services_reading_error(
        broken_prometheus: tuple[str, type[_Answers]], body: object, problem: str) -> None:
    url, handler = broken_prometheus
    handler.answer = staticmethod(lambda query: body)  # type: ignore[assignment]
    readings = PrometheusSource(url, timeout=5).read(TARGETS, 0.0)
    assert set(readings) == {"chat", "code"}
    for reading in readings.values():
        assert reading.load is None and reading.error is not None and problem in reading.error


@pytest.mark.parametrize("value, problem", [
    ("NaN", "running is nan"), ("+Inf", "running is inf"), ("-2", "running is negative (-2.0)"),
    ("1e308", "running is 1e+308, beyond any real fleet (1e+12)"),
])
def test_a_non_finite_prometheus_value_is_named_not_passed_on(
        broken_prometheus: tuple[str, type[_Answers]], value: str, problem: str) -> None:
    # The running query answers `value` for chat; every other query answers a sound 1.
    url, handler = broken_prometheus
    running = queries("service", "1m")["running"]
    handler.answer = staticmethod(lambda query: _vector(value if query == running else "1"))  # type: ignore[assignment]
    readings = PrometheusSource(url, timeout=5).read(TARGETS[:1], 0.0)
    assert readings["chat"] == Reading(None, f"implausible load from Prometheus for chat: {problem}")


def test_a_pod_count_that_is_not_a_whole_number_is_named(broken_prometheus: tuple[str, type[_Answers]]) -> None:
    url, handler = broken_prometheus
    pods = queries("service", "1m")["pods"]
    handler.answer = staticmethod(lambda query: _vector("2.5" if query == pods else "1"))  # type: ignore[assignment]
    readings = PrometheusSource(url, timeout=5).read(TARGETS[:1], 0.0)
    assert readings["chat"] == Reading(None, "Prometheus counts 2.5 pods, not a whole number for chat")


def test_a_sound_answer_reads_exactly(broken_prometheus: tuple[str, type[_Answers]]) -> None:
    url, handler = broken_prometheus
    q = queries("service", "1m")
    handler.answer = staticmethod(lambda query: _vector(  # type: ignore[assignment]
        "1" if query == q["pods"] else "2" if query == q["newest_sample_age"] else "0.5"))
    reading = PrometheusSource(url, timeout=5).read(TARGETS[:1], 0.0)["chat"]
    assert reading == Reading(Load(0.5, 0.5, 0.5, 0.5, 0.5, 0.5, pods_read=1, pods_expected=1, age_seconds=2.0), None)
