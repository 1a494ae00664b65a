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
from tests.support.gate_scrape import record_served_reclaims, scraped_gate_page
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


def test_the_return_path_measured_by_the_gate_goes_into_the_fleet_file(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The gate's page (six served reclaims of known phases) scraped by a real Prometheus, read back by calibrate.

    Each value written is the quantile Prometheus' own histogram_quantile gives over the same range: the
    victims' exit for graceMinutes, and scheduling + start + serving for coldStartMinutes.
    """
    from offhours.scripts.cli.report import return_path_lines
    from offhours.scripts.history.promrange import query_range
    from offhours.scripts.simulate.fleet import load_fleet

    config, fleet, out = tmp_path / "gate.yaml", tmp_path / "fleet.yaml", tmp_path / "measured.yaml"
    config.write_text(yaml.safe_dump({"services": {"chat": {"capacity": CONFIGURED}}}))
    fleet.write_text(yaml.safe_dump({"services": {"chat": {"baseline": 4, "capacity": {"requestsPerSecond": 2.0}}},
                                     "tickMinutes": 1, "coldStartMinutes": 4, "graceMinutes": 0.5}))
    with scraped_gate_page(tmp_path, ["chat"]) as (gate_page, url):
        start = math.floor(time.time())
        time.sleep(6)  # a range long beside the scrape interval
        record_served_reclaims(gate_page, "chat", 6)
        time.sleep(6)
        end = math.floor(time.time())
        code = main(["calibrate", "--return-path", "--prometheus", url, "--config", str(config), "--fleet",
                     str(fleet), "--start", _iso(start), "--end", _iso(end), "--out", str(out)])
        expected = {}
        for phase in ("victims_exit", "scheduling", "start", "serving"):
            promql = (f'histogram_quantile(0.95, sum by (le) (increase(offhours_return_phase_seconds_bucket'
                      f'{{service="chat",phase="{phase}"}}[{end - start}s])))')
            expected[phase] = float(next(iter(query_range(url, promql, end, 60.0, 1).values()))[0])
        report = {line.split()[1]: line.split()[2:] for line in return_path_lines(url, ["chat"], end - start, end)
                  if line.startswith("chat")}
    text = capsys.readouterr().out
    assert code == 0, text
    measured = load_fleet(str(out))
    written = yaml.safe_load(out.read_text())
    assert written["graceMinutes"] == pytest.approx(expected["victims_exit"] / 60, rel=1e-3)
    assert written["coldStartMinutes"] == pytest.approx(
        sum(expected[p] for p in ("scheduling", "start", "serving")) / 60, rel=1e-3)
    assert written["coldStartMinutes"] != 4 and written["graceMinutes"] != 0.5, "measured, not the configured"
    assert measured is not None and "p95 over 6 served reclaim(s)" in text, text
    # `offhours report --prometheus`: the same reclaims and quantiles, per phase.
    assert set(report) == {"decision", "victims_exit", "scheduling", "start", "serving", "total"}
    assert report["victims_exit"] == ["6", report["victims_exit"][1], f"{expected['victims_exit']:.1f}"]
    assert report["serving"][0] == "6" and report["serving"][2] == f"{expected['serving']:.1f}"


def test_too_few_reclaims_in_the_history_keep_the_fleet_file_as_it_is(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    config, fleet, out = tmp_path / "gate.yaml", tmp_path / "fleet.yaml", tmp_path / "measured.yaml"
    config.write_text(yaml.safe_dump({"services": {"chat": {"capacity": CONFIGURED}}}))
    fleet.write_text(yaml.safe_dump({"services": {"chat": {"baseline": 4, "capacity": {"requestsPerSecond": 2.0}}}}))
    with scraped_gate_page(tmp_path, ["chat"]) as (_, url):
        start = math.floor(time.time())
        time.sleep(3)
        code = main(["calibrate", "--return-path", "--prometheus", url, "--config", str(config), "--fleet",
                     str(fleet), "--start", _iso(start), "--end", _iso(math.floor(time.time())), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and "not enough evidence: 0 served reclaim(s)" in err and not out.exists(), err
