"""`offhours schedule list` with one malformed CronWorkflow or run among good ones (the minimal Argo CRD keeps spec open)."""

from datetime import UTC, datetime

import pytest

from offhours.scripts.cli.schedule import render_rows, schedule_rows

NOW = datetime(2025, 1, 15, 13, 0, tzinfo=UTC)
GOOD = {"metadata": {"name": "nightly"}, "spec": {"schedules": ["0 21 * * *"], "timezone": "UTC",
                                                 "workflowSpec": {"workflowTemplateRef": {"name": "offhours-job"}}}}
RUN = {"metadata": {"name": "nightly-1", "labels": {"offhours.io/schedule": "nightly", "offhours.io/run-id": "n-1"}},
       "spec": {}, "status": {"phase": "Running"}}

BROKEN_CRONS = {
    "a schedule line is a number": {"metadata": {"name": "bad"}, "spec": {"schedules": [5]}},
    "the time zone is a number": {"metadata": {"name": "bad"}, "spec": {"schedules": ["0 1 * * *"], "timezone": 5}},
    "spec is a list": {"metadata": {"name": "bad"}, "spec": ["x"]},
    "workflowSpec is a string": {"metadata": {"name": "bad"}, "spec": {"schedules": ["0 1 * * *"], "workflowSpec": "x"}},
    "workflowTemplateRef is a string": {"metadata": {"name": "bad"},
                                        "spec": {"schedules": ["0 1 * * *"], "workflowSpec": {"workflowTemplateRef": "x"}}},
    "metadata is a string": {"metadata": "x", "spec": {}},
}
BROKEN_RUNS = {
    "run metadata is a string": {"metadata": "x"},
    "run labels are a list": {"metadata": {"name": "r", "labels": ["x"]}},
    "run without a name": {"metadata": {"labels": {"offhours.io/schedule": "nightly"}}},
    "run spec is a list": {"metadata": {"name": "r", "labels": {"offhours.io/schedule": "nightly"}}, "spec": ["x"]},
}


@pytest.mark.parametrize("fault", sorted(BROKEN_CRONS))
def test_a_malformed_cron_workflow_is_named_and_the_others_listed(fault: str) -> None:
    """Fault: one tenant's malformed CronWorkflow made `schedule list` a traceback for the whole namespace."""
    rows = schedule_rows([GOOD, BROKEN_CRONS[fault]], [RUN], NOW)
    text = render_rows(rows)
    assert "nightly-1  n-1  running" in text
    good = next(r for r in rows if r.name == "nightly")
    assert good.next == "2025-01-15 21:00 UTC"
    (bad,) = [r for r in rows if r.name != "nightly"]
    assert bad.next.startswith("unreadable")


@pytest.mark.parametrize("fault", sorted(BROKEN_RUNS))
def test_a_malformed_run_is_skipped_and_the_others_listed(fault: str) -> None:
    """Fault: one malformed workflow labelled with a schedule made `schedule list` a traceback."""
    rows = schedule_rows([GOOD], [BROKEN_RUNS[fault], RUN], NOW)
    assert ("nightly-1", "n-1", "running") in rows[0].runs
