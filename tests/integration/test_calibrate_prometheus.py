"""Capacity measured, not guessed: emulated vLLM pods of known capacity driven past it, scraped by a real Prometheus.

Real: Debian's Prometheus scraping over loopback, range queries, `offhours calibrate` as a user runs it.
Stand-in: the vLLM servers (the suite's emulator), each serving at most CAPACITY: offered half of it
first (no queue), then more than it (it serves CAPACITY and requests wait). The estimate must be
within 10% of CAPACITY; a service that never saturated has "not enough evidence" and keeps its
configured capacity. Steps of 2 s over 1 s scrapes stand in for minutes over 15 s scrapes.
"""

import math
import time
from pathlib import Path

import pytest
import yaml

from offhours.scripts.cli.main import main
from offhours.scripts.config.loader import load_config
from tests.support.fleet import EmulatedService, free_port, start_fleet
from tests.support.prometheus_fixture import running_prometheus, wait_for_targets

pytestmark = pytest.mark.prometheus

CAPACITY = (6.0, 900.0, 120.0)  # requests, prompt tokens, generation tokens per second, per replica
STEP = 2
CONFIGURED = {"requestsPerSecond": 3.0}


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def test_capacity_of_saturated_replicas_within_ten_percent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two replicas at their capacity with a queue: the estimate is that capacity; an idle service keeps its config."""
    busy = EmulatedService("busy", 2, subnet=71, port=free_port())
    idle = EmulatedService("idle", 1, subnet=72, port=free_port())
    for server in busy.servers + idle.servers:
        server.set_gauges(4.0, 0.0, 0.2)
        server.steady(*(0.5 * c for c in CAPACITY))  # below capacity: nothing waits
    fleet = start_fleet([busy, idle])
    config = tmp_path / "gate.yaml"
    config.write_text(yaml.safe_dump({"services": {
        "busy": {"capacity": CONFIGURED, "gpusPerReplica": 2}, "idle": {"capacity": CONFIGURED}}}))
    try:
        with running_prometheus([busy, idle], tmp_path) as url:
            wait_for_targets(url, 3)
            start = math.ceil(time.time() / STEP) * STEP
            time.sleep(start + 10 - time.time())
            for server in busy.servers:  # offered more than they serve: they serve CAPACITY, 7 requests wait
                server.steady(*CAPACITY)
                server.set_gauges(8.0, 7.0, 0.9)
            time.sleep(30)
            end = math.floor((time.time() - 2) / STEP) * STEP
            code = main(["calibrate", "--prometheus", url, "--config", str(config), "--start", _iso(start),
                         "--end", _iso(end), "--step", f"{STEP}s", "--out", str(tmp_path / "capacity.yaml")])
    finally:
        fleet.stop()
    out = capsys.readouterr().out
    assert code == 0, out
    assert "not enough evidence" in [line for line in out.splitlines() if line.startswith("idle")][0]
    written = load_config(tmp_path / "capacity.yaml")
    got = written.service("busy").capacity
    for estimate, truth in zip((got.requests_per_second, got.prompt_tokens_per_second,
                                got.generation_tokens_per_second), CAPACITY):
        assert estimate == pytest.approx(truth, rel=0.10)
    assert written.service("busy").gpus_per_replica == 2
    assert written.service("idle").capacity.requests_per_second == CONFIGURED["requestsPerSecond"]  # it stands
