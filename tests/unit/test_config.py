"""The gate configuration: the example is valid; each invalid field is refused with its name."""

from pathlib import Path
from typing import Any

import pytest
import yaml

from offhours.scripts.config.loader import load_config, parse_config
from offhours.scripts.policy.config import ConfigError

EXAMPLE = Path(__file__).resolve().parents[2] / "cronworkflows" / "gate-config.example.yaml"


def _example() -> dict[str, Any]:
    return dict(yaml.safe_load(EXAMPLE.read_text()))


def test_example_config_is_valid_and_merges_defaults() -> None:
    config = load_config(EXAMPLE)
    chat = config.service("chat-llama")
    assert chat.headroom == 0.3 and chat.trend is True and chat.capacity.requests_per_second == 12
    assert chat.volatility_headroom_max == 1.0 and chat.lend_hysteresis == 2
    assert chat.schedule.mode == "continuous"
    code = config.service("code-qwen")
    assert code.schedule.mode == "window" and code.schedule.timezone == "Asia/Shanghai"
    assert config.workflow_namespace == "research" and config.metrics.source == "prometheus"


@pytest.mark.parametrize(
    "path, value, message",
    [
        (["services", "chat-llama", "headroom"], -0.1, "services.chat-llama.headroom: -0.1 is less than the minimum"),
        (["services", "chat-llama", "capacity"], {}, "services.chat-llama.capacity: {} should be non-empty"),
        (["services", "chat-llama", "capacity", "rps"], 3, "'rps' was unexpected"),
        (["services", "chat-llama", "gpusPerReplica"], "four", "services.chat-llama.gpusPerReplica: 'four' is not of type"),
        (["schedule"], {"mode": "window", "start": "25:00", "end": "08:00"}, "schedule.start: '25:00' does not match"),
        (["schedule"], {"mode": "window"}, "schedule: 'start' is a required property"),
        (["schedule"], {"mode": "window", "start": "20:00", "end": "08:00", "timezone": "Mars/Olympus"},
         "schedule.timezone: unknown time zone 'Mars/Olympus'"),
        (["metrics", "source"], "graphite", "metrics.source: 'graphite' is not one of"),
        (["metrics", "prometheus", "url"], "prometheus:9090", "metrics.prometheus.url: 'prometheus:9090' does not match"),
        (["failSafe", "failedTicksBeforeReclaim"], 0, "failSafe.failedTicksBeforeReclaim: 0 is less than the minimum"),
        (["tickSeconds"], 1, "tickSeconds: 1 is less than the minimum of 10"),
        (["reclaimCheckSeconds"], -5, "reclaimCheckSeconds: -5 is less than the minimum of 0"),
        (["reclaimCheckSeconds"], 2.5, "reclaimCheckSeconds: 2.5 is not of type 'integer'"),
        (["reclaimCheckSeconds"], 90, "reclaimCheckSeconds: 90 is longer than tickSeconds 60"),
        (["surprise"], True, "'surprise' was unexpected"),
    ],
)
def test_invalid_field_is_named(path: list[str], value: Any, message: str) -> None:
    raw = _example()
    node = raw
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(ConfigError) as err:
        parse_config(raw)
    assert message in str(err.value)


def test_service_without_capacity_anywhere_is_refused() -> None:
    raw = {"metrics": {"source": "direct"}, "services": {"chat": {"headroom": 0.2}}}
    with pytest.raises(ConfigError, match="services.chat.capacity: required"):
        parse_config(raw)


def test_unreadable_file_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "gate.yaml"
    bad.write_text("services: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")


def test_a_sample_age_bound_shorter_than_a_tick_is_refused() -> None:
    raw = {"namespace": "s", "tickSeconds": 120, "metrics": {"source": "direct", "maxSampleAgeSeconds": 60},
           "services": {"chat": {"capacity": {"requestsPerSecond": 1}}}}
    with pytest.raises(ConfigError, match="maxSampleAgeSeconds: 60 is shorter than tickSeconds 120"):
        parse_config(raw)


def test_reclaim_checks_default_to_every_15_s_or_every_tick_if_ticks_are_shorter() -> None:
    raw = {"namespace": "s", "metrics": {"source": "direct"}, "services": {"chat": {"capacity": {"requestsPerSecond": 1}}}}
    assert parse_config(raw).reclaim_check_seconds == 15
    assert parse_config({**raw, "tickSeconds": 10}).reclaim_check_seconds == 10
    assert parse_config({**raw, "reclaimCheckSeconds": 0}).reclaim_check_seconds == 0  # off: full ticks only
