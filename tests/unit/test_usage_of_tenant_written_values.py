"""Usage on tenant-written times and numbers: every workflow annotation (and status) is the tenant's to write.

The monthly cut walks every UTC month between a workflow's earliest and latest time, and the lent and
lost spans come from annotations: an absurd value must neither crash a surface nor count GPU-hours
that were never lent.
"""

import math

from offhours.scripts.console.app import create_app
from offhours.scripts.console.source import PoolSource
from offhours.scripts.pool.usage import usage_by_month, usage_lines
from tests.support.pool_fixture import ts, workflow
from tests.support.tenant_pool import Reader, parked, pool_of, running


def test_far_future_admitted_at_does_not_crash_the_monthly_usage() -> None:
    # months() walks to December 9999 and _next_month() asks for year 10000: ValueError (report: traceback).
    rows = usage_by_month(pool_of(running({"offhours.io/admitted-at": "9999-12-31T12:00:00Z"})))
    assert [r.month for r in rows] == ["2025-03"]


def test_far_future_admitted_at_does_not_break_the_console_usage_page() -> None:
    app = create_app(PoolSource(Reader(pool_of(parked({"offhours.io/admitted-at": "9999-12-31T12:00:00Z"}))), interval=0))
    assert app.test_client().get("/usage").status_code == 200


def test_future_admitted_at_does_not_move_a_running_job_out_of_this_month() -> None:
    # A job running on 8 lent GPUs now, whose admitted-at was rewritten to the year 3000: its only row is 3000-01,
    # with 0 GPU-hours lent; March 2025 does not show it at all.
    rows = {r.month: r for r in usage_by_month(pool_of(running({"offhours.io/admitted-at": "3000-01-01T00:00:00Z"})))}
    assert list(rows) == ["2025-03"]
    assert rows["2025-03"].workflows == {"research/train"}


def test_year_one_admitted_at_with_an_offset_does_not_crash_the_monthly_usage() -> None:
    # parse_time keeps the +01:00 offset; _month_start's astimezone(utc) falls before year 1: OverflowError.
    rows = usage_by_month(pool_of(parked({"offhours.io/admitted-at": "0001-01-01T00:00:00+01:00"})))
    assert [r.month for r in rows] == ["2025-03"]


def test_a_parked_job_with_a_tenant_written_admitted_at_is_lent_nothing() -> None:
    # The module's rule: "A parked job is lent nothing while it waits, however long." One annotation on a
    # never-admitted workflow makes 663 monthly rows and ~3.9 million GPU-hours "lent".
    pool = pool_of(parked({"offhours.io/admitted-at": "1970-01-01T00:00:00Z"}))
    rows = usage_by_month(pool)
    assert len(rows) == 1
    assert sum(r.lent for r in rows) == 0.0
    assert sum(r.lent for r in usage_lines(pool)) == 0.0


def test_an_infinite_gpu_seconds_annotation_is_not_counted() -> None:
    # Without Argo's resourcesDuration, the tenant-writable `offhours.io/gpu-seconds` is the used time; the read
    # model's _float rejects NaN and negatives but lets "inf" through: report/console/usage print inf (and
    # `report --json` writes `Infinity`, which is not JSON).
    pool = pool_of(running({"offhours.io/gpu-seconds": "inf"}))
    assert all(math.isfinite(r.used) for r in usage_by_month(pool))
    assert all(math.isfinite(r.used) for r in usage_lines(pool))


def test_gpu_hours_lost_to_a_preemption_never_exceed_those_lent() -> None:
    # Admitted 110 min ago, finished 60 min ago (50 min x 8 GPUs lent); a preempted-at written after the finish
    # makes the loss run from the start to that stamp: 109 min x 8 GPUs "lost" of 50 min x 8 lent.
    wf = workflow("rl", "chat", 2, "preempted", "Failed", created=120, started=110, finished=60,
                  annotations={"offhours.io/admitted-at": ts(110), "offhours.io/preempted-at": ts(1)})
    (row,) = usage_by_month(pool_of(wf))
    assert row.lost <= row.lent
