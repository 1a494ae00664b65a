"""Absurd tenant-written times and flags: `offhours` verbs and console pages answer with a page or one line, never a traceback."""

import pytest

from offhours.scripts.cli import jobs, report
from offhours.scripts.cli.main import main
from offhours.scripts.console.app import create_app
from offhours.scripts.console.source import PoolSource
from tests.support.tenant_pool import Reader, pool_of, running


def test_report_with_a_far_future_admitted_at_prints_a_table_not_a_traceback(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    pool = pool_of(running({"offhours.io/admitted-at": "9999-12-31T12:00:00Z"}))
    monkeypatch.setattr(report, "_reader", lambda args, config: Reader(pool))
    assert main(["report"]) == 0
    assert "2025-03" in capsys.readouterr().out


@pytest.mark.parametrize("stamp", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:00:00-05:00"])
def test_why_and_the_job_page_survive_an_out_of_range_time_with_an_offset(
        stamp: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # parse_time accepts the text (the datetime is in range in its own zone); views.stamp's astimezone(utc) is not.
    pool = pool_of(running({"offhours.io/admitted-at": stamp}))
    monkeypatch.setattr(jobs, "_reader", lambda args: Reader(pool))
    assert main(["why", "train"]) == 0
    app = create_app(PoolSource(Reader(pool), interval=0))
    assert app.test_client().get("/jobs/train").status_code == 200


def test_usage_since_far_back_is_one_line_not_a_traceback(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    pool = pool_of(running({}))
    monkeypatch.setattr(jobs, "_reader", lambda args: Reader(pool))
    assert main(["usage", "--since", "99999999w"]) == 2
    assert capsys.readouterr().err == "usage: --since '99999999w': too far back\n"
