"""One run of two services sharing one research namespace: the one-run-at-a-time rule held per service only.

Each service's plan reads its own workflows: a preempted run's copy waiting for `chat` and a workflow of
the same run for `code` (the owner moved it to the service with room: `argo resubmit`, relabelled) were
both admitted, two writers on one checkpoint prefix.
"""

from offhours.scripts.names import ANNOTATION_WAITING_REASON, LABEL_RUN_ID, STATE_ADMITTED, STATE_PARKED, STATE_PREEMPTED

from .test_argo_verbs import FULL, LOW, argo_controller
from .test_gate_controller import World


def _preempted_on_chat() -> World:
    w = World()
    w.park("alice", replicas=2)
    for _ in range(7):
        w.tick(chat=LOW, code=LOW)
    w.tick(chat=FULL, code=LOW)
    argo_controller(w.cluster)
    assert w.state("alice") == STATE_PREEMPTED and w.state("alice-p1") == STATE_PARKED, w.log.getvalue()
    return w


def _running(w: World, run: str) -> list[str]:
    return [name for (_, name), wf in w.cluster.workflows.items()
            if wf["metadata"]["labels"].get(LABEL_RUN_ID) == run and w.state(name) == STATE_ADMITTED
            and wf["status"].get("phase") == "Running"]


def test_a_run_moved_to_another_service_never_runs_beside_its_waiting_copy() -> None:
    """The fault: the run's copy waits for chat, the same run is submitted for code; both admitted at once."""
    w = _preempted_on_chat()
    w.park("alice-on-code", svc="code", replicas=2, run_id="alice")
    for _ in range(12):
        w.tick(chat=LOW, code=LOW)
        argo_controller(w.cluster)
        assert len(_running(w, "alice")) <= 1, (_running(w, "alice"), w.log.getvalue())
    assert _running(w, "alice") == ["alice-p1"], w.log.getvalue()  # the run's own copy runs it
    reason = w.wf("alice-on-code")["metadata"]["annotations"][ANNOTATION_WAITING_REASON]
    assert reason.startswith("not admitted: its run alice belongs to workflow alice-p1, which the gate admitted"), reason


def test_once_the_other_service_is_done_with_the_run_the_waiting_copy_runs() -> None:
    """No starvation: the workflow of the other service ends (preempted, say): the waiting one is admitted."""
    w = _preempted_on_chat()
    w.park("alice-on-code", svc="code", replicas=2, run_id="alice")
    for _ in range(12):
        w.tick(chat=LOW, code=LOW)
        argo_controller(w.cluster)
    first = _running(w, "alice")
    assert len(first) == 1, w.log.getvalue()
    w.cluster.finish("research", first[0], "Failed")
    for _ in range(12):
        w.tick(chat=LOW, code=LOW)
        argo_controller(w.cluster)
    assert len(_running(w, "alice")) == 1 and _running(w, "alice") != first, w.log.getvalue()
