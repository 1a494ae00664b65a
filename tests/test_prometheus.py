"""A real Prometheus scraping emulated vLLM pods driven by the real trace: PromQL and direct scrape agree.

Real: Debian's Prometheus, HTTP scraping over loopback, the PromQL queries, the direct scraper.
Stand-in: the vLLM servers (emulated pages in vLLM V1's exact format), fed from the ServeGen trace.
"""

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from offhours.scripts.cluster.base import Pod
from offhours.scripts.metrics.emulator import EmulatedServer
from offhours.scripts.metrics.load import CounterSample
from offhours.scripts.metrics.sources import DirectSource, PrometheusSource, ServiceTarget
from offhours.scripts.trace import load_trace

from .fleet import EmulatedService, free_port, start_fleet
from .prometheus_fixture import running_prometheus, wait_for_targets

pytestmark = pytest.mark.prometheus

TRACE = load_trace()
MINUTE = 600  # 10:00 of day 1, a steady ten-minute piece of the trace


class TraceFeeder:
    """Feed each service its share of the trace's load at `MINUTE`, in real time, every 100 ms."""

    def __init__(self, services: list[EmulatedService], shares: list[float]) -> None:
        self.services, self.shares = services, shares
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def rps(self, share: float) -> tuple[float, float, float]:
        return (TRACE.requests[MINUTE] / 60 * share, TRACE.input_tokens[MINUTE] / 60 * share,
                TRACE.output_tokens[MINUTE] / 60 * share)

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(0.1):
            now = time.monotonic()
            dt, last = now - last, now
            for svc, share in zip(self.services, self.shares):
                req, prompt, gen = self.rps(share)
                for server in svc.servers:
                    n = len(svc.servers)
                    server.feed(req * dt / n, prompt * dt / n, gen * dt / n, dt, latency_s=2.0, waiting=0.5)

    def __enter__(self) -> "TraceFeeder":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture(scope="module")
def fleet_and_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[EmulatedService], str]]:
    services = [EmulatedService("chat", 6, subnet=61, port=free_port()),
                EmulatedService("code", 3, subnet=62, port=free_port())]
    # An older vLLM in the fleet: one engine, no engine label, the legacy KV-cache name.
    services[1].servers[0] = EmulatedServer(engines=1, legacy=True)
    fleet = start_fleet(services)
    try:
        with running_prometheus(services, tmp_path_factory.mktemp("prometheus")) as url:
            wait_for_targets(url, 9)
            yield services, url
    finally:
        fleet.stop()


def _targets(services: list[EmulatedService], previous: dict[str, dict[str, CounterSample]] | None = None) -> list[ServiceTarget]:
    return [ServiceTarget(s.name, [Pod(f"{s.name}-{i}", ip) for i, ip in enumerate(s.ips)],
                          (previous or {}).get(s.name, {})) for s in services]


def test_promql_and_direct_scrape_read_the_same_load(fleet_and_prometheus: tuple[list[EmulatedService], str]) -> None:
    services, url = fleet_and_prometheus
    shares = [0.004, 0.001]
    # Each emulated service listens on its own port, so the direct path reads them one by one.
    with TraceFeeder(services, shares) as feeder:
        time.sleep(3)
        t0 = time.time()
        first = {s.name: DirectSource(port=s.port).read(_targets([s]), t0)[s.name] for s in services}
        time.sleep(20)
        t1 = time.time()
        second = {s.name: DirectSource(port=s.port).read(_targets([s], {s.name: first[s.name].samples}), t1)[s.name]
                  for s in services}
        promql = PrometheusSource(url, window="20s").read(_targets(services), t1)
    for svc, share in zip(services, shares):
        want_req, want_prompt, want_gen = feeder.rps(share)
        d, p = second[svc.name], promql[svc.name]
        assert d.error is None and p.error is None, (d.error, p.error)
        assert d.load is not None and p.load is not None
        assert d.load.pods_read == p.load.pods_read == len(svc.servers)
        for name, want in (("request_rate", want_req), ("prompt_token_rate", want_prompt),
                           ("generation_token_rate", want_gen)):
            direct_value, prom_value = getattr(d.load, name), getattr(p.load, name)
            assert direct_value == pytest.approx(want, rel=0.08), (svc.name, name)
            assert prom_value == pytest.approx(direct_value, rel=0.1), (svc.name, name)
        assert p.load.waiting == pytest.approx(d.load.waiting, rel=0.05)
        assert p.load.running == pytest.approx(d.load.running, rel=0.15)
        assert p.load.kv_cache_usage == pytest.approx(d.load.kv_cache_usage, rel=0.15)
        assert p.load.age_seconds < 5


def test_prometheus_without_the_service_reports_missing_data(fleet_and_prometheus: tuple[list[EmulatedService], str]) -> None:
    _, url = fleet_and_prometheus
    reading = PrometheusSource(url).read([ServiceTarget("unknown", [Pod("x-0", "127.0.0.9")])], time.time())
    assert reading["unknown"].load is None
    assert "no vLLM series with service='unknown'" in (reading["unknown"].error or "")


def test_unreachable_prometheus_is_an_error_not_zero(tmp_path: Path) -> None:
    reading = PrometheusSource(f"http://127.0.0.1:{free_port()}", timeout=1).read(
        [ServiceTarget("chat", [Pod("chat-0", "127.0.0.9")])], time.time())
    assert reading["chat"].load is None and "ConnectionError" in (reading["chat"].error or "")
