"""The gate's own /metrics page served on loopback and scraped by a real Prometheus, and reclaims recorded on it."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from offhours.scripts.gate.metrics_server import serve_metrics
from offhours.scripts.gate.return_metrics import ReturnMetrics
from offhours.scripts.policy.return_phases import Observation, Tracker, begin, observe
from tests.support.prometheus_fixture import running_prometheus, wait_for_targets


@contextmanager
def scraped_gate_page(workdir: Path, services: list[str]) -> Iterator[tuple[ReturnMetrics, str]]:
    """Serve a fresh gate page for `services`, scraped every second; yield it and the Prometheus URL once up."""
    page = ReturnMetrics(services)
    server = serve_metrics(page.render, 0, "127.0.0.1")
    scrape = {"job_name": "offhours-gate", "scrape_interval": "1s",
              "static_configs": [{"targets": [f"127.0.0.1:{server.server_address[1]}"]}]}
    try:
        with running_prometheus([], workdir, extra_scrape_configs=[scrape]) as url:
            wait_for_targets(url, 1)
            yield page, url
    finally:
        server.shutdown()
        server.server_close()


def record_served_reclaims(page: ReturnMetrics, service: str, count: int) -> None:
    """Record `count` served reclaims of known phases (k-th: seen at 0.4 s, then decided, victims gone, scheduled,
    Ready and serving at 20.4, 22.4, 30.4 and 130.4 s, each 2·k s later), on the gate's monotonic seconds."""
    for k in range(count):
        t = 1000.0 * k
        tracker, _ = begin(Tracker(), service, t, t + 0.4)
        closed = []
        for i, at in enumerate((20.4 + 2 * k, 22.4 + 2 * k, 30.4 + 2 * k, 130.4 + 2 * k)):
            tracker, closed = observe(tracker, service, Observation(*(j <= i for j in range(4))), t + at)
        page.record(closed[0])
