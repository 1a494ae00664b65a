"""One tenant-written annotation on a workflow is that workflow's odd value, never the service's failed tick."""

import pytest

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
