"""A real Prometheus scraping emulated vLLM pods at the real trace's load: PromQL and direct scrape agree.

Real: Debian's Prometheus, HTTP scraping over loopback, the PromQL queries, the direct scraper.
Stand-in: the vLLM servers (emulated pages in vLLM V1's exact format, one older V0 server), whose
counters grow continuously at the trace's rates and whose gauges are fixed, so every expected value
below is known exactly. The test waits on Prometheus itself (samples stored), never on a sleep.
"""

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from offhours.scripts.cluster.base import Pod
from offhours.scripts.metrics.emulator import EmulatedServer
from offhours.scripts.metrics.sources import DirectSource, PrometheusSource, Reading, ServiceTarget
from offhours.scripts.simulate.trace import load_trace
from tests.support.fleet import EmulatedService, free_port, start_fleet
from tests.support.prometheus_fixture import running_prometheus, wait_for_samples, wait_for_targets

pytestmark = pytest.mark.prometheus

TRACE = load_trace()
MINUTE = 600  # 10:00 of day 1
SHARES = {"chat": 0.004, "code": 0.001}
WINDOW, WINDOW_SAMPLES = "20s", 20  # 1 s scrapes: a window is covered once it holds 20 samples
SERIES = 6 * 2 + 2 * 2 + 1  # chat: 6 pods x 2 engines; code: 2 pods x 2 engines and one V0 pod


def want_rates(service: str) -> tuple[float, float, float]:
    share = SHARES[service]
    return (TRACE.requests[MINUTE] / 60 * share, TRACE.input_tokens[MINUTE] / 60 * share,
            TRACE.output_tokens[MINUTE] / 60 * share)


def gauges(i: int) -> tuple[float, float, float]:
    """Pod i's running, waiting and KV-cache use: binary fractions, so sums are exact."""
    return 2.0 + i, 0.5 * i, 0.125 * (i + 1)


@pytest.fixture(scope="module")
def fleet_and_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[EmulatedService], str]]:
    services = [EmulatedService("chat", 6, subnet=61, port=free_port()),
                EmulatedService("code", 3, subnet=62, port=free_port())]
    # An older vLLM in the fleet: one engine, no engine label, the legacy KV-cache name.
    services[1].servers[0] = EmulatedServer(engines=1, legacy=True)
    for svc in services:
        for i, server in enumerate(svc.servers):
            server.set_gauges(*gauges(i))
            server.steady(*(rate / len(svc.servers) for rate in want_rates(svc.name)))
    fleet = start_fleet(services)
    try:
        with running_prometheus(services, tmp_path_factory.mktemp("prometheus")) as url:
            wait_for_targets(url, 9)
            yield services, url
    finally:
        fleet.stop()


def _targets(services: list[EmulatedService]) -> list[ServiceTarget]:
    return [ServiceTarget(s.name, [Pod(f"{s.name}-{i}", ip) for i, ip in enumerate(s.ips)]) for s in services]


def _direct(svc: EmulatedService, target: ServiceTarget, now: float) -> Reading:
    # Each emulated service listens on its own port, so the direct path reads them one by one.
    return DirectSource(port=svc.port).read([target], now)[svc.name]


def test_promql_and_direct_scrape_read_the_same_load(fleet_and_prometheus: tuple[list[EmulatedService], str]) -> None:
    services, url = fleet_and_prometheus
    targets = _targets(services)
    wait_for_samples(url, "vllm:num_requests_running", SERIES, 1, WINDOW)
    t0 = time.time()
    first = {s.name: _direct(s, t, t0) for s, t in zip(services, targets)}
    wait_for_samples(url, "vllm:num_requests_running", SERIES, WINDOW_SAMPLES, WINDOW)
    t1 = time.time()
    second = {s.name: _direct(s, ServiceTarget(t.service, t.pods, first[s.name].samples), t1)
              for s, t in zip(services, targets)}
    promql = PrometheusSource(url, window=WINDOW).read(targets, time.time())
    for svc in services:
        d, p = second[svc.name], promql[svc.name]
        assert d.error is None and p.error is None, (d.error, p.error)
        assert d.load is not None and p.load is not None
        assert d.load.pods_read == p.load.pods_read == len(svc.servers)
        n = len(svc.servers)
        # Gauges are fixed: both paths read them exactly.
        assert d.load.running == p.load.running == sum(gauges(i)[0] for i in range(n))
        assert d.load.waiting == p.load.waiting == sum(gauges(i)[1] for i in range(n))
        assert d.load.kv_cache_usage == p.load.kv_cache_usage == gauges(n - 1)[2]
        for name, want in zip(("request_rate", "prompt_token_rate", "generation_token_rate"), want_rates(svc.name)):
            # Direct: the counters hold the work up to the moment each page is rendered, the rate divides by
            # the clock read just before the scrape; the two differ by the loopback round trip (ms) at each
            # end of a ~20 s interval: 1 % allows 100 ms.
            assert getattr(d.load, name) == pytest.approx(want, rel=0.01), (svc.name, name)
            # PromQL rate() of a linear counter is its exact slope when the window's first and last scrapes
            # are within 1.1 scrape intervals of its ends; one late scrape at an end makes rate() extrapolate
            # only half an interval there: at most 1.1 s of a 20 s window, 5.5 %.
            assert getattr(p.load, name) == pytest.approx(want, rel=0.055), (svc.name, name)
        assert 0 <= p.load.age_seconds < 5


def test_prometheus_without_the_service_reports_missing_data(fleet_and_prometheus: tuple[list[EmulatedService], str]) -> None:
    _, url = fleet_and_prometheus
    reading = PrometheusSource(url).read([ServiceTarget("unknown", [Pod("x-0", "127.0.0.9")])], time.time())
    assert reading["unknown"] == Reading(None, "Prometheus has no vLLM series with service='unknown'")


def test_unreachable_prometheus_is_an_error_not_zero(tmp_path: Path) -> None:
    reading = PrometheusSource(f"http://127.0.0.1:{free_port()}", timeout=1).read(
        [ServiceTarget("chat", [Pod("chat-0", "127.0.0.9")])], time.time())
    # One short line naming what failed (issue 33: never raw library text such as a ConnectionError's repr).
    error = reading["chat"].error or ""
    assert reading["chat"].load is None and error.endswith("cannot be reached: connection refused"), error
    assert "\n" not in error and "Error" not in error
