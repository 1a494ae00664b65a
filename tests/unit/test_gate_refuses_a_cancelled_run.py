"""The gate against a run that `offhours cancel` (or the console's cancel) cancelled.

A cancel marks each workflow of the run (`offhours.io/cancelled-at`) and stops it. A gate tick that
preempts the run's admitted workflow reads it again to park its copy: if the cancel lands between the
tick's list and that read, the copy inherited the mark and waited, parked, and a later tick admitted it;
if it lands just after the park, the copy has no mark but its original has. The cancelled run ran again.

Invariants, in words: the gate never admits, adopts or parks a copy of a workflow that carries the mark,
nor a copy (by the original's UID) of one that does; and the mark is honoured only for the workflow that
carries it (and its own copies): one that claims another run's id never stops nor blocks that run.
"""

from typing import Any

from offhours.scripts.cluster.parked import stop_patch
from offhours.scripts.cluster.workflow import build_parked_copy
from offhours.scripts.names import (
    ANNOTATION_CANCELLED_AT,
    LABEL_RUN_ID,
    LABEL_STATE,
    STATE_ADMITTED,
)

from .test_gate_controller import World

FULL = 100.0  # requests per second: every replica needed
IDLE = 1.0


def _cancel(w: World, name: str) -> None:
    """The cancel's patch as the CLI writes it (`parked.stop_patch`), merged as the API server merges it."""
    body = stop_patch("2026-01-01T00:00:00Z")
    wf = w.wf(name)
    wf["metadata"].setdefault("annotations", {}).update(body["metadata"]["annotations"])
    for key, value in body["spec"].items():
        if value is None:
            wf["spec"].pop(key, None)
        else:
            wf["spec"][key] = value


def _running_of_run(w: World, run: str) -> list[str]:
    """The run's workflows that run or may run: not stopped, and resumed (no `suspend`) or labelled admitted."""
    return sorted(name for (_, name), wf in w.cluster.workflows.items()
                  if wf["metadata"]["labels"].get(LABEL_RUN_ID) == run and not wf["spec"].get("shutdown")
                  and (not wf["spec"].get("suspend") or wf["metadata"]["labels"].get(LABEL_STATE) == STATE_ADMITTED))


def _stopped_everywhere(w: World, name: str) -> None:
    w.wf(name).setdefault("status", {})["phase"] = "Failed"  # Argo's phase for a stopped workflow


def _cancel_before_the_park(w: World, name: str) -> None:
    real = w.cluster.park_copy

    def park_copy(namespace: str, job: Any, *args: Any) -> Any:
        if job.name == name:
            _cancel(w, name)  # the cancel lands after the tick listed the job, before its park reads it
        return real(namespace, job, *args)

    w.cluster.park_copy = park_copy  # type: ignore[method-assign]


def test_a_cancel_that_lands_before_the_park_leaves_no_copy_to_admit() -> None:
    w = World()
    w.lend(1)
    _cancel_before_the_park(w, "job-0")
    out = w.tick(chat=FULL)["chat"]
    assert out.plan is not None and [j.name for j in out.plan.stop] == ["job-0"]
    assert w.wf("job-0")["spec"].get("shutdown") == "Stop"  # stopped all the same
    copies = [n for (_, n), wf in w.cluster.workflows.items() if n != "job-0"
              and wf["metadata"]["labels"].get(LABEL_RUN_ID) == "job-0"]
    assert copies == [], "a workflow marked cancelled is never copied"
    _stopped_everywhere(w, "job-0")
    for _ in range(8):
        w.tick(chat=IDLE)
    assert _running_of_run(w, "job-0") == []
    assert w.replicas() == 8


def test_a_parked_copy_that_inherited_the_mark_is_never_admitted_and_is_stopped() -> None:
    # As an older gate parked it: a copy of a cancelled workflow, with the mark, suspended and waiting.
    w = World()
    w.lend(1)
    w.tick(chat=FULL)  # job-0 preempted, job-0-p1 parked
    marked = build_parked_copy(w.wf("job-0"))
    _cancel(w, "job-0")
    _stopped_everywhere(w, "job-0")
    marked["metadata"]["annotations"][ANNOTATION_CANCELLED_AT] = "2026-01-01T00:00:00Z"  # copied from its original
    marked["metadata"].update(name="job-0-old", uid="uid-old", creationTimestamp=w.now)
    marked["status"] = {}
    w.cluster.workflows[("research", "job-0-old")] = marked
    _cancel(w, "job-0-p1")  # the cancel stopped the copy it found
    _stopped_everywhere(w, "job-0-p1")
    for _ in range(8):
        w.tick(chat=IDLE)
    assert _running_of_run(w, "job-0") == []
    assert w.wf("job-0-old")["metadata"]["labels"].get(LABEL_STATE) != STATE_ADMITTED
    assert w.wf("job-0-old")["spec"].get("shutdown") == "Stop", "the gate stops what the cancel missed"
    assert w.replicas() == 8


def test_a_copy_parked_just_before_the_cancel_is_not_admitted_for_its_original_carries_the_mark() -> None:
    w = World()
    w.lend(1)
    real = w.cluster.stop

    def stop(namespace: str, job: Any) -> None:
        if job.name == "job-0":
            _cancel(w, "job-0")  # the copy is parked (no mark), then the cancel lands on the original only
        real(namespace, job)

    w.cluster.stop = stop  # type: ignore[method-assign]
    w.tick(chat=FULL)
    assert ANNOTATION_CANCELLED_AT not in w.wf("job-0-p1")["metadata"]["annotations"]
    _stopped_everywhere(w, "job-0")
    for _ in range(8):
        w.tick(chat=IDLE)
    assert _running_of_run(w, "job-0") == []
    assert w.replicas() == 8


def test_a_mark_on_a_workflow_that_claims_another_run_neither_blocks_nor_stops_that_run() -> None:
    w = World()
    w.park("victim", replicas=2)
    w.park("decoy", replicas=2, run_id="victim", priority=5)  # its run-id label claims the victim's run
    w.wf("decoy")["metadata"]["annotations"][ANNOTATION_CANCELLED_AT] = "2026-01-01T00:00:00Z"
    for _ in range(7):
        w.tick(chat=IDLE)
    assert w.state("victim") == STATE_ADMITTED and not w.wf("victim")["spec"].get("suspend")
    assert w.wf("decoy")["metadata"]["labels"].get(LABEL_STATE) != STATE_ADMITTED
    # A running one with the mark, claiming the run the gate admitted: it is stopped, the victim runs on.
    w.park("runner", replicas=1, run_id="victim", state="")
    w.wf("runner")["metadata"]["annotations"][ANNOTATION_CANCELLED_AT] = "2026-01-01T00:00:00Z"
    for _ in range(3):
        w.tick(chat=IDLE)
    assert w.wf("runner")["spec"].get("shutdown") == "Stop"
    assert not w.wf("victim")["spec"].get("shutdown") and w.state("victim") == STATE_ADMITTED
    assert ANNOTATION_CANCELLED_AT not in w.wf("victim")["metadata"]["annotations"]


def test_a_marked_workflow_made_under_the_name_of_a_copys_gone_original_does_not_cancel_the_copy() -> None:
    # The copy's original is known by its UID: another workflow under that name is not it, whatever it carries.
    w = World()
    w.lend(1)
    w.tick(chat=FULL)  # job-0 preempted, job-0-p1 parked
    del w.cluster.workflows[("research", "job-0")]
    w.park("job-0", replicas=1, run_id="mine", state="")
    w.wf("job-0")["metadata"]["annotations"][ANNOTATION_CANCELLED_AT] = "2026-01-01T00:00:00Z"
    _stopped_everywhere(w, "job-0")
    for _ in range(8):
        w.tick(chat=IDLE)
    assert w.state("job-0-p1") == STATE_ADMITTED and not w.wf("job-0-p1")["spec"].get("shutdown")
