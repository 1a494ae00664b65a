"""`offhours report`: the sums over workflow objects with known resourcesDuration."""

from datetime import datetime, timezone
from typing import Any

import pytest

from offhours.scripts.pool.model import build_pool
from offhours.scripts.pool.usage import UsageRow, render_table, unknown_gpus, usage_by_month


def wf(name: str, service: str, started: str, gpu_seconds: float | None, replicas: int = 2,
       admitted: str | None = None, finished: str | None = None, state: str = "returned",
       run_id: str | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"offhours.io/service": service, "offhours.io/replicas": str(replicas),
                                              "offhours.io/state": state, "offhours.io/run-id": run_id or name},
                     "annotations": {"offhours.io/admitted-at": admitted} if admitted else {}},
        "status": {"startedAt": started, "finishedAt": finished,
                   "resourcesDuration": {"cpu": 10, **({"nvidia.com/gpu": gpu_seconds} if gpu_seconds else {})}},
    }


WORKFLOWS = [
    wf("a", "chat", "2026-10-03T20:00:00Z", 8 * 3600 * 10, admitted="2026-10-03T20:05:00Z",
       finished="2026-10-04T06:05:00Z"),
    wf("b", "chat", "2026-10-10T21:00:00Z", 8 * 3600 * 2, state="preempted", run_id="r-b",
       admitted="2026-10-10T21:00:00Z", finished="2026-10-10T23:00:00Z"),
    wf("b-p1", "chat", "2026-10-11T21:00:00Z", 8 * 3600 * 3, run_id="r-b", admitted="2026-10-11T21:00:00Z",
       finished="2026-10-12T00:00:00Z"),
    wf("c", "code", "2026-11-01T01:00:00Z", None),
    {"metadata": {"name": "stranger", "labels": {}}, "status": {"startedAt": "2026-10-01T00:00:00Z"}},
]


NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)


def usage(workflows: list[dict[str, Any]], gpus_per_replica: dict[str, int], now: datetime = NOW) -> list[UsageRow]:
    return usage_by_month(build_pool([], [], workflows, "serving", now), gpus_per_replica)


def test_usage_sums_per_service_and_month() -> None:
    rows = {(r.service, r.month): r for r in usage(WORKFLOWS, {"chat": 4})}
    assert set(rows) == {("chat", "2026-10"), ("code", "2026-11")}
    chat = rows[("chat", "2026-10")]
    assert len(chat.runs) == 2 and len(chat.workflows) == 3 and chat.preemptions == 1
    assert chat.used == pytest.approx(8 * 15)
    # Lent: 2 replicas x 4 GPUs x (10 h + 2 h + 3 h).
    assert chat.lent == pytest.approx(8 * 15)
    assert chat.equivalent_gpus() == pytest.approx(120 / (31 * 24))
    assert rows[("code", "2026-11")].used == 0


def test_running_workflow_is_lent_until_now() -> None:
    now = datetime(2026, 10, 5, 0, 0, tzinfo=timezone.utc)
    rows = usage([wf("live", "chat", "2026-10-04T22:00:00Z", None, replicas=1, admitted="2026-10-04T22:00:00Z",
                     state="admitted")], {"chat": 8}, now=now)
    assert rows[0].lent == pytest.approx(2 * 8)


def test_table_has_the_original_reports_columns() -> None:
    text = render_table(usage(WORKFLOWS, {"chat": 4}), price=2.5)
    assert "runs" in text and "workflows" in text and "GPU-h used" in text and "equiv GPUs" in text and "saving" in text
    total = text.splitlines()[-1]
    assert total.split()[:4] == ["total", "3", "4", "1"] and total.endswith("300")


def test_services_whose_lent_gpus_are_unknown_are_named() -> None:
    # chat's jobs were admitted but no Deployment or configuration says its GPUs per replica; code's job never was.
    pool = build_pool([], [], WORKFLOWS, "serving", NOW)
    assert unknown_gpus(pool) == ["chat"]
    assert unknown_gpus(pool, {"chat": 4}) == []
    assert usage_by_month(pool)[0].lent == 0.0  # not guessed
