"""`offhours logs` across a run's attempts: every copy's pods in order, the attempt marked, failures failing.

A run stopped for reclaim goes on as a parked copy that resumes from its checkpoint. The person
reading the logs must see both attempts, in order, and which one resumed; an attempt whose pods
are gone is named (not silently skipped); a log the API server would not give is an error with a
non-zero exit, after every readable log is printed.
"""

import argparse
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from offhours.scripts.cli import logs as r
from offhours.scripts.names import ANNOTATION_ADMITTED_AT
from offhours.scripts.pool.model import build_pool
from tests.support.access import may_all
from tests.support.pool_fixture import NOW, SERVING, chat_state, deployment, state_configmap, ts, workflow


class _Answer:
    """A log answer as the client gives it unread (`_preload_content=False`): streamed in chunks of at most `amt`."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, amt: int) -> Any:
        return (self.data[i:i + amt] for i in range(0, len(self.data), amt))


def _owner(workflow_name: str) -> client.V1OwnerReference:
    return client.V1OwnerReference(api_version="argoproj.io/v1alpha1", kind="Workflow", name=workflow_name,
                                   uid=f"uid-{workflow_name}", controller=True)


class _Core:
    """The pod listing and log reads of a cluster whose pods are `logs` (a log of None: the read fails).

    Pods come back as the client's models, labelled with their workflow's name and owned by it as Argo
    makes them; `forged` names pods a tenant labelled with that workflow's name but owns another way.
    """

    def __init__(self, logs: dict[str, bytes | None], pending: tuple[str, ...] = (),
                 forged: dict[str, str] | None = None) -> None:
        self.logs, self.pending, self.forged = logs, pending, forged or {}

    def list_namespaced_pod(self, namespace: str, label_selector: str, **_: Any) -> Any:
        workflow_name = label_selector.split("=", 1)[1]
        items = []
        for i, n in enumerate(sorted(self.logs)):
            labelled = self.forged.get(n) or n.rsplit("-", 2)[0]
            if labelled != workflow_name:
                continue
            owner = _owner("tenants-own") if n in self.forged else _owner(labelled)
            items.append(client.V1Pod(
                metadata=client.V1ObjectMeta(name=n, creation_timestamp=ts(10 - i), owner_references=[owner],
                                             labels={"workflows.argoproj.io/workflow": labelled}),
                status=client.V1PodStatus(phase="Pending" if n in self.pending else "Running")))
        return SimpleNamespace(items=items)

    def read_namespaced_config_map(self, name: str, namespace: str, **_: Any) -> Any:
        raise ApiException(status=404, reason="Not Found")  # no log archive configured

    def read_namespaced_pod_log(self, name: str, namespace: str, container: str, _preload_content: bool = True,
                                **bounds: Any) -> Any:
        text = self.logs[name]
        if name in self.pending:  # as the API server answers for a container that never started
            raise ApiException(status=400, reason="Bad Request")
        if text is None:
            raise ApiException(status=500, reason="Internal Server Error")
        return _Answer(text)


def _run(monkeypatch: pytest.MonkeyPatch, logs: dict[str, bytes | None], pending: tuple[str, ...] = (),
         forged: dict[str, str] | None = None) -> int:
    # The original held lent GPUs (the gate admitted it) and was stopped to give them back: preempted.
    original = workflow("train-z", "chat", 1, "preempted", phase="Failed", created=60, run_id="z",
                        annotations={ANNOTATION_ADMITTED_AT: ts(55)})
    copy = workflow("train-z-p1", "chat", 1, "admitted", phase="Running", created=30, run_id="z")
    pool = build_pool([state_configmap("chat", chat_state())], [deployment("chat", 10, 10)], [original, copy],
                      SERVING, NOW)
    reader = SimpleNamespace(research_namespace="research", core=_Core(logs, pending, forged),
                             api=client.ApiClient(), access=may_all())
    monkeypatch.setattr(r, "_reader", lambda args: reader)
    monkeypatch.setattr(r, "read_pool", lambda args, reader=None: pool)
    return r._guarded(r._cmd_logs)(argparse.Namespace(name="z", step=None, follow=False, command="logs"))


def test_both_attempts_are_listed_in_order_and_the_resumed_one_is_marked(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(monkeypatch, {"train-z-job-1": b"start at step 0 of 900\nSIGTERM: checkpointed at step 450\n",
                              "train-z-p1-job-2": b"start at step 450 of 900\n"}) == 0
    assert capsys.readouterr().out.splitlines() == [
        "==> train-z / train-z-job-1 (attempt 1 of 2, preempted) <==",
        "start at step 0 of 900", "SIGTERM: checkpointed at step 450",
        "==> train-z-p1 / train-z-p1-job-2 (attempt 2 of 2, running, resumed from the last checkpoint) <==",
        "start at step 450 of 900"]


def test_an_attempt_whose_pods_are_gone_is_named(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(monkeypatch, {"train-z-p1-job-2": b"start at step 450 of 900\n"}) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("==> train-z (attempt 1 of 2, preempted): no pods left (deleted when it was stopped; "
                      "no log archive is configured: `offhours render --log-archive` keeps them) <==")
    assert out[1].startswith("==> train-z-p1 / train-z-p1-job-2 (attempt 2 of 2")


def test_an_unreadable_log_fails_the_command_after_the_readable_ones(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # As on a cluster whose nodes run no kubelet: the API server answers 500 for the pod's log.
    assert _run(monkeypatch, {"train-z-job-1": None, "train-z-p1-job-2": b"start at step 450 of 900\n"}) == 1
    captured = capsys.readouterr()
    assert "start at step 450 of 900" in captured.out  # the readable log is still printed
    assert "HTTP 500" in captured.out
    assert captured.err.startswith("logs: 1 pod log(s) could not be read; the first: log of train-z-job-1")


def test_a_pod_that_never_started_has_no_log_and_is_no_failure(monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    # `argo submit` with no room: the original's pod stays Pending (unschedulable) until the gate stops it.
    assert _run(monkeypatch, {"train-z-job-1": b"", "train-z-p1-job-2": b"start at step 0 of 900\n"},
                pending=("train-z-job-1",)) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["==> train-z / train-z-job-1 (attempt 1 of 2, preempted) <==", "(not started yet: no log)"]


def test_a_pod_labelled_with_the_run_s_workflow_but_not_owned_by_it_is_not_shown(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # Anyone who may create pods in the namespace can put Argo's workflow label on one: its log is theirs, not the run's.
    assert _run(monkeypatch, {"train-z-p1-job-2": b"start at step 450 of 900\n", "decoy-pod-1": b"forged output\n"},
                forged={"decoy-pod-1": "train-z-p1"}) == 0
    out = capsys.readouterr().out
    assert "forged output" not in out and "decoy-pod-1" not in out
    assert "start at step 450 of 900" in out  # the run's own pod is still shown


def test_a_pod_log_past_the_cap_is_cut_said_and_asked_no_further(monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """The API server is asked for the cap and one byte (limitBytes); what it sends past the cap is never printed."""
    asked: list[dict[str, Any]] = []
    real = _Core.read_namespaced_pod_log

    def recording(self: _Core, name: str, namespace: str, container: str, _preload_content: bool = True,
                  **bounds: Any) -> Any:
        asked.append(bounds)
        return real(self, name, namespace, container, _preload_content)

    monkeypatch.setattr(_Core, "read_namespaced_pod_log", recording)
    monkeypatch.setattr(r, "LOG_BYTES", 100)
    assert _run(monkeypatch, {"train-z-job-1": b"a" * 99 + b"\n" + b"b" * 5000,
                              "train-z-p1-job-2": b"start at step 450 of 900\n"}) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1:3] == ["a" * 99, "(log longer than 100 bytes: cut there: 100 bytes shown)"]
    assert all(b["limit_bytes"] == 101 and b["_request_timeout"] for b in asked)


def test_every_api_request_of_logs_is_bounded_in_time(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A stalled API server never hangs `logs` (without --follow): every request it makes carries a timeout."""
    asked: list[tuple[str, dict[str, Any]]] = []
    for method in ("list_namespaced_pod", "read_namespaced_config_map", "read_namespaced_pod_log"):
        real = getattr(_Core, method)

        def recording(self: _Core, *args: Any, _real: Any = real, _name: str = method, **kwargs: Any) -> Any:
            asked.append((_name, kwargs))
            return _real(self, *args, **{k: v for k, v in kwargs.items() if k not in ("_request_timeout",)})

        monkeypatch.setattr(_Core, method, recording)
    assert _run(monkeypatch, {"train-z-job-1": b"x\n", "train-z-p1-job-2": b"y\n"}) == 0
    assert {name for name, _ in asked} == {"list_namespaced_pod", "read_namespaced_config_map", "read_namespaced_pod_log"}
    assert [name for name, kwargs in asked if not kwargs.get("_request_timeout")] == []


class _PagedCore(_Core):
    """As `_Core`, with the API server's pages (limit/continue), and `flood` more pods labelled with workflow train-z."""

    def __init__(self, logs: dict[str, bytes | None], flood: int) -> None:
        super().__init__(logs)
        self.flood, self.listed = flood, 0

    def list_namespaced_pod(self, namespace: str, label_selector: str, **kwargs: Any) -> Any:
        everything = super().list_namespaced_pod(namespace, label_selector).items
        if label_selector.endswith("=train-z"):
            everything += [client.V1Pod(metadata=client.V1ObjectMeta(
                name=f"decoy-{i}", owner_references=[_owner("tenants-own")],
                labels={"workflows.argoproj.io/workflow": "train-z"})) for i in range(self.flood)]
        start = int(kwargs.get("_continue") or 0)
        limit = kwargs.get("limit") or len(everything)
        page = everything[start:start + limit]
        self.listed += len(page)
        more = str(start + limit) if start + limit < len(everything) else None
        return SimpleNamespace(items=page, metadata=SimpleNamespace(_continue=more))


def test_a_flood_of_pods_labelled_with_a_run_s_workflow_is_read_in_bounded_pages(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Anyone may label pods with a workflow's name: `logs` reads them a page at a time and never past its bound."""
    from offhours.scripts.cluster.base import MAX_WORKFLOW_PODS

    core = _PagedCore({"train-z-job-1": b"x\n", "train-z-p1-job-2": b"y\n"}, flood=3 * MAX_WORKFLOW_PODS)
    original = workflow("train-z", "chat", 1, "preempted", phase="Failed", created=60, run_id="z",
                        annotations={ANNOTATION_ADMITTED_AT: ts(55)})
    copy = workflow("train-z-p1", "chat", 1, "admitted", phase="Running", created=30, run_id="z")
    pool = build_pool([state_configmap("chat", chat_state())], [deployment("chat", 10, 10)], [original, copy],
                      SERVING, NOW)
    reader = SimpleNamespace(research_namespace="research", core=core, api=client.ApiClient(), access=may_all())
    monkeypatch.setattr(r, "_reader", lambda args: reader)
    monkeypatch.setattr(r, "read_pool", lambda args, reader=None: pool)
    code = r._guarded(r._cmd_logs)(argparse.Namespace(name="z", step=None, follow=False, command="logs"))
    captured = capsys.readouterr()
    assert core.listed <= 2 * MAX_WORKFLOW_PODS, core.listed
    assert code == 1 and captured.err.count("\n") == 1 and f"more than {MAX_WORKFLOW_PODS}" in captured.err, captured
