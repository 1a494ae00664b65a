"""The gate's run loop (scripts/gate/loop.py): once, a deadline, SIGTERM between and during ticks, exit codes.

The cluster is the in-memory one; the loop's clock and sleep are fake, and waiting for a workflow
change moves the fake clock to the end of the wait (or not at all, when a workflow changed).
"""

import io
import os
import signal
from collections.abc import Sequence
from pathlib import Path

import pytest

from offhours.scripts.cli.main import main
from offhours.scripts.cluster.memory import MemoryCluster
from offhours.scripts.config.loader import parse_config
from offhours.scripts.gate.controller import Gate, ServiceOutcome
from offhours.scripts.gate.log import Logger, format_line
from offhours.scripts.gate.loop import MIN_TICK_SECONDS, TickLoop, run_from_config
from offhours.scripts.metrics.sources import Reading, ServiceTarget
from offhours.scripts.policy.capacity import Load
from tests.support.templates import install_library_templates

BAD_CONFIG = "services: {chat: {headroom: -1}}\n"
BAD_CONFIG_MESSAGE = "gate config: services.chat.headroom: -1 is less than the minimum of 0"


class Source:
    """10 requests per second per service; `during_read` runs inside the tick (to send a signal there)."""

    def __init__(self) -> None:
        self.during_read = lambda: None

    def read(self, targets: Sequence[ServiceTarget], now: float) -> dict[str, Reading]:
        self.during_read()
        return {t.service: Reading(Load(10.0, 0.0, 0.0, 0.0, 0.0, 0.1, len(t.pods), len(t.pods)), None)
                for t in targets}


class World:
    """A gate over the in-memory cluster, its loop on a fake clock; `starts` is when each tick began."""

    def __init__(self, services: Sequence[str] = ("chat",), deployments: Sequence[str] = ("chat",),
                 changed: bool = False, check: int = 0) -> None:
        self.now = 0.0
        self.cluster = install_library_templates(MemoryCluster())
        for name in deployments:
            self.cluster.add_deployment("serving", name, 8)
        self.config = parse_config({
            "namespace": "serving", "workflowNamespace": "research", "tickSeconds": 60, "reclaimCheckSeconds": check,
            "metrics": {"source": "direct", "maxAgeSeconds": 180},
            "services": {name: {"capacity": {"requestsPerSecond": 10}, "trend": False} for name in services}})
        self.source = Source()
        self.out, self.err = io.StringIO(), io.StringIO()
        self.gate = Gate(self.config, self.cluster, self.source, clock=lambda: self.now, out=self.out,
                         monotonic=lambda: self.now)
        self.starts: list[float] = []
        self.waits: list[float] = []
        self.on_sleep = lambda: None
        ticking = self.gate.tick

        def tick(dry_run: bool = False) -> list[ServiceOutcome]:
            self.starts.append(self.now)
            self.cluster.clock = self.now
            return ticking(dry_run=dry_run)

        def wait(namespace: str, timeout: float) -> bool:
            assert namespace == "research"
            self.waits.append(timeout)
            if not changed:
                self.now += max(0.0, timeout)
            return changed

        self.gate.tick = tick  # type: ignore[method-assign]
        self.cluster.wait_for_workflow_change = wait  # type: ignore[method-assign]

    def sleep(self, seconds: float) -> None:
        self.on_sleep()
        self.now += seconds

    def loop(self, **options: object) -> TickLoop:
        return TickLoop(self.gate, log=Logger(self.err), monotonic=lambda: self.now, sleep=self.sleep,
                        **options)  # type: ignore[arg-type]


def test_once_runs_one_tick_and_gives_the_lease_back() -> None:
    w = World()
    assert w.loop(once=True, seconds=3600).run() == 0
    assert w.starts == [0.0] and w.waits == []
    assert w.cluster.calls.count("acquire-lease gate") == 1 and w.cluster.lease_holder is None


def test_a_dry_run_is_one_tick_that_takes_no_lease() -> None:
    w = World()
    assert w.loop(dry_run=True, seconds=3600).run() == 0
    assert w.starts == [0.0] and not any(c.startswith("acquire-lease") for c in w.cluster.calls)


def test_ticks_every_tick_seconds_until_the_next_tick_would_pass_the_deadline() -> None:
    w = World()
    assert w.loop(seconds=150).run() == 0
    assert w.starts == [0.0, 60.0, 120.0]  # a tick at 180 would start past 150
    assert w.waits == [60.0 - MIN_TICK_SECONDS] * 2


def test_with_reclaim_checks_the_loop_wakes_every_check_and_runs_up_to_the_deadline_itself() -> None:
    w = World(check=15)
    assert w.loop(seconds=150).run() == 0
    assert w.starts == [0.0, 60.0, 120.0]  # checks never start a full tick
    # After each tick: MIN_TICK_SECONDS asleep, then a wake at every check; after the last tick, up to 150 exactly.
    assert w.waits == [10.0, 15.0, 15.0, 15.0] * 2 + [10.0, 15.0] and w.now == 150.0


def test_no_deadline_with_zero_seconds_either() -> None:
    # `--for 0` (and no --for) never ends by itself: a SIGTERM or the pod's deadline does.
    w = World()

    def stop_after_three() -> None:
        if len(w.starts) == 3:
            os.kill(os.getpid(), signal.SIGTERM)

    w.on_sleep = stop_after_three
    assert w.loop(seconds=0).run() == 0
    assert w.starts == [0.0, 60.0, 120.0]


def test_a_workflow_that_ends_wakes_the_loop_but_ticks_stay_min_tick_seconds_apart() -> None:
    w = World(changed=True)
    assert w.loop(seconds=100).run() == 0
    assert w.starts == [i * MIN_TICK_SECONDS for i in range(10)]  # the tick at 45 s would be followed by one at 105


def test_the_exit_code_is_1_when_the_last_tick_failed_for_a_service() -> None:
    w = World(services=("chat", "code"), deployments=("chat",))  # code's Deployment is missing
    assert w.loop(once=True).run() == 1
    assert "level=error service=code msg=\"failed tick: observe:" in w.out.getvalue()


def test_a_sigterm_during_a_tick_lets_it_finish_give_the_lease_back_and_end_the_loop() -> None:
    w = World()
    w.source.during_read = lambda: os.kill(os.getpid(), signal.SIGTERM)
    before = signal.getsignal(signal.SIGTERM)
    assert w.loop(seconds=3600).run() == 0
    assert w.starts == [0.0] and w.waits == []
    assert w.cluster.lease_holder is None  # released at the end of the tick, not left to expire
    assert 'level=info service=chat msg="hold lent 0 -> 0 of baseline 8;' in w.out.getvalue()  # the tick finished
    assert w.err.getvalue() == 'level=info msg="SIGTERM: stopped after the tick, the Lease given back"\n'
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_sigterm_between_ticks_ends_the_loop_at_once() -> None:
    w = World()
    w.on_sleep = lambda: os.kill(os.getpid(), signal.SIGTERM)
    before = signal.getsignal(signal.SIGTERM)
    assert w.loop(seconds=3600).run() == 0
    assert w.starts == [0.0] and w.waits == []  # no wait and no second tick
    assert w.cluster.lease_holder is None and w.err.getvalue() == ""
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_config_error_is_its_message_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "gate.yaml"
    bad.write_text(BAD_CONFIG)
    assert run_from_config(str(bad), 240.0, dry_run=True) == 2
    assert BAD_CONFIG_MESSAGE in capsys.readouterr().err
    assert main(["gate", "--config", str(bad), "--once"]) == 2  # the verb runs the same entry
    assert BAD_CONFIG_MESSAGE in capsys.readouterr().err
    assert run_from_config(str(tmp_path / "missing.yaml")) == 2
    assert "gate config: cannot read" in capsys.readouterr().err


def test_no_kubernetes_configuration_is_one_line_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    config = tmp_path / "gate.yaml"
    config.write_text(Path(__file__).parents[2].joinpath("cronworkflows/gate-config.example.yaml").read_text())
    assert run_from_config(str(config), dry_run=True) == 2
    err = capsys.readouterr().err
    assert err.startswith("offhours gate: no Kubernetes configuration: ") and err.count("\n") == 1



def test_an_api_error_out_of_the_loop_is_one_line_not_a_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # The CronWorkflow's step calls run_from_config directly (not through the CLI): an expected error
    # of the cluster must still be the one line every offhours command prints, with exit 1.
    from kubernetes.client.exceptions import ApiException

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: k, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    config = tmp_path / "gate.yaml"
    config.write_text(Path(__file__).parents[2].joinpath("cronworkflows/gate-config.example.yaml").read_text())

    def forbidden(_loop: TickLoop) -> int:
        raise ApiException(status=403, reason="Forbidden")

    monkeypatch.setattr(TickLoop, "run", forbidden)
    assert run_from_config(str(config), 240.0) == 1
    assert capsys.readouterr().err == "offhours gate: no rights: Forbidden\n"

# -- the log ---------------------------------------------------------------------------------
def test_a_log_line_is_level_service_quoted_message_then_fields() -> None:
    assert format_line("info", "lend 2: load is low", "chat") == 'level=info service=chat msg="lend 2: load is low"'
    assert format_line("warning", 'said "no"\nthen', None, job="a b", reason="GateHold", none=None) == \
        'level=warning msg="said \\"no\\"\\nthen" job="a b" reason=GateHold'
    with pytest.raises(ValueError):
        format_line("debug", "x")


def test_every_line_of_a_tick_about_one_service_names_it() -> None:
    w = World(services=("chat", "code"), deployments=("chat", "code"))
    w.loop(once=True).run()
    # The GPU quota (on by default) is the research namespace's, no service's: its line names the namespace.
    lines = [line for line in w.out.getvalue().splitlines() if 'msg="GPU quota of research' not in line]
    assert [line.split(" ", 2)[:2] for line in lines] == [["level=info", "service=chat"], ["level=info", "service=code"]]
