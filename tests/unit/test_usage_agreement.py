"""`offhours report`, `offhours usage` and the console's usage page give the same numbers on the same cluster objects.

One cluster history, read through the same reader by all three (NOW is 2025-03-14 12:00Z):
- `long-parked` (chat, 2 x 4 GPUs): submitted in January, parked until its admission on 10 February, 12 h lent,
  its pod a minute after;
- `boundary` (chat, 1 x 4 GPUs): lent from 28 February 20:00 to 1 March 04:00, across the month's end;
- run `rl` (code, 2 x 2 GPUs): `rl-x` preempted an hour after its checkpoint, its copy `rl-x-p1` admitted and
  preempted again (its only checkpoint is the one it inherited, older than its start), `rl-x-p2` admitted 16 h
  ago, Running to Argo, its pod still Pending (lent but unused);
- `dropped` (chat): parked, cancelled before any admission.
"""

import argparse
import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from offhours.scripts.cli import jobs, report
from offhours.scripts.console.app import create_app
from offhours.scripts.console.source import PoolSource
from offhours.scripts.pool.model import Pool
from offhours.scripts.pool.reader import PoolReader
from offhours.scripts.pool.usage import usage_by_month
from tests.support.access import may_all
from tests.support.pool_fixture import SERVING, chat_state, deployment, state_configmap, workflow

NOW = datetime(2025, 3, 14, 12, 0, tzinfo=timezone.utc)


def ago(at: str) -> float:
    """Minutes before NOW (what the fixture's builders take)."""
    return (NOW - datetime.fromisoformat(at.replace("Z", "+00:00"))).total_seconds() / 60


def with_pod(wf: dict[str, Any], started: str, phase: str = "Succeeded") -> dict[str, Any]:
    wf["status"]["nodes"] = {wf["metadata"]["name"]: {"type": "DAG", "startedAt": started},
                             f"{wf['metadata']['name']}-1": {"type": "Pod", "startedAt": started, "phase": phase}}
    return wf


def history() -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    configmaps = [state_configmap("chat", chat_state()), state_configmap("code", chat_state() | {"deploymentUID": "uid-code"})]
    deployments = [deployment("chat", 8, 8, gpus=4), deployment("code", 4, 4, gpus=2)]
    workflows = [
        with_pod(workflow("long-parked", "chat", 2, "returned", "Succeeded", created=ago("2025-01-20T09:00:00Z"),
                          started=ago("2025-01-20T09:00:00Z"), finished=ago("2025-02-10T20:01:00Z"), gpu_seconds=86400,
                          annotations={"offhours.io/admitted-at": "2025-02-10T08:00:00Z",
                                       "offhours.io/returned-at": "2025-02-10T20:00:00Z"}), "2025-02-10T08:01:00Z"),
        with_pod(workflow("boundary", "chat", 1, "returned", "Succeeded", created=ago("2025-02-28T18:00:00Z"),
                          started=ago("2025-02-28T18:00:00Z"), finished=ago("2025-03-01T04:00:00Z"), gpu_seconds=115200,
                          annotations={"offhours.io/admitted-at": "2025-02-28T20:00:00Z",
                                       "offhours.io/returned-at": "2025-03-01T04:00:00Z"}), "2025-02-28T20:00:00Z"),
        with_pod(workflow("rl-x", "code", 2, "preempted", "Failed", created=ago("2025-03-02T10:00:00Z"), run_id="rl",
                          started=ago("2025-03-02T10:00:00Z"), finished=ago("2025-03-03T10:02:00Z"), gpu_seconds=86000,
                          shutdown="Stop",
                          annotations={"offhours.io/admitted-at": "2025-03-02T10:05:00Z",
                                       "offhours.io/last-checkpoint": "2025-03-03T09:00:00Z",
                                       "offhours.io/preempted-at": "2025-03-03T10:00:00Z"}), "2025-03-02T10:05:00Z"),
        with_pod(workflow("rl-x-p1", "code", 2, "preempted", "Failed", created=ago("2025-03-03T10:02:00Z"), run_id="rl",
                          started=ago("2025-03-03T10:02:00Z"), finished=ago("2025-03-06T02:31:00Z"), gpu_seconds=16200,
                          shutdown="Stop", labels={"offhours.io/copy-of": "uid-rl-x"},
                          annotations={"offhours.io/preemptions": "1", "offhours.io/parked-from": "rl-x",
                                       "offhours.io/admitted-at": "2025-03-05T22:00:00Z",
                                       "offhours.io/last-checkpoint": "2025-03-03T09:00:00Z",
                                       "offhours.io/preempted-at": "2025-03-06T02:30:00Z"}), "2025-03-05T22:01:00Z"),
        with_pod(workflow("rl-x-p2", "code", 2, "admitted", "Running", created=ago("2025-03-06T02:31:00Z"), run_id="rl",
                          started=ago("2025-03-06T02:31:00Z"), labels={"offhours.io/copy-of": "uid-rl-x-p1"},
                          annotations={"offhours.io/preemptions": "2", "offhours.io/parked-from": "rl-x-p1",
                                       "offhours.io/admitted-at": "2025-03-13T20:00:00Z"}), "2025-03-13T20:00:00Z",
                 phase="Pending"),
        workflow("dropped", "chat", 1, "parked", "Failed", created=ago("2025-03-10T08:00:00Z"), suspend=True,
                 finished=ago("2025-03-11T08:00:10Z"), shutdown="Stop",
                 annotations={"offhours.io/cancelled-at": "2025-03-11T08:00:00Z"}),
    ]
    return configmaps, deployments, workflows


class Api:
    """The list calls of the Kubernetes API, answering the history's objects as JSON dicts."""

    def __init__(self, configmaps: list[dict[str, Any]], deployments: list[dict[str, Any]],
                 workflows: list[dict[str, Any]]) -> None:
        self.configmaps, self.deployments, self.workflows = configmaps, deployments, workflows

    def list_namespaced_config_map(self, namespace: str) -> dict[str, Any]:
        return {"items": self.configmaps}

    def list_namespaced_deployment(self, namespace: str) -> dict[str, Any]:
        return {"items": self.deployments}

    def list_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str,
                                      label_selector: str = "") -> dict[str, Any]:
        return {"items": [w for w in self.workflows if label_selector in w["metadata"]["labels"]]}


class Reader(PoolReader):
    """The pool reader over `Api`, reading at NOW."""

    def __init__(self) -> None:
        super().__init__(SERVING, "research")
        self.core = self.apps = self.custom = Api(*history())
        self.access = may_all()

    def read(self, now: datetime | None = None, require_workflows: bool = False) -> Pool:
        return super().read(now or NOW, require_workflows)


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> argparse.ArgumentParser:
    monkeypatch.setattr(report, "_reader", lambda args, config: Reader())
    monkeypatch.setattr(jobs, "_reader", lambda args: Reader())
    root = argparse.ArgumentParser(prog="offhours")
    sub = root.add_subparsers(dest="command", required=True)
    report.register(sub)
    jobs.register(sub)
    jobs.register_actions(sub)
    return root


def run(cli: argparse.ArgumentParser, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    args = cli.parse_args(argv)
    assert args.func(args) == 0
    return capsys.readouterr().out


def report_rows(cli: argparse.ArgumentParser, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / "report.json"
    run(cli, capsys, "report", "--json", str(out))
    return {f"{r['service']}/{r['month']}": r for r in json.loads(out.read_text())}


def usage_csv(cli: argparse.ArgumentParser, capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, list[float]]:
    lines = run(cli, capsys, "usage", "--csv", *argv).splitlines()
    assert lines[0] == "service,runs,gpu_hours_used,gpu_hours_lost_to_preemption,gpu_hours_lent"
    return {key: [float(x) for x in rest] for key, *rest in (line.split(",") for line in lines[1:])}


def console_page() -> dict[str, dict[str, str]]:
    page = create_app(PoolSource(Reader(), interval=0)).test_client().get("/usage").get_data(as_text=True)
    return {key: dict(re.findall(r'data-field="(\w+)">([^<]*)<', row))
            for key, row in re.findall(r'<tr data-key="([^"]+)">(.*?)</tr>', page, re.S)}


def test_the_three_surfaces_agree(cli: argparse.ArgumentParser, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    reported = report_rows(cli, capsys, tmp_path)
    console = {f"{r.service}/{r.month}": r for r in usage_by_month(Reader().read())}
    page = console_page()
    assert list(reported) == list(console) == list(page) == ["chat/2025-02", "chat/2025-03", "code/2025-03"]
    for key, row in reported.items():
        shown = console[key]
        assert (row["runs"], row["preemptions"], row["gpuHoursUsed"], row["gpuHoursLent"], row["gpuMinutesLentUnused"]) \
            == (len(shown.runs), shown.preemptions, shown.used, shown.lent, shown.unused * 60)
        assert page[key] == {"runs": str(len(shown.runs)), "preemptions": str(shown.preemptions), "used": f"{shown.used:.2f}",
                             "lost": f"{shown.lost:.2f}", "lent": f"{shown.lent:.2f}", "unused": f"{shown.unused * 60:.0f}"}

    everything = usage_csv(cli, capsys)
    assert list(everything) == ["chat", "code"]
    for service, (runs, used, lost, lent) in everything.items():
        months = [console[k] for k in console if k.startswith(f"{service}/")]
        assert used == pytest.approx(sum(m.used for m in months), abs=0.005)
        assert lost == pytest.approx(sum(m.lost for m in months), abs=0.005)
        assert lent == pytest.approx(sum(m.lent for m in months), abs=0.005)
    assert [everything["chat"][0], everything["code"][0]] == [3, 1]

    march = usage_csv(cli, capsys, "--since", "2025-03-01")
    for service, (runs, used, lost, lent) in march.items():
        shown = console[f"{service}/2025-03"]
        assert [runs, used, lost, lent] == [len(shown.runs), *(pytest.approx(x, abs=0.005) for x in (shown.used, shown.lost,
                                                                                              shown.lent))]


def test_the_rules_on_that_history(cli: argparse.ArgumentParser, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    reported = report_rows(cli, capsys, tmp_path)
    console = {f"{r.service}/{r.month}": r for r in usage_by_month(Reader().read())}
    feb, mar, code = reported["chat/2025-02"], reported["chat/2025-03"], reported["code/2025-03"]
    assert (feb["runs"], feb["workflows"], feb["gpuHoursLent"]) == (2, 2, pytest.approx(12 * 8 + 4 * 4))
    assert (mar["runs"], mar["workflows"], mar["gpuHoursLent"]) == (2, 2, pytest.approx(4 * 4))
    assert (feb["gpuHoursUsed"], mar["gpuHoursUsed"]) == (pytest.approx(24 + 16), pytest.approx(16))
    lent_hours = (23 + 55 / 60) + 4.5 + 16
    assert (code["runs"], code["workflows"], code["preemptions"], code["gpuHoursLent"]) == (
        1, 3, 2, pytest.approx(lent_hours * 4))
    assert console["code/2025-03"].lost == pytest.approx((1 + (4 + 29 / 60)) * 4)
    table = run(cli, capsys, "report").splitlines()
    assert table[-1].split()[:4] == ["total", "4", "6", "2"]


def test_lent_unused_gpu_minutes_agree_with_the_gauge(cli: argparse.ArgumentParser, capsys: pytest.CaptureFixture[str],
                                                      tmp_path: Path) -> None:
    """The report's lent-but-unused GPU-minutes, the console's page and the gauge are one definition: `rl-x-p2`'s
    4 GPUs lent 16 h with its pod Pending (though Argo says Running) are 3840 GPU-minutes and the gauge's 4 now;
    a pod a minute after admission is a minute of its GPUs unused."""
    reported = report_rows(cli, capsys, tmp_path)
    assert {k: r["gpuMinutesLentUnused"] for k, r in reported.items()} == pytest.approx(
        {"chat/2025-02": 1 * 8, "chat/2025-03": 0, "code/2025-03": 1 * 4 + 16 * 60 * 4})
    assert {k: p["unused"] for k, p in console_page().items()} == {
        "chat/2025-02": "8", "chat/2025-03": "0", "code/2025-03": "3844"}
    page = create_app(PoolSource(Reader(), interval=0)).test_client().get("/metrics").get_data(as_text=True)
    assert 'offhours_service_lent_unused_gpus{service="code"} 4' in page
    assert 'offhours_service_lent_unused_gpus{service="chat"} 0' in page
    table = run(cli, capsys, "report").splitlines()
    assert "unused GPU-min" in table[0] and table[-1].split()[6] == "3,852"
