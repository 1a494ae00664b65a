"""The simulator's accounting on hand-made traces with known answers, its references, and its inputs."""

import dataclasses
import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from datetime import time as clock
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import pytest

from offhours.scripts.cli.main import main
from offhours.scripts.policy.config import Schedule
from offhours.scripts.policy.decide import ServiceState
from offhours.scripts.policy.forecast import forecast_required, history_ticks
from offhours.scripts.policy.serving import Rules, ServingInput, serving_decision
from offhours.scripts.policy.window import opening, seconds_left, seconds_left_at_clock
from offhours.scripts.simulate import engine as E
from offhours.scripts.simulate.fleet import (
    FleetError,
    JobSpec,
    default_fleet,
    generated_jobs,
    parse_fleet,
    parse_jobs,
)
from offhours.scripts.simulate.report import queue_delays, simulate
from offhours.scripts.simulate.trace import Trace, TraceError, load_trace, parse_trace


def trace_of(rps: list[float], name: str = "hand-made") -> Trace:
    """A trace whose minute i carries rps[i] requests per second (and no tokens)."""
    lines = ["minute,requests,input_tokens,output_tokens"] + [f"{i},{r * 60},0,0" for i, r in enumerate(rps)]
    return parse_trace("\n".join(lines) + "\n", name)


def fleet_of(**service: Any) -> Any:
    # No look-ahead and no hysteresis unless a test turns them on: the numbers are the capacity model's alone.
    svc = {"baseline": 10, "capacity": {"requestsPerSecond": 1.0}, "headroom": 0.0, "minReplicas": 1,
           "stabilizationSeconds": 300, "maxLendStep": 10, "trend": False, "volatilityHeadroomMax": 0.0,
           "lendHysteresis": 0, **service}
    return parse_fleet({"tickMinutes": 1, "coldStartMinutes": 4, "graceMinutes": 2, "gpuHourPrice": 3.0,
                        "fixedWindow": {"startHour": 20, "endHour": 8, "replicas": {"chat": 3}},
                        "services": {"chat": svc}})


def jobs_of(*jobs: tuple[int, float, float]) -> list[JobSpec]:
    return [JobSpec(f"job-{i}", "chat", replicas, hours, ckpt) for i, (replicas, hours, ckpt) in enumerate(jobs)]


def run(trace: Trace, fleet: Any, jobs: list[JobSpec]) -> E.ServiceSim:
    spec = fleet.services[0]
    sim = E.ServiceSim(spec, fleet, E.service_rates(trace, spec), [E.SimJob(j) for j in jobs])
    sim.run(E.GateController(sim))
    return sim


def capacity(sim: E.ServiceSim) -> np.ndarray:
    return E.events_to_array(sim.capacity_events, sim.spec.baseline, sim.rates.shape[1])


def lent(sim: E.ServiceSim) -> np.ndarray:
    return E.events_to_array(sim.lent_events, 0, sim.rates.shape[1])


def test_step_down_lends_after_the_stabilisation_window() -> None:
    sim = run(trace_of([8.0] * 10 + [2.0] * 50), fleet_of(), jobs_of((4, 100, 30), (4, 100, 30)))
    level = lent(sim)
    # The 5-minute window must be clear of the 8-replica minutes (rates up to tick 10 include them).
    assert level[:16].max() == 0
    assert level[16] == 8 and level[-1] == 8
    assert capacity(sim)[16] == 2


def test_step_up_reclaims_at_the_first_tick_and_counts_the_slo_minutes_it_cannot_avoid() -> None:
    sim = run(trace_of([2.0] * 30 + [6.0] * 30), fleet_of(), jobs_of((4, 100, 30), (4, 100, 30)))
    cap, level = capacity(sim), lent(sim)
    assert level[29] == 8
    # The rise at minute 30 is seen at the tick of minute 31; stopped jobs free their GPUs after the
    # 2-minute grace, the replicas serve after a 4-minute cold start: capacity back at minute 37.
    assert level[31] == 4 and cap[36] == 2 and cap[37] == 6
    short = sim.demand > cap + 1e-9
    assert int(short.sum()) == 7  # minutes 30..36: the price of no headroom


def test_headroom_covering_the_step_means_no_slo_minute() -> None:
    sim = run(trace_of([2.0] * 30 + [3.0] * 30), fleet_of(headroom=0.5), jobs_of((1, 100, 30)) * 1
              + [JobSpec(f"small-{i}", "chat", 1, 100, 30) for i in range(10)])
    assert int((sim.demand > capacity(sim) + 1e-9).sum()) == 0
    assert lent(sim).max() == 7  # 10 - ceil(2 x 1.5)


def test_spike_shorter_than_the_cold_start() -> None:
    rps = [2.0] * 20 + [6.0] * 2 + [2.0] * 38
    sim = run(trace_of(rps), fleet_of(), [JobSpec(f"j{i}", "chat", 1, 100, 30) for i in range(10)])
    cap = capacity(sim)
    short = sim.demand > cap + 1e-9
    assert list(np.flatnonzero(short)) == [20, 21]  # over before any replica came back
    # Reclaimed at the first tick that saw it (minute 21: the last minute's rate needs 6) and, while
    # the queue lasts through the cold start, one replica more a tick (the waiting-requests guard).
    assert lent(sim)[20] == 8 and lent(sim)[21] == 4 and lent(sim)[22] == 3
    assert lent(sim)[-1] == 8  # and lent again once the window is clear


def test_job_preempted_just_before_its_checkpoint_loses_that_much_work() -> None:
    # The job starts at the tick of minute 6 (window clear); the rise at minute 40 is seen by the reclaim
    # check 15 s into it: stopped at 40.25, after 34.25 minutes, its checkpoint at 30.
    rps = [2.0] * 40 + [9.0] * 20
    sim = run(trace_of(rps), fleet_of(), jobs_of((2, 10, 30)))
    job = sim.jobs[0]
    assert job.preemptions == 1
    assert job.lost_minutes == pytest.approx(34.25 - 30)
    assert job.progress == pytest.approx(30)


def test_without_reclaim_checks_the_rise_waits_for_the_next_tick() -> None:
    rps = [2.0] * 40 + [9.0] * 20
    fleet = dataclasses.replace(fleet_of(), reclaim_check_seconds=0.0)
    sim = run(trace_of(rps), fleet, jobs_of((2, 10, 30)))
    assert sim.jobs[0].lost_minutes == pytest.approx(35 - 30)  # stopped at the tick of minute 41
    assert sim.reaction_minutes == 1 + 2 + 4


def test_a_reclaim_check_brings_capacity_back_a_minute_sooner_than_the_tick() -> None:
    # Grace 30 s, cold start 4 min: seen at 30.25, serving at 34.75 (minute 35); by the tick, at 35.5 (minute 36).
    trace = trace_of([2.0] * 30 + [6.0] * 30)
    jobs = jobs_of((4, 100, 30), (4, 100, 30))
    checked = run(trace, dataclasses.replace(fleet_of(), grace_minutes=0.5), jobs)
    ticked = run(trace, dataclasses.replace(fleet_of(), grace_minutes=0.5, reclaim_check_seconds=0.0), jobs)
    assert capacity(checked)[34] == 2 and capacity(checked)[35] == 6
    assert capacity(ticked)[35] == 2 and capacity(ticked)[36] == 6
    assert checked.reaction_minutes == 0.25 + 0.5 + 4


def test_a_finished_job_gives_its_replicas_back_at_once() -> None:
    sim = run(trace_of([2.0] * 60), fleet_of(), jobs_of((3, 0.25, 5)))  # 15 minutes of work
    job = sim.jobs[0]
    assert job.done_at == pytest.approx(6 + 15)
    cap = capacity(sim)
    assert cap[20] == 7 and cap[21 + 4] == 10  # exit hook at minute 21, cold start 4


def reference_lent(trace: Trace, fleet: Any, spec: Any, jobs: list[JobSpec]) -> np.ndarray:
    """The gate's loop, every tick: events, `decide` with the state it returned last tick, `plan` on a change.

    The look-ahead floor is computed per tick from the history, as the gate computes it.
    """
    sim = E.ServiceSim(spec, fleet, E.service_rates(trace, spec), [E.SimJob(j) for j in jobs])
    policy, tick_s = spec.policy, fleet.tick_minutes * 60.0
    reaction = sim.reaction_minutes * 60.0
    keep = history_ticks(policy, tick_s, reaction)
    state = ServiceState()
    for i, minute in enumerate(sim.ticks.tolist()):
        sim.process_events(float(minute))
        floor = forecast_required(sim.needs[max(0, i + 1 - keep):i + 1], policy, tick_s, reaction)
        # The gate's own reading of its schedule, at the wall time of the tick (minute 0: a local midnight): its
        # end met with the fleet's return bound, a tick between decisions.
        if fleet.start_time is None:
            local = datetime(2026, 1, 1, tzinfo=ZoneInfo(policy.schedule.timezone)) + timedelta(minutes=minute)
            left = seconds_left_at_clock(policy.schedule, local.time())
        else:
            left = seconds_left(policy.schedule, datetime.fromtimestamp(fleet.start_time + minute * 60.0, timezone.utc))
        window = opening(left, E.return_minutes(spec, fleet) * 60.0, tick_s)
        given = ServingInput(policy, spec.baseline, sim.lent, sim.load_at(i), None, state, floor, window)
        d = serving_decision(Rules(tick_s, float("inf"), 3), given, minute * 60.0)
        state = d.state
        if d.target_lent != sim.lent:
            sim.apply(float(minute), d.target_lent, max(d.ceiling, d.target_lent))
    sim.process_events(float(trace.minutes))
    return lent(sim)


def two_days() -> Trace:
    """The bundled trace's first two days (the second has 1.8x steps within a minute)."""
    full = load_trace()
    return Trace(full.requests[:2880], full.input_tokens[:2880], full.output_tokens[:2880], "two days")


@pytest.mark.parametrize("case, fleet_changes, policy_changes", [
    ("defaults", {}, {}),
    ("90 s window, 1-minute ticks", {}, {"stabilization_seconds": 90.0}),
    ("900 s window, 7-minute ticks", {"tick_minutes": 7}, {}),
    ("low headroom: the queue guard fires", {}, {"headroom": 0.2}),
    ("every look-ahead term on", {}, {"headroom": 0.3, "trend": True, "volatility_headroom_max": 0.9,
                                      "time_of_day_days": 1, "volatility_lookback_seconds": 1800.0}),
    ("per-job grace and per-service cold start", {}, {"cold_start_seconds": 45.0, "max_grace_seconds": 50.0}),
    ("a lending window, minute 0 a local midnight", {},
     {"schedule": Schedule("window", clock(22, 0), clock(7, 30), "UTC")}),
    ("a lending window in a time zone, from a history's start", {"start_time": 1_762_000_000.0},
     {"schedule": Schedule("window", clock(1, 0), clock(13, 0), "America/New_York"), "stabilization_seconds": 420.0}),
])
def test_engine_lends_exactly_what_the_every_tick_gate_loop_lends(case: str, fleet_changes: dict[str, Any],
                                                                   policy_changes: dict[str, Any]) -> None:
    """Invariant: skipping ticks and carrying the state changes no lent replica-minute, on every service."""
    import dataclasses

    trace = two_days()
    base = default_fleet(trace)
    fleet = dataclasses.replace(base, **fleet_changes, services=tuple(
        dataclasses.replace(s, policy=dataclasses.replace(s.policy, **policy_changes)) for s in base.services))
    jobs = generated_jobs(fleet)
    if "per-job grace" in case:
        jobs = [dataclasses.replace(j, checkpoint_seconds=float(10 * (k % 9))) for k, j in enumerate(jobs)]
    total = 0.0
    for spec in fleet.services:
        mine = [j for j in jobs if j.service == spec.name]
        sim = E.ServiceSim(spec, fleet, E.service_rates(trace, spec), [E.SimJob(j) for j in mine])
        sim.run(E.GateController(sim))
        expected = reference_lent(trace, fleet, spec, mine)
        assert np.array_equal(lent(sim), expected), f"{case}: {spec.name}"
        total += float(expected.sum())
        allowed = E.lending_minutes(spec, fleet, np.arange(trace.minutes))
        if allowed is not None:  # nothing lent where the gate may not lend, after the minute it reclaims in
            outside = ~allowed & ~np.concatenate(([False], allowed[:-1]))
            assert not expected[outside].any(), f"{case}: {spec.name} lends outside its window"
    assert total > 0  # every case lends: a simulator that never lends would compare equal to nothing


def test_window_not_a_multiple_of_the_tick_still_lends() -> None:
    """A 90 s window with 1-minute ticks lent nothing when the state was rebuilt from 90 // 60 ticks."""
    sim = run(trace_of([2.0] * 60), fleet_of(stabilizationSeconds=90), jobs_of((4, 100, 30), (4, 100, 30)))
    level = lent(sim)
    # Ticks at minutes 1, 2, 3...: the window (90 s) is covered from the tick of minute 3 on.
    assert level[:3].max() == 0 and level[3] == 8 and level[-1] == 8


def test_report_references_and_sums_on_a_hand_made_day() -> None:
    day = [2.0] * (20 * 60) + [8.0] * (4 * 60)  # quiet until 20:00, busy after
    trace = trace_of(day)
    fleet = fleet_of(headroom=0.25)
    result = simulate(trace, fleet, [JobSpec(f"j{i}", "chat", 1, 2, 30) for i in range(40)])
    gate, fixed, oracle = (result.reports[m] for m in ("gate", "fixed-window", "oracle"))
    # The fixed window lends 3 replicas (12 GPUs) from 20:00, exactly when the load needs them all.
    assert fixed.avg_gpus_lent == pytest.approx(3 * 4 * 12 / 24, rel=0.02)
    assert fixed.slo_minutes > 0 and gate.slo_minutes == 0
    assert gate.gpu_hours_lent > fixed.gpu_hours_lent
    assert gate.gpu_hours_lent <= oracle.gpu_hours_lent + 1e-6
    # 20 quiet hours hold all 40 jobs (1 replica = 4 GPUs, 2 hours each): 320 GPU-hours of work, none lost
    # to a preemption, at the fleet's price of 3.0 per GPU-hour.
    assert (gate.work_done_gpu_hours, gate.gpu_hours_used) == (pytest.approx(40 * 4 * 2), pytest.approx(40 * 4 * 2))
    assert gate.saving == pytest.approx(960.0)
    assert fixed.work_done_gpu_hours < fixed.gpu_hours_used  # its window closes on jobs mid-way


def test_default_fleet_frees_52_gpus_in_the_fixed_window() -> None:
    fleet = default_fleet(load_trace())
    assert sum(fleet.fixed_window_replicas.values()) * 4 == 52
    assert all(s.policy.gpus_per_replica == 4 for s in fleet.services)


@pytest.mark.parametrize(
    "text, message",
    [
        ("minute,requests\n0,1\n", "line 1: header must be minute,requests,input_tokens,output_tokens"),
        ("minute,requests,input_tokens,output_tokens\n0,1,2,3\n1,x,2,3\n", "line 3: requests 'x' is not a number"),
        ("minute,requests,input_tokens,output_tokens\n0,1,2,3\n2,1,2,3\n", "line 3: minute 2 out of order"),
        ("minute,requests,input_tokens,output_tokens\n0,-1,2,3\n", "line 2: requests '-1' must be a finite number"),
        ("minute,requests,input_tokens,output_tokens\n0,1,2\n", "line 2: expected 4 columns, got 3"),
        ("minute,requests,input_tokens,output_tokens\n", "no data rows"),
    ],
)
def test_malformed_trace_is_named(text: str, message: str) -> None:
    with pytest.raises(TraceError, match=message):
        parse_trace(text, "t.csv")


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"services": {"chat": {"baseline": 0, "capacity": {"requestsPerSecond": 1}}}}, "services.chat.baseline: 0"),
        ({"services": {"chat": {"baseline": 4}}}, "services.chat: 'capacity' is a required property"),
        ({"services": {}}, "services: {} should be non-empty"),
        ({"coldStartMinutes": -1, "services": {"c": {"baseline": 1, "capacity": {"requestsPerSecond": 1}}}},
         "coldStartMinutes: -1 is less than the minimum"),
    ],
)
def test_malformed_fleet_is_named(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(FleetError, match=message):
        parse_fleet(raw)


def test_malformed_jobs_are_named() -> None:
    with pytest.raises(FleetError, match=r"jobs.1.replicas: 0 is less than the minimum"):
        parse_jobs({"jobs": [{"service": "chat", "replicas": 1, "workHours": 1},
                             {"service": "chat", "replicas": 0, "workHours": 1}]})


def test_cli_simulates_files_and_writes_json_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "t.csv").write_text("minute,requests,input_tokens,output_tokens\n"
                                    + "".join(f"{i},{120 if i < 600 else 480},0,0\n" for i in range(1440)))
    (tmp_path / "fleet.json").write_text(json.dumps({"services": {"chat": {
        "baseline": 10, "capacity": {"requestsPerSecond": 1}}}}))
    (tmp_path / "jobs.yaml").write_text("jobs:\n" + "".join(
        "  - {service: chat, replicas: 1, workHours: 3, checkpointMinutes: 20}\n" for _ in range(12)))
    code = main(["simulate", "--trace", str(tmp_path / "t.csv"), "--fleet", str(tmp_path / "fleet.json"),
                 "--jobs", str(tmp_path / "jobs.yaml"), "--json", str(tmp_path / "new" / "out.json"),
                 "--plot", str(tmp_path / "build" / "out.png"), "--price", "2.5"])
    assert code == 0
    out = capsys.readouterr().out
    assert "SLO-minutes" in out and "share of the fixed reference's GPU-hours" in out and "queueing delay" in out
    report = json.loads((tmp_path / "new" / "out.json").read_text())  # folders created: `build/` is not in git
    assert set(report["modes"]) == {"gate", "fixed-window", "reference", "oracle"}
    assert (tmp_path / "build" / "out.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_refuses_a_bad_trace_and_jobs_for_unknown_services(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "t.csv").write_text("minute,requests,input_tokens,output_tokens\n0,1,1,oops\n")
    assert main(["simulate", "--trace", str(tmp_path / "t.csv")]) == 2
    assert "line 2: output_tokens 'oops' is not a number" in capsys.readouterr().err
    (tmp_path / "jobs.yaml").write_text("jobs: [{service: nope, replicas: 1, workHours: 1}]\n")
    assert main(["simulate", "--jobs", str(tmp_path / "jobs.yaml")]) == 2
    assert "service(s) nope not in the fleet" in capsys.readouterr().err


def test_queue_delay_of_a_one_minute_burst() -> None:
    # One replica-minute above capacity 2 waits behind nothing else: drained in half a minute.
    assert queue_delays(np.array([1.0, 3.0, 1.0, 1.0]), np.array([2.0, 2.0, 2.0, 2.0])).tolist() == [0, 30, 0, 0]


def test_queue_delay_still_waiting_at_the_end_of_the_trace() -> None:
    # Backlog 1 then 2 at capacity 2: the first minute's work is served 30 s late, the last one's 60 s.
    assert queue_delays(np.array([3.0, 3.0]), np.array([2.0, 2.0])).tolist() == [30, 60]


def test_queue_delay_counts_in_the_report_and_the_fixed_reference_leads() -> None:
    # Capacity 10 until the step at minute 30 (2 -> 6 rps with no headroom): capacity is back at
    # minute 37 (see the step-up test). Backlog grows 4 replica-minutes a minute for 7 minutes.
    trace = trace_of([2.0] * 30 + [6.0] * 30)
    result = simulate(trace, fleet_of(), [JobSpec(f"j{i}", "chat", 4, 100, 30) for i in range(2)])
    gate = result.reports["gate"]
    chat = gate.per_service["chat"]
    assert gate.slo_minutes == chat["slo_minutes"] == 7
    wait = queue_delays(result.series["demand"] / 4, result.series["gate:capacity"] / 4)
    assert gate.delay_worst_seconds == chat["delay_worst_seconds"] == pytest.approx(wait.max())
    assert gate.delay_minutes == int((wait > 30).sum()) > 0
    # The reference keeps 20% over the coming 7 minutes' peak: 10 - ceil(6 x 1.2) = 2 lendable at the end.
    assert result.series["reference:lent"][-1] == 2 * 4
    assert result.reports["reference"].share_of_reference == 1.0
    assert gate.share_of_reference == pytest.approx(gate.gpu_hours_lent / result.reports["reference"].gpu_hours_lent)


def test_trend_term_reclaims_the_rise_it_extrapolates_at_the_first_tick() -> None:
    # 2 -> 6 rps at minute 30, reaction 7 minutes: the trend floor asks for 6 + (6 - 2) = 10 at once.
    sim = run(trace_of([2.0] * 30 + [6.0] * 30), fleet_of(trend=True), jobs_of(*[(1, 100, 30)] * 8))
    level = lent(sim)
    assert level[29] == 8 and level[31] == 0


def test_replays_in_two_processes_give_exactly_the_one_process_result() -> None:
    trace = two_days()
    fleet = default_fleet(trace, services=6, replicas_per_service=8)
    jobs = generated_jobs(fleet, per_service=20)
    one = simulate(trace, fleet, jobs, workers=1)
    two = simulate(trace, fleet, jobs, workers=2)
    assert one.reports == two.reports
    assert one.reports["gate"].preemptions > 0 and one.reports["gate"].gpu_hours_lent > 0  # a replay with work in it
    assert one.series.keys() == two.series.keys()
    assert all(np.array_equal(one.series[k], two.series[k]) for k in one.series)


def test_the_pool_is_used_only_for_enough_replays_and_never_from_a_threaded_process() -> None:
    # In a process of its own: a test worker may hold threads other tests left, and then nothing forks (below).
    code = """
import os, threading
from offhours.scripts.simulate import parallel
parallel.available_cpus = lambda: 2
me = os.getpid()
assert parallel.map_replays(lambda i: (i, os.getpid()), 3) == [(i, me) for i in range(3)]
pids = [pid for _, pid in parallel.map_replays(lambda i: (i, os.getpid()), parallel.MIN_PARALLEL_REPLAYS)]
assert me not in pids and len(pids) == parallel.MIN_PARALLEL_REPLAYS, pids
stop = threading.Event()
threading.Thread(target=stop.wait, daemon=True).start()
pids = [pid for _, pid in parallel.map_replays(lambda i: (i, os.getpid()), parallel.MIN_PARALLEL_REPLAYS)]
assert pids == [me] * parallel.MIN_PARALLEL_REPLAYS, "forked beside another thread"
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


@pytest.mark.parametrize("value, problem", [("0", "0 is not 1 or more"), ("two", "'two' is not a whole number")])
def test_cli_refuses_a_bad_worker_count(value: str, problem: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["simulate", "--workers", value])
    assert exit_info.value.code == 2 and f"argument --workers: {problem}" in capsys.readouterr().err
