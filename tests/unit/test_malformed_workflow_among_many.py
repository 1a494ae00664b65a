"""One malformed workflow among thousands: `report`, `usage` and the console's pages skip it, name it, report the rest."""

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from offhours.scripts.cli import jobs, report
from offhours.scripts.cli.main import main
from offhours.scripts.console.app import create_app
from offhours.scripts.console.source import PoolSource
from offhours.scripts.pool.model import build_pool
from tests.support.pool_fixture import NOW, SERVING, chat_state, deployment, state_configmap, ts, workflow
from tests.support.tenant_pool import Reader

Wf = dict[str, Any]


def _set(path: tuple[str, ...], value: Any) -> Callable[[Wf], None]:
    def apply(wf: Wf) -> None:
        target = wf
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return apply


# Shapes a hostile or buggy writer can give a workflow object (the minimal Argo CRD keeps status and spec open).
MALFORMED = {
    "metadata is a string": _set(("metadata",), "broken"),
    "labels are a list": _set(("metadata", "labels"), ["offhours.io/service=chat"]),
    "annotations are a list": _set(("metadata", "annotations"), ["x"]),
    "spec is a list": _set(("spec",), ["x"]),
    "status is a list": _set(("status",), ["x"]),
    "resourcesDuration is a list": _set(("status", "resourcesDuration"), [1, 2]),
}


def fleet(count: int, broken: Callable[[Wf], None]) -> list[Wf]:
    wfs = [workflow(f"job-{i}", "chat", 1, "admitted", "Succeeded", created=100, started=90, finished=30,
                    gpu_seconds=3600, annotations={"offhours.io/admitted-at": ts(90)}) for i in range(count)]
    bad = copy.deepcopy(wfs[count // 2])
    bad["metadata"]["name"] = "the-bad-one"
    bad["status"]["resourcesDuration"] = {"nvidia.com/gpu": 3600}
    broken(bad)
    return [*wfs[:count // 2], bad, *wfs[count // 2:]]


def pool_of(wfs: list[Wf]):
    return build_pool([state_configmap("chat", chat_state())], [deployment("chat", 8, 8, gpus=4)], wfs, SERVING, NOW)


@pytest.mark.parametrize("fault", sorted(MALFORMED))
def test_report_usage_and_the_console_skip_the_malformed_one_and_count_the_rest(
        fault: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    """Fault: one workflow of 2,000 is malformed as named; every other workflow is still counted."""
    pool = pool_of(fleet(2000, MALFORMED[fault]))
    monkeypatch.setattr(report, "_reader", lambda args, config: Reader(pool))
    monkeypatch.setattr(jobs, "_reader", lambda args: Reader(pool))

    assert main(["report", "--json", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr()
    (row,) = json.loads((tmp_path / "r.json").read_text())
    assert row["workflows"] == 2000 and row["gpuHoursUsed"] == pytest.approx(2000.0)
    named = [line for line in out.err.splitlines() if "the-bad-one" in line or "without metadata" in line]
    assert len(named) == 1 and "skipped" in named[0], out.err

    assert main(["usage", "--csv"]) == 0
    out = capsys.readouterr()
    assert out.out.splitlines()[1].split(",")[:3] == ["chat", "2000", "2000.00"]
    assert sum("skipped" in line for line in out.err.splitlines()) == 1

    page = create_app(PoolSource(Reader(pool), interval=0)).test_client().get("/usage")
    assert page.status_code == 200
    text = page.get_data(as_text=True)
    assert "2000.00" in text and "skipped" in text


@pytest.mark.parametrize("fault", sorted(MALFORMED))
def test_every_console_page_answers_200_and_jobs_and_why_print(fault: str, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Fault: the same malformed workflow among others; no page is a 500, no verb a traceback."""
    pool = pool_of(fleet(20, MALFORMED[fault]))
    client = create_app(PoolSource(Reader(pool), interval=0)).test_client()
    for path in ("/", "/queue", "/usage", "/metrics", "/jobs/job-0", "/jobs/the-bad-one"):
        assert client.get(path).status_code in (200, 404), path
    monkeypatch.setattr(jobs, "_reader", lambda args: Reader(pool))
    for argv in (["jobs", "--all", "-o", "wide"], ["jobs", "-o", "json"], ["why", "job-0"], ["usage", "--by", "user"]):
        assert main(argv) == 0, argv
    assert "Traceback" not in capsys.readouterr().err


def test_a_replicas_label_past_a_float_is_read_as_no_replicas_and_its_gpu_time_still_counted(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    """Fault: a tenant's replicas label of 400 digits: the codec's one parse reads it as no replicas (the gate
    names it as that job's problem), so the read model keeps the workflow, and the GPU time it really used."""
    pool = pool_of(fleet(2000, _set(("metadata", "labels", "offhours.io/replicas"), "9" * 400)))
    monkeypatch.setattr(report, "_reader", lambda args, config: Reader(pool))
    assert main(["report", "--json", str(tmp_path / "r.json")]) == 0
    (row,) = json.loads((tmp_path / "r.json").read_text())
    assert row["workflows"] == 2001 and row["gpuHoursUsed"] == pytest.approx(2001.0)
    assert [j.replicas for j in pool.jobs if j.name == "the-bad-one"] == [0]
