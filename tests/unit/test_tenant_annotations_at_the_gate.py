"""One tenant-written annotation on a workflow is that workflow's odd value, never the service's failed tick."""

from typing import Any

import pytest

from offhours.scripts.cluster import workflow
from offhours.scripts.cluster.workflow import workflow_job
from tests.unit.test_gate_controller import World


@pytest.mark.parametrize("annotation", ["offhours.io/queue-position", "offhours.io/exit-seconds"])
def test_a_unicode_digit_annotation_does_not_crash_reading_the_workflow(annotation: str) -> None:
    # str.isdigit() is True for "²", which int() refuses.
    w = World()
    w.park("mine")
    w.wf("mine")["metadata"]["annotations"][annotation] = "²"
    job = workflow_job(w.wf("mine"), "chat")
    assert job is not None and job.name == "mine"


def test_one_tenant_annotation_does_not_delay_the_reclaim_of_a_service() -> None:
    w = World()
    w.lend(2)  # baseline 8: 4 replicas lent to job-0 and job-1, 4 in service
    w.park("other-tenant")
    w.wf("other-tenant")["metadata"]["annotations"]["offhours.io/queue-position"] = "²"
    out = w.tick(chat=80.0)  # load needs all 8 replicas: reclaim now
    assert out["chat"].error is None, out["chat"].error
    assert w.replicas() == 8
    assert {w.state("job-0"), w.state("job-1")} == {"preempted"}  # stopped (and parked) gracefully, not evicted


def test_a_workflow_that_cannot_be_read_at_all_is_its_own_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    # Whatever goes wrong reading one workflow (here: any exception out of the codec) is that job's problem:
    # the service still ticks, its reclaim happens, and the unreadable admitted job is stopped like the others.
    w = World()
    w.lend(2)
    read = workflow._checkpoint_prefix

    def broken(wf: dict[str, Any], *rest: Any) -> str | None:
        if wf["metadata"]["name"] == "job-0":
            raise RuntimeError("a value no parser foresaw")
        return read(wf, *rest)

    monkeypatch.setattr(workflow, "_checkpoint_prefix", broken)
    job = workflow_job(w.wf("job-0"), "chat")
    assert job is not None and job.problem is not None and "a value no parser foresaw" in job.problem
    out = w.tick(chat=80.0)
    assert out["chat"].error is None, out["chat"].error
    assert w.replicas() == 8
    assert {w.state("job-0"), w.state("job-1")} == {"preempted"}


@pytest.mark.parametrize("progress", ["1e20", "-1e20", "9999-12-31T23:59:59-01:00"])
def test_a_progress_time_no_date_can_hold_does_not_keep_its_job_from_being_stopped(progress: str) -> None:
    """Fault: a tenant's progress annotation past year 9999 made every stop of its job raise, so it was never stopped."""
    w = World()
    w.lend(2)
    w.wf("job-0")["metadata"]["annotations"]["offhours.io/last-checkpoint"] = progress
    out = w.tick(chat=80.0)  # load needs all 8 replicas: both jobs are stopped
    assert out["chat"].error is None, out["chat"].error
    assert w.replicas() == 8
    assert {w.state("job-0"), w.state("job-1")} == {"preempted"}
    assert "offhours.io/preempted-at" in w.wf("job-0")["metadata"]["annotations"]
