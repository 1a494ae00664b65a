"""The demo's pure parts: the accelerated trace clock, the load scale, and what changed between snapshots."""

import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from offhours.scripts.cli import demo as demo_module
from offhours.scripts.cli.demo import (
    CAPACITY_RPS,
    TraceClock,
    demo_gate_config,
    finished,
    load_scale,
    pipeline_parameters,
)
from offhours.scripts.cli.demo_text import (
    GateDecision,
    JobState,
    Snapshot,
    changes,
    gate_line,
    legend,
    summarize,
    summary_lines,
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
    # A sandbox replays the trace on and on: past its last minute its clock starts over, as its load does.
    wrapped = TraceClock(start_minute=1439, speed=60, started=0.0, period_minutes=1440)
    assert wrapped.label(0.0) == "day 1 23:59" and wrapped.label(1.0) == "day 1 00:00"


@given(st.lists(st.floats(1, 1e6), min_size=10, max_size=100), st.integers(2, 64), st.floats(0, 2))
def test_the_90th_percentile_minute_needs_all_replicas_but_half_of_one(requests: list[float], replicas: int,
                                                                       headroom: float) -> None:
    # Invariant: after scaling, the window's 90th-percentile load with headroom is (replicas - 0.5) replicas' worth,
    # so the busiest tenth of the minutes needs more than that: the gate has to reclaim.
    trace = Trace(np.array(requests), np.zeros(len(requests)), np.zeros(len(requests)))
    scale = load_scale(trace, 0, len(requests), replicas, headroom)
    level_rps = float(np.percentile(requests, 90)) / 60 * scale
    assert abs(level_rps * (1 + headroom) / CAPACITY_RPS - (replicas - 0.5)) < 1e-6 * replicas


def _changes(before: Snapshot | None, after: Snapshot, speed: float = 60.0) -> list[str]:
    return changes(before, after, "chat", 16, speed)


def test_changes_name_each_difference_once() -> None:
    first = Snapshot(16, 16, None, {"demo-a": JobState("Pending", "parked")})
    assert _changes(None, first) == ["chat: 16 of 16 replicas ready", "job demo-a: Pending, parked"]
    lend = GateDecision("lend", 9, 2, 4, "load has needed at most 9 of 16 replicas for 15 s")
    second = Snapshot(14, 14, lend, {"demo-a": JobState("Running", "admitted")})
    assert _changes(first, second) == [
        "chat: 14 of 14 replicas ready (was 16 of 16), 2 lent to research",
        "gate lend: needs 9 of 16; 2 lent, up to 4 allowed "
        "(load has needed at most 9 of 16 replicas for 15 wall s = 15 trace min)",
        "job demo-a: Running, admitted (was Pending, parked)",
    ]
    assert _changes(second, second) == []


def test_a_tick_that_recomputes_the_same_decision_prints_nothing() -> None:
    # Each tick records its own need and its own "for N s"; the person sees a line only when what
    # the gate does changes (its action, what it lends, what it allows), not the same hold again.
    hold = Snapshot(12, 12, GateDecision("hold", 22, 4, 4, "load needs 22 of 16 replicas; 4 lent", at=1.0))
    again = Snapshot(12, 12, GateDecision("hold", 21, 4, 4, "load needs 21 of 16 replicas; 4 lent", at=11.0))
    assert _changes(hold, again) == []
    reclaim = Snapshot(12, 12, GateDecision("reclaim", 23, 0, 0, "load needs 23 of 16 replicas", at=21.0))
    assert _changes(again, reclaim) == ["gate reclaim: needs 23 of 16; 0 lent, up to 0 allowed"]


def test_a_job_line_names_the_gates_reason_only_when_it_is_new() -> None:
    waiting = JobState("Running", "parked", "waiting for 1 replica of chat: serving needs them")
    before = Snapshot(16, 16, None, {"a": JobState("Pending", "parked")})
    after = Snapshot(16, 16, None, {"a": waiting})
    assert _changes(before, after) == ["job a: Running, parked (was Pending, parked); "
                                       "waiting for 1 replica of chat: serving needs them"]
    assert _changes(after, Snapshot(16, 16, None, {"a": waiting})) == []
    # The next tick's reason with its need recomputed: the same wording, no line.
    recomputed = JobState("Running", "parked", "waiting for 1 replica of chat: load needs 21 of 16 replicas; 4 lent")
    before_tick = JobState("Running", "parked", "waiting for 1 replica of chat: load needs 22 of 16 replicas; 4 lent")
    assert _changes(Snapshot(16, 16, None, {"a": before_tick}), Snapshot(16, 16, None, {"a": recomputed})) == []
    moved = JobState("Running", "parked", "waiting for 1 replica of chat: 2nd in the queue")
    assert _changes(after, Snapshot(16, 16, None, {"a": moved})) == ["job a: waiting for 1 replica of chat: 2nd in the queue"]


_reasons = st.sampled_from(["", "load needs 9 of 16 replicas; 2 lent", "load is low but not yet for 15 s",
                            "no load data; 3 failed ticks in a row: reclaim everything",
                            "load has needed at most 7 of 16 replicas for 7.5 s"])
_decisions = st.none() | st.builds(GateDecision, st.sampled_from(["lend", "hold", "reclaim", "failed"]),
                                   st.none() | st.integers(0, 40), st.none() | st.integers(0, 16),
                                   st.none() | st.integers(0, 16), _reasons, st.floats(0, 1e9))
_jobs = st.dictionaries(st.sampled_from(["a", "a-p1", "b"]),
                        st.builds(JobState, st.sampled_from(["Pending", "Running", "Succeeded", "Failed"]),
                                  st.sampled_from(["", "parked", "admitted", "preempted"]),
                                  st.sampled_from(["", "waiting for 1 replica of chat: serving needs them"])),
                        max_size=3)
_snapshots = st.builds(Snapshot, st.integers(0, 16), st.integers(0, 16), _decisions, _jobs)


@given(_snapshots, _snapshots)
def test_changes_say_only_what_changed_and_stay_short(before: Snapshot, after: Snapshot) -> None:
    # Invariants: a snapshot compared with itself prints nothing; every line is about one thing
    # that differs (serving, the gate or one job) and none repeats the whole state (short lines);
    # a job that did not change is never named.
    assert _changes(after, after) == []
    lines = _changes(before, after)
    assert all(len(line) <= 160 for line in lines), lines
    assert len(lines) <= 2 + len(after.jobs)
    for name, job in after.jobs.items():
        if before.jobs.get(name) == job:
            assert not any(line.startswith(f"job {name}:") for line in lines)
    if (before.replicas, before.ready) == (after.replicas, after.ready):
        assert not any(line.startswith("chat:") for line in lines)


def test_a_duration_of_the_gate_is_named_in_wall_and_trace_time() -> None:
    line = gate_line(GateDecision("hold", 9, 0, 0, "load is low but not yet for 7.5 s"), 16, 120.0)
    assert line == "gate hold: needs 9 of 16; 0 lent, up to 0 allowed (load is low but not yet for 7.5 wall s = 15 trace min)"
    assert gate_line(GateDecision("failed", None, None, None, "no pod answered"), 16, 60) == "gate tick failed: no pod answered"


def test_the_legend_explains_the_need_above_the_fleet_and_lent_against_allowed() -> None:
    text = " ".join(legend("chat", 16, 60.0))
    assert "headroom" in text and "trend" in text and "exceed the 16" in text
    assert "lent to research jobs now" in text and "would lend up to T" in text
    assert "trace" in text and "wall" in text and "60 trace seconds per wall second" in text


@given(st.lists(st.tuples(st.floats(0, 100), st.integers(0, 16)), min_size=1, max_size=20), st.floats(1, 600))
def test_lent_gpu_hours_are_the_lent_replicas_gpus_over_time(steps: list[tuple[float, int]], speed: float) -> None:
    # Invariant: each sample's lending (baseline - replicas, 4 GPUs each) counts until the next
    # sample; the trace-clock figure is the wall-clock one times the speed; no lending, no hours.
    samples, t = [], 0.0
    for dt, replicas in steps:
        samples.append((t, Snapshot(replicas, replicas)))
        t += dt
    summary = summarize(samples, 16, speed, {})
    expected = sum((16 - a.replicas) * 4 * (t2 - t1) for (t1, a), (t2, _) in zip(samples, samples[1:])) / 3600
    assert summary.lent_gpu_hours_wall == pytest.approx(expected)
    assert summary.lent_gpu_hours_trace == pytest.approx(expected * speed)
    assert summarize([(0.0, Snapshot(16, 16)), (50.0, Snapshot(16, 16))], 16, speed, {}).lent_gpu_hours_wall == 0


def test_the_summary_names_preemptions_in_order_and_the_resumed_step() -> None:
    samples = [(0.0, Snapshot(16, 16, None, {"a": JobState("Running", "admitted")})),
               (60.0, Snapshot(14, 14, None, {"a": JobState("Running", "admitted")})),
               (120.0, Snapshot(16, 16, None, {"a": JobState("Failed", "preempted"), "a-p1": JobState("Pending", "parked")})),
               (180.0, Snapshot(14, 14, None, {"a": JobState("Failed", "preempted"), "a-p1": JobState("Running", "admitted")}))]
    summary = summarize(samples, 16, 60.0, {"a-p1": 2350})
    assert summary.preempted == ("a",)
    assert summary.lent_gpu_hours_trace == pytest.approx(2 * 4 * 60 * 60 / 3600)  # 60 wall s of 2 replicas at 60x
    lines = summary_lines(summary, "research", "demo-1", 60.0)
    assert lines[0] == "summary: 8.0 GPU-hours lent on the trace clock (8.0 GPU-minutes of wall clock at 60x)"
    assert "  preemptions: 1 (a)" in lines and "  a-p1 resumed from its checkpoint at step 2350" in lines
    assert any("offhours logs demo-1 -n research" in line for line in lines)
    assert any("make sandbox" in line for line in lines)


def test_local_parameters_schedule_on_the_kwok_gpu_nodes() -> None:
    params = pipeline_parameters("r1", 100)
    assert params["node-selector"] == '{"offhours.io/pool": "inference"}'
    assert params["sft-gpus"] == "4" and params["image"].startswith("offhours.local/")
    assert params["sft-args"] == '["--steps", "100", "--every", "50", "--step-seconds", "0.05"]'


def test_a_run_stopped_by_the_gate_is_not_the_end() -> None:
    stopped = Snapshot(16, 16, None, {"a": JobState("Failed", "preempted"), "a-p1": JobState("Running", "parked")})
    assert not finished(stopped)
    assert finished(Snapshot(16, 16, None, {"a": JobState("Failed", "preempted"),
                                            "a-p1": JobState("Succeeded", "returned")}))
    assert finished(Snapshot(16, 16, None, {"a": JobState("Failed", "returned")}))  # failed on its own


@pytest.mark.parametrize("speed", [10.0, 30.0, 60.0, 120.0, 600.0])
def test_gate_durations_span_the_same_trace_time_at_any_speed(speed: float) -> None:
    # Invariant: the stabilisation window is 15 trace minutes and the look-ahead's reaction time
    # (the tick aside) 6 trace minutes, whatever the replay speed; at 60x that is 15 s and 6 s of
    # the wall clock, not the 6 trace hours that real-time values (240 s + 120 s) would span.
    (policy,) = parse_config(demo_gate_config(18473, 16, speed)).services
    assert policy.stabilization_seconds * speed == 900.0
    assert (policy.cold_start_seconds or 0.0) * speed == 240.0 and policy.max_grace_seconds * speed == 120.0
    assert reaction_seconds(policy, 10.0) == 10.0 + 360.0 / speed


def test_a_stale_or_foreign_sandbox_pid_is_no_sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `make sandbox-stop` signals only a live sandbox: never a pid that ended or now belongs to another program.
    pid_file = tmp_path / "sandbox.pid"
    monkeypatch.setattr(demo_module, "PID_FILE", pid_file)
    assert demo_module.sandbox_pid() is None  # no file
    for text in ("not a pid", "999999999", str(os.getpid())):  # garbage, no such process, this test (no sandbox)
        pid_file.write_text(text)
        assert demo_module.sandbox_pid() is None
    lines: list[str] = []
    assert demo_module.stop_sandbox(lines.append) == 1 and "no sandbox is running" in lines[0]


@pytest.mark.parametrize("argv, message", [
    (["--run-id", "../../.."], "--run-id '../../..': must be a DNS label"),
    (["--run-id", "/home/someone/work"], "--run-id '/home/someone/work': must be a DNS label"),
    (["--speed", "0"], "--speed 0: expected 1 (real time) to 3600"),
    (["--speed", "nan"], "--speed nan: expected"),
    (["--hours", "0"], "--hours 0: expected at least one trace minute"),
    (["--start-hour", "400"], "--start-hour 400: expected 0 to under 336"),
    (["--start-hour", "330", "--hours", "14"], "past the trace's end"),
    (["--replicas", "0"], "--replicas 0: expected 1 or more"),
    (["--steps", "-5"], "--steps -5: expected 1 or more"),
])
def test_a_wrong_flag_is_one_line_before_anything_is_cleared_or_installed(
        argv: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # The run id names the folders the demo clears (rmtree under its folder): `..` or an absolute path there
    # would clear a folder outside it. Nothing may be touched, and no cluster asked, before the flags are right.
    from offhours.scripts.cli.main import main

    monkeypatch.setattr(demo_module, "DEMO_DIR", tmp_path / "demo" / "offhours-demo")
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "file").write_text("mine")

    def no_cluster() -> dict[str, str]:
        raise AssertionError("the cluster was looked for before the flags were checked")

    monkeypatch.setattr(demo_module, "local_cluster", no_cluster)
    assert main(["demo", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "nothing was installed" in err, err
    assert (kept / "file").read_text() == "mine"


def test_every_wrong_flag_is_named_at_once(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from offhours.scripts.cli.main import main

    monkeypatch.setattr(demo_module, "local_cluster", lambda: (_ for _ in ()).throw(AssertionError("cluster")))
    assert main(["demo", "--speed", "-1", "--replicas", "0", "--run-id", "A B"]) == 2
    err = capsys.readouterr().err
    assert "--speed -1" in err and "--replicas 0" in err and "--run-id 'A B'" in err


def _stale_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """A local control plane whose env file is still there (a crash or a reboot left it) but which answers nothing."""
    monkeypatch.setattr(demo_module, "DEMO_DIR", tmp_path / "offhours-demo")
    monkeypatch.setattr(demo_module, "PID_FILE", tmp_path / "offhours-demo" / "sandbox.pid")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: c, cluster: "
                          "{server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t}}]\n"
                          "contexts: [{name: c, context: {cluster: c, user: u}}]\n")
    monkeypatch.setattr(demo_module, "local_cluster", lambda: {"KUBECONFIG": str(kubeconfig),
                                                               "OFFHOURS_CLUSTER_BIN": str(tmp_path / "bin")})
    calls: list[tuple[str, ...]] = []
    return calls


def test_a_local_cluster_that_answers_nothing_is_one_line_with_the_way_to_start_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from offhours.scripts.cli import connect as connect_module
    from offhours.scripts.cli.main import main

    calls = _stale_cluster(tmp_path, monkeypatch)

    def refused(*_: object, **__: object) -> None:
        raise connect_module.NoCluster(f"no cluster: cannot reach the API server at https://127.0.0.1:1 "
                                       f"(connection refused); {connect_module.HOW_TO_GET_ONE}")

    monkeypatch.setattr(connect_module, "connect", refused)
    monkeypatch.setattr(demo_module, "kubectl", lambda *args, **_: calls.append(args))
    assert main(["demo"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot reach the API server" in err and "make cluster-up" in err, err
    assert calls == []  # nothing was installed


def test_a_kubectl_failure_while_installing_is_one_line_not_a_traceback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from offhours.scripts.cli import connect as connect_module
    from offhours.scripts.cli.main import main

    _stale_cluster(tmp_path, monkeypatch)
    monkeypatch.setattr(connect_module, "connect", lambda *_, **__: None)

    def fails(*args: str, **_: object) -> str:
        raise RuntimeError("kubectl apply --server-side --force-conflicts: The connection to the server "
                           "127.0.0.1:6443 was refused")

    monkeypatch.setattr(demo_module, "kubectl", fails)
    assert main(["demo", "--keep"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("offhours demo: ") and "was refused" in err, err
    assert not (tmp_path / "offhours-demo" / "sandbox.pid").exists()


class _Reads:
    """The demo watcher's reads: the serving Deployment, no state record, and the research workflows `workflows`."""

    def __init__(self, workflows: list[dict]) -> None:
        self.workflows = workflows

    def read_namespaced_deployment(self, *_: object, **__: object) -> object:
        from types import SimpleNamespace

        return SimpleNamespace(spec=SimpleNamespace(replicas=16), status=SimpleNamespace(ready_replicas=16))

    def read_namespaced_config_map(self, *_: object, **__: object) -> object:
        from kubernetes.client.exceptions import ApiException

        raise ApiException(status=404, reason="Not Found")

    def list_namespaced_custom_object(self, *_: object, **__: object) -> dict:
        return {"items": self.workflows}


def test_a_workflow_stopped_before_admission_is_not_shown_or_counted_as_preempted() -> None:
    # `argo submit --from` runs straight; the gate stops it before it ever held lent GPUs (labelled preempted, but
    # never admitted) and parks a copy in its place. Only a workflow that held lent GPUs was preempted.
    from kubernetes import client

    from tests.support.pool_fixture import ts, workflow

    never = workflow("demo-1", "chat", 2, "preempted", phase="Failed", created=10, shutdown="Stop")
    held = workflow("demo-1-p1", "chat", 2, "preempted", phase="Failed", created=5, shutdown="Stop",
                    annotations={"offhours.io/admitted-at": ts(4)})
    waiting = workflow("demo-1-p2", "chat", 2, "parked", created=1, suspend=True)
    watcher = demo_module.Watcher(client.ApiClient(), "offhours.io/service", 16)
    reads = _Reads([never, held, waiting])
    watcher.apps = watcher.core = watcher.custom = reads  # type: ignore[assignment]
    snap = watcher.snapshot()
    assert snap.jobs["demo-1"].status() == "Failed, stopped-unadmitted"
    assert snap.jobs["demo-1-p1"].status() == "Failed, preempted"
    assert snap.jobs["demo-1-p2"].status() == "Pending, waiting"
    assert summarize([(0.0, snap), (1.0, snap)], 16, 60.0, {}).preempted == ("demo-1-p1",)
    assert not finished(snap)  # a stop before admission is not the run's end either


def test_a_sandbox_of_another_user_is_named_not_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    # The demo's folder is in the shared temporary folder: its pid file may name another user's sandbox.
    monkeypatch.setattr(demo_module, "sandbox_pid", lambda: 4242)

    def refused(pid: int, sig: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(demo_module.os, "kill", refused)
    lines: list[str] = []
    assert demo_module.stop_sandbox(lines.append) == 1
    assert lines == ["offhours demo: the sandbox (pid 4242) is not yours to stop (Operation not permitted): its "
                     "owner stops it"]


def test_the_watch_goes_on_past_an_api_server_that_does_not_answer_for_a_moment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The client raises urllib3's errors (no OSError) for a refused connection or a read that timed out: a restart
    # of the local API server ended the sandbox, which promises to stay live until its person stops it.
    import urllib3

    monkeypatch.setattr(demo_module.STOP, "wait", lambda seconds: False)
    answers: list[object] = [urllib3.exceptions.MaxRetryError(None, "/apis", "connection refused"),
                             urllib3.exceptions.ReadTimeoutError(None, "/apis", "read timed out"),
                             Snapshot(16, 16)]

    class Flaky:
        baseline = 16

        def snapshot(self) -> Snapshot:
            answer = answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            assert isinstance(answer, Snapshot)
            return answer

    lines: list[str] = []
    clock = TraceClock(960, 60.0, started=0.0)
    got = list(demo_module.watch(Flaky(), clock, SimpleNamespace(rps=1.0), lambda _: True,  # type: ignore[arg-type]
                                 float("inf"), lines.append, 0.0))
    assert got == [Snapshot(16, 16)]
    assert sum("cannot read the cluster" in line for line in lines) == 2, lines
