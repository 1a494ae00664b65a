"""`offhours check` judges the gate by its ticks, not by its pod's exit, and its metrics fix fits the fault.

Invariants, in words:
- a CronWorkflow whose last run Succeeded is ✗ while any configured service's ticks fail now (its state
  record counts failed ticks in a row, or a GateTickFailed Event is newer than its last decision);
- a failure the gate has since decided past (an Event older than the last decision, no failed ticks) is ✓;
- a direct-metrics ✗ names each failing pod once; when every ready pod is on a loopback address (the local
  sandbox's emulated vLLM) and refuses the connection, the fix says how to start the sandbox's servers again.
"""

import json
import re
from datetime import datetime, timedelta, timezone
from email.utils import formatdate
from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from offhours.scripts.cli.check import SANDBOX_METRICS_FIX, Checker
from offhours.scripts.cli.gate_health import ServiceTicks, TickFailure, verdict
from offhours.scripts.config.loader import parse_config
from offhours.scripts.metrics.scrape import ScrapeResult

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
CONFIG = parse_config({"namespace": "serving", "workflowNamespace": "research", "tickSeconds": 60,
                       "metrics": {"source": "direct", "maxAgeSeconds": 180},
                       "services": {"chat": {"capacity": {"requestsPerSecond": 10}},
                                    "code": {"capacity": {"requestsPerSecond": 10}}}})


@given(failed=st.lists(st.integers(0, 5), min_size=1, max_size=4),
       event_after=st.lists(st.none() | st.booleans(), min_size=4, max_size=4))
def test_the_gate_is_well_only_when_no_service_fails_its_ticks_now(failed: list[int],
                                                                   event_after: list[bool | None]) -> None:
    services = [ServiceTicks(f"s{i}", n, T0, "held", True) for i, n in enumerate(failed)]
    failures = [TickFailure(T0 + (timedelta(minutes=1) if after else -timedelta(minutes=1)), f"s{i}", "boom")
                for i, after in enumerate(event_after[:len(failed)]) if after is not None]
    failing_now = {f"s{i}" for i, n in enumerate(failed) if n} | {f.service for f in failures if f.at > T0}
    got = verdict(services, failures)
    assert got.ok == (not failing_now)
    assert set(got.failing) == failing_now
    for name in failing_now:
        assert f"{name}:" in got.detail


class Core:
    """The reads of check's CronWorkflow line: state ConfigMaps and GateTickFailed Events."""

    def __init__(self, states: dict[str, dict[str, Any]], events: list[Any]) -> None:
        self.states, self.events = states, events

    def read_namespaced_config_map(self, name: str, namespace: str) -> Any:
        service = name.removeprefix("offhours-state-")
        if service not in self.states:
            raise ApiException(status=404, reason="Not Found")
        return SimpleNamespace(data={"state.json": json.dumps(self.states[service])})

    def list_namespaced_event(self, namespace: str, field_selector: str) -> Any:
        assert field_selector == "reason=GateTickFailed"
        return SimpleNamespace(items=self.events)


class Custom:
    def get_namespaced_custom_object(self, *args: Any) -> Any:
        return {"spec": {"schedules": ["*/2 * * * *"]}}

    def list_namespaced_custom_object(self, *args: Any, **kwargs: Any) -> Any:
        return {"items": [{"metadata": {"name": "offhours-gate-1"},
                           "status": {"phase": "Succeeded", "finishedAt": "2026-03-01T12:02:00Z"}}]}


def _event(deployment: str, at: datetime, message: str) -> Any:
    return SimpleNamespace(involved_object=SimpleNamespace(kind="Deployment", name=deployment), last_timestamp=at,
                           event_time=None, first_timestamp=None, message=message)


def _answered_at(api: client.ApiClient, server_now: float | None) -> client.ApiClient:
    """The API server's last answer carries the `Date` of `server_now` (its clock, not this machine's)."""
    date = formatdate(server_now, usegmt=True) if server_now is not None else None
    api.last_response = SimpleNamespace(getheader=lambda name: date if name == "Date" else None)
    return api


def _line(states: dict[str, dict[str, Any]], events: list[Any], server_now: float | None = None) -> Any:
    checker = Checker(_answered_at(client.ApiClient(), server_now), CONFIG)
    checker.core, checker.custom = Core(states, events), Custom()  # type: ignore[assignment]
    (line,) = list(checker.cron_workflow(CONFIG))
    return line


def test_a_succeeded_last_run_whose_ticks_all_fail_is_a_cross() -> None:
    decided = {"failedTicks": 0, "lastDecision": {"at": "2026-03-01T11:00:00Z", "action": "hold"}}
    failing = {"failedTicks": 7, "lastDecision": {"at": "2026-03-01T12:00:00Z", "action": "hold",
                                                  "reason": "no pod answered: chat-0: connection refused"}}
    line = _line({"chat": failing, "code": decided}, [])
    assert not line.ok
    assert "last run offhours-gate-1 Succeeded" in line.detail and "chat: 7 tick(s) in a row" in line.detail
    assert "connection refused" in line.detail and "code:" not in line.detail
    assert "metrics line above" in line.fix


def test_a_tick_failed_event_newer_than_the_last_decision_is_a_cross_and_an_older_one_is_not() -> None:
    states = {s: {"failedTicks": 0, "lastDecision": {"at": "2026-03-01T12:00:00Z"}} for s in ("chat", "code")}
    newer = _line(states, [_event("code", T0 + timedelta(minutes=1), "take the Lease: HTTP 409 Conflict")])
    assert not newer.ok and "code: its last tick failed: take the Lease: HTTP 409 Conflict" in newer.detail
    older = _line(states, [_event("code", T0 - timedelta(minutes=1), "take the Lease: HTTP 409 Conflict")])
    assert older.ok and "ticks decide for 2/2 service(s)" in older.detail


def test_no_record_and_no_failure_is_a_gate_that_has_not_ticked_yet() -> None:
    line = _line({}, [])
    assert line.ok and "no tick recorded yet" in line.detail


def _pod(name: str, ip: str) -> Any:
    return SimpleNamespace(metadata=SimpleNamespace(name=name),
                           status=SimpleNamespace(pod_ip=ip, conditions=[SimpleNamespace(type="Ready", status="True")]))


def _metrics(monkeypatch: Any, ip: str) -> Any:
    import offhours.scripts.metrics.scrape as scrape

    monkeypatch.setattr(scrape, "scrape", lambda targets, *a: ScrapeResult(
        {}, {t.pod: f"{t.pod}: scrape failed: connection refused" for t in targets}))
    config = parse_config({"namespace": "serving", "workflowNamespace": "research", "tickSeconds": 60,
                           "metrics": {"source": "direct", "maxAgeSeconds": 180},
                           "services": {"chat": {"capacity": {"requestsPerSecond": 10}}}})
    checker = Checker(client.ApiClient(), config)
    checker.core = SimpleNamespace(list_namespaced_pod=lambda namespace, label_selector: SimpleNamespace(  # type: ignore
        items=[_pod("chat-7d9f-abcde", ip)]))
    (line,) = list(checker.metrics(config))
    return line


def test_a_stopped_sandbox_emulator_names_its_pod_once_and_says_how_to_start_it(monkeypatch: Any) -> None:
    line = _metrics(monkeypatch, "127.0.0.9")
    assert not line.ok and line.line().count("chat-7d9f-abcde") == 1
    assert line.fix == SANDBOX_METRICS_FIX


def test_a_real_pod_that_refuses_is_told_to_start_vllm(monkeypatch: Any) -> None:
    line = _metrics(monkeypatch, "10.1.2.3")
    assert not line.ok and line.line().count("chat-7d9f-abcde") == 1
    assert line.fix.startswith("nothing listens on port 8000") and "sandbox" not in line.fix



def test_a_gate_that_stopped_ticking_is_a_cross_though_its_last_run_succeeded() -> None:
    # The last finished run Succeeded days ago; since then no tick ran (a run stuck Pending holds every later one
    # back under concurrencyPolicy Forbid, or Argo's controller is down): no tick renewed the lending lease, and
    # nothing reclaims but the backstop. Recent ticks say the gate is not working, whatever the last run's exit.
    import time

    now = float(int(time.time()))  # the API server's Date is whole seconds
    days_ago = datetime.fromtimestamp(now - 3 * 86400, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    stale = {"failedTicks": 0, "renewedAt": now - 3 * 86400, "leaseSeconds": 195.0,
             "lastDecision": {"at": days_ago, "action": "hold"}}
    fresh = {"failedTicks": 0, "renewedAt": now - 30, "leaseSeconds": 195.0,
             "lastDecision": {"at": datetime.fromtimestamp(now - 30, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}}
    line = _line({"chat": stale, "code": fresh}, [], now)
    assert not line.ok, line.detail
    assert re.search(r"chat: no tick for 2592\d\d s \(its lending lease is 195 s\)", line.detail)
    assert "code:" not in line.detail.split("ticks fail: ", 1)[1]
    assert f"argo -n {CONFIG.namespace} list" in line.fix
    assert _line({"chat": fresh, "code": fresh}, [], now).ok  # a tick within its lease: well


def test_the_gates_lease_is_aged_on_the_servers_clock_not_this_machines() -> None:
    """The gate renews its lease in server time: a gate stopped 30 minutes ago is a cross on an operator's machine
    an hour behind (or ahead) of the API server, and `offhours check` reads no local wall clock."""
    import inspect
    from unittest import mock

    from offhours.scripts.cli import check

    server_now = 1_800_000_000.0
    dead = {"failedTicks": 0, "renewedAt": server_now - 1800, "leaseSeconds": 300.0,
            "lastDecision": {"at": server_now - 1800, "action": "hold"}}
    for skew in (-3600.0, 3600.0):
        with mock.patch("time.time", lambda: server_now + skew):
            line = _line({"chat": dead}, [], server_now)
        assert not line.ok and "chat: no tick for 1800 s" in line.detail, line.detail
    assert "time.time()" not in inspect.getsource(check)


def test_a_first_run_stuck_pending_with_no_tick_since_is_a_cross() -> None:
    import time

    class Stuck(Custom):
        def list_namespaced_custom_object(self, *args: Any, **kwargs: Any) -> Any:
            return {"items": [{"metadata": {"name": "offhours-gate-2"}, "status": {"phase": "Pending"}}]}

    now = float(int(time.time()))  # the API server's Date is whole seconds
    stale = {"failedTicks": 0, "renewedAt": now - 7200, "leaseSeconds": 195.0, "lastDecision": {"at": now - 7200}}
    checker = Checker(_answered_at(client.ApiClient(), now), CONFIG)
    checker.core, checker.custom = Core({"chat": stale}, []), Stuck()  # type: ignore[assignment]
    (line,) = list(checker.cron_workflow(CONFIG))
    assert not line.ok and "no finished run yet" in line.detail and "chat: no tick for" in line.detail
    checker.core = Core({}, [])  # type: ignore[assignment]
    (line,) = list(checker.cron_workflow(CONFIG))
    assert line.ok and "no tick recorded yet" in line.detail  # a fresh install whose first run has not ticked
