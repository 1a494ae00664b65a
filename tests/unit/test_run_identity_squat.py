"""Another tenant's workflow under my run id, admitted and "succeeded", got the gate to delete my parked copy.

A run id is a tenant-written label with no owner: the gate recorded the run an admitted workflow carried at
its admission, and a run whose admitted workflow succeeded is done, so the gate deleted its own parked
copies of that run. Nothing tied the succeeded workflow to the copy's lineage, and without a status
subresource a tenant can write its own workflow's `status.phase`, so no work at all was needed.

Now the gate keeps each run's lineage (the workflows it admitted for the run and the copies it made of them,
by UID): no other workflow under that run id is admitted while the lineage lives, only a workflow of the
lineage ends the run, and success is read from the root node Argo writes, never from the phase alone.
"""

from typing import Any

from offhours.scripts.names import ANNOTATION_WAITING_REASON, STATE_ADMITTED, STATE_PARKED, STATE_PREEMPTED

from .test_argo_verbs import FULL, LOW, argo_controller
from .test_gate_controller import World


def _preempted_alice() -> World:
    w = World()
    w.park("alice", replicas=2)
    for _ in range(7):
        w.tick(chat=LOW)
    w.tick(chat=FULL)
    argo_controller(w.cluster)
    assert w.state("alice") == STATE_PREEMPTED and w.state("alice-p1") == STATE_PARKED, w.log.getvalue()
    return w


def _forged_success(name: str) -> dict[str, Any]:
    """All of what Argo's controller writes on a workflow that succeeded: anyone may write it (no subresource)."""
    at = "2030-01-01T00:00:00Z"
    return {"phase": "Succeeded", "startedAt": at, "finishedAt": at,
            "nodes": {name: {"id": name, "name": name, "type": "DAG", "phase": "Succeeded", "finishedAt": at}}}


def test_a_squatter_admitted_under_my_run_id_forging_success_cannot_get_my_parked_copy_deleted() -> None:
    """The fault: my preempted run's copy waits; theirs, labelled with my run id, is admitted and writes Succeeded.

    Theirs is never admitted while my run's lineage lives (my copy carries the run, and is admitted), and its
    forged success ends nothing of mine.
    """
    w = _preempted_alice()
    w.park("bob", replicas=2, run_id="alice", priority=5)
    for _ in range(12):
        w.tick(chat=LOW)
        argo_controller(w.cluster)
    assert w.state("bob") == STATE_PARKED and w.state("alice-p1") == STATE_ADMITTED, w.log.getvalue()
    reason = w.wf("bob")["metadata"]["annotations"][ANNOTATION_WAITING_REASON]
    assert reason.startswith("not admitted: its run alice belongs to workflow alice-p1"), reason
    w.wf("bob")["status"]["phase"] = "Succeeded"  # a tenant's own write: the status is no subresource
    for _ in range(4):
        w.tick(chat=LOW)
    assert ("research", "alice-p1") in w.cluster.workflows, w.log.getvalue()
    assert w.state("alice-p1") == STATE_ADMITTED and w.record().done == (), w.log.getvalue()


def test_a_squatters_whole_forged_argo_status_while_my_copy_waits_ends_nothing_of_mine() -> None:
    """The fault: theirs writes every field of a success Argo would (root node too) while my copy still waits."""
    w = _preempted_alice()
    w.park("bob", replicas=2, run_id="alice", priority=5)
    w.tick(chat=FULL)
    w.wf("bob")["status"] = _forged_success("bob")
    for _ in range(12):
        w.tick(chat=LOW)
        argo_controller(w.cluster)
    assert ("research", "alice-p1") in w.cluster.workflows, w.log.getvalue()
    assert w.state("alice-p1") == STATE_ADMITTED and w.record().done == (), w.log.getvalue()


def test_a_forged_success_on_my_own_stopped_workflow_does_not_delete_my_copy() -> None:
    """The fault: a tenant writes `status.phase: Succeeded` on my preempted workflow (the phase alone): my copy,
    waiting for it, was deleted as the copy of a run that completed after all."""
    w = _preempted_alice()
    w.wf("alice")["status"]["phase"] = "Succeeded"
    for _ in range(12):
        w.tick(chat=LOW)
        argo_controller(w.cluster)
    assert w.state("alice-p1") == STATE_ADMITTED, w.log.getvalue()


def test_my_own_run_that_succeeded_is_still_done() -> None:
    """What survives the stricter reading: my copy runs and Argo finishes it: my run is done, once."""
    w = _preempted_alice()
    for _ in range(12):
        w.tick(chat=LOW)
        argo_controller(w.cluster)
    assert w.state("alice-p1") == STATE_ADMITTED, w.log.getvalue()
    w.cluster.finish("research", "alice-p1", "Succeeded")
    w.tick(chat=LOW)
    assert [r for r, _ in w.record().done] == ["alice"], w.log.getvalue()
