"""The demo's pure parts: the accelerated trace clock, the load scale, and what changed between snapshots."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from offhours.scripts.cli.demo import (
    CAPACITY_RPS,
    Snapshot,
    TraceClock,
    changes,
    demo_gate_config,
    finished,
    load_scale,
    pipeline_parameters,
)
from offhours.scripts.config.loader import parse_config
from offhours.scripts.policy.forecast import reaction_seconds
from offhours.scripts.simulate.trace import Trace


def test_clock_runs_speed_times_faster_and_labels_day_and_time() -> None:
    clock = TraceClock(start_minute=15 * 60, speed=120, started=100.0)
    assert clock.minute(100.0) == 900
    assert clock.minute(130.0) == 960  # 30 s at 120x: one trace hour
    assert clock.label(130.0) == "day 1 16:00"
    assert clock.label(100.0 + 9 * 30) == "day 2 00:00"


@given(st.lists(st.floats(1, 1e6), min_size=10, max_size=100), st.integers(2, 64), st.floats(0, 2))
def test_the_90th_percentile_minute_needs_all_replicas_but_half_of_one(requests: list[float], replicas: int,
                                                                       headroom: float) -> None:
    # Invariant: after scaling, the window's 90th-percentile load with headroom is (replicas - 0.5) replicas' worth,
    # so the busiest tenth of the minutes needs more than that: the gate has to reclaim.
    trace = Trace(np.array(requests), np.zeros(len(requests)), np.zeros(len(requests)))
    scale = load_scale(trace, 0, len(requests), replicas, headroom)
    level_rps = float(np.percentile(requests, 90)) / 60 * scale
    assert abs(level_rps * (1 + headroom) / CAPACITY_RPS - (replicas - 0.5)) < 1e-6 * replicas


def test_changes_name_each_difference_once() -> None:
    first = Snapshot(16, 16, "", {"demo-a": "Pending, parked"})
    assert changes(None, first) == ["chat: 16/16 replicas ready", "job demo-a: Pending, parked"]
    second = Snapshot(14, 14, "lend: required 9, lent 2, target 14 (load low)", {"demo-a": "Running, admitted"})
    assert changes(first, second) == [
        "chat: 14/14 replicas ready (was 16/16)",
        "gate: lend: required 9, lent 2, target 14 (load low)",
        "job demo-a: Running, admitted (was Pending, parked)",
    ]
    assert changes(second, second) == []


def test_local_parameters_schedule_on_the_kwok_gpu_nodes() -> None:
    params = pipeline_parameters("r1", 100)
    assert params["node-selector"] == '{"offhours.io/pool": "inference"}'
    assert params["sft-gpus"] == "4" and params["image"].startswith("offhours.local/")
    assert params["sft-args"] == '["--steps", "100", "--every", "50", "--step-seconds", "0.05"]'


def test_a_run_stopped_by_the_gate_is_not_the_end() -> None:
    stopped = Snapshot(16, 16, "", {"a": "Failed, preempted", "a-p1": "Running, parked"})
    assert not finished(stopped)
    assert finished(Snapshot(16, 16, "", {"a": "Failed, preempted", "a-p1": "Succeeded, returned"}))
    assert finished(Snapshot(16, 16, "", {"a": "Failed, returned"}))  # failed on its own


@pytest.mark.parametrize("speed", [10.0, 30.0, 60.0, 120.0, 600.0])
def test_gate_durations_span_the_same_trace_time_at_any_speed(speed: float) -> None:
    # Invariant: the stabilisation window is 15 trace minutes and the look-ahead's reaction time
    # (the tick aside) 6 trace minutes, whatever the replay speed; at 60x that is 15 s and 6 s of
    # the wall clock, not the 6 trace hours that real-time values (240 s + 120 s) would span.
    (policy,) = parse_config(demo_gate_config(18473, 16, speed)).services
    assert policy.stabilization_seconds * speed == 900.0
    assert (policy.cold_start_seconds or 0.0) * speed == 240.0 and policy.max_grace_seconds * speed == 120.0
    assert reaction_seconds(policy, 10.0) == 10.0 + 360.0 / speed
