"""A figure made without part of its inputs says so: `report` and `usage` under a caller who may not read a part.

Class: a sum printed with the confidence of a complete one while an input was missing (a Deployment the
caller may not list, a workflow that could not be counted). Mechanism: report.lower_bound_note, asked after
every table of sums, names what is missing and that the figures are lower bounds.
"""

import argparse

import pytest

from offhours.scripts.cli import jobs, report
from offhours.scripts.cli.report import lower_bound_note
from offhours.scripts.pool.model import build_pool
from tests.support.pool_fixture import NOW, SERVING, workflow
from tests.support.tenant_pool import Reader


def test_a_complete_reading_has_no_note_and_each_missing_input_is_named() -> None:
    assert lower_bound_note([], 0, 0) is None
    note = lower_bound_note(["chat"], 2, 1)
    assert note is not None and note.startswith("note: at least these figures:")
    assert "GPU-hours lent of chat are not counted" in note and "2 workflow(s)" in note and "1 read(s) failed" in note


def unreadable_deployments_pool():
    """A finished, admitted job of chat, read by someone who may not list the serving Deployments."""
    wf = workflow("train", "chat", 2, "returned", "Succeeded", created=120, started=110, finished=10,
                  annotations={"offhours.io/admitted-at": "2025-03-01T09:00:00Z"}, gpu_seconds=3600)
    return build_pool([], [], [wf], SERVING, now=NOW, problems=["list deployments in serving: no rights (HTTP 403)"])


def test_report_without_the_deployments_says_its_figures_are_lower_bounds(monkeypatch: pytest.MonkeyPatch,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(report, "_reader", lambda args, config: Reader(unreadable_deployments_pool()))
    args = argparse.Namespace(price=2.0, json=None, config=None, namespace="research", serving_namespace=None,
                              prometheus=None, since=7.0)
    assert report._report(args) == 0
    out = capsys.readouterr().out
    assert "note: at least these figures" in out and "1 read(s) failed" in out


def test_usage_without_the_deployments_says_so_too(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(jobs, "_reader", lambda args: Reader(unreadable_deployments_pool()))
    args = argparse.Namespace(by="service", since=None, csv=False, config=None, namespace="research",
                              serving_namespace=None, command="usage")
    assert jobs._guarded(jobs._cmd_usage)(args) == 0
    assert "note: at least these figures" in capsys.readouterr().out
