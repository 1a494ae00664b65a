"""The run identity at the gate: which workflows run a run, which end it, and what a tenant can do about either.

Each test names the fault it plays (a tenant's labels, parameters or status; Argo's verbs; the gate dying
between two writes; a fleet far larger) and checks what survived: serving's replicas, the run's own copy,
and the one-run-at-a-time rule.
"""

import json
import time
from typing import Any

from offhours.scripts.cluster.base import ClusterError
from offhours.scripts.gate import actuate
from offhours.scripts.gate.controller import Gate
from offhours.scripts.names import (
    ANNOTATION_WAITING_REASON,
    ARGO_SCHEDULED_TIME_ANNOTATION,
    EVENT_RUN_ID_MISMATCH,
    LABEL_COPY_OF,
    LABEL_RUN_ID,
    STATE_ADMITTED,
    STATE_PARKED,
    STATE_PREEMPTED,
)

from .test_argo_verbs import FULL, LOW, argo_controller, running
from .test_gate_controller import World


def _set_run_param(w: World, name: str, value: Any) -> None:
    w.wf(name)["spec"]["arguments"]["parameters"].append({"name": "run-id", "value": value})


def _mismatches(w: World) -> list[str]:
    return [e.message for e in w.cluster.events if e.reason == EVENT_RUN_ID_MISMATCH]


def _ticks(w: World, n: int, **rps: float) -> None:
    for _ in range(n):
        w.tick(**({"chat": LOW} | rps))
        argo_controller(w.cluster)


def _preempted(w: World, name: str = "alice", full: float = FULL) -> None:
    w.park(name, replicas=2)
    _set_run_param(w, name, name)
    for _ in range(7):
        w.tick(chat=LOW)
    w.tick(chat=full)
    argo_controller(w.cluster)
    assert w.state(name) == STATE_PREEMPTED and w.state(f"{name}-p1") == STATE_PARKED, w.log.getvalue()


def test_a_parked_workflow_whose_label_and_parameter_disagree_is_never_admitted_and_said_once() -> None:
    """The fault: labelled `decoy`, its run-id parameter run-1: admitted, its steps write run-1's checkpoints
    while the gate counts it as another run. It waits, says why, one Warning Event; the next job is admitted."""
    w = World()
    w.park("hand-1", replicas=2, run_id="decoy")
    _set_run_param(w, "hand-1", "run-1")
    w.now += 1
    w.park("good", replicas=2)
    _ticks(w, 10)
    assert w.state("hand-1") == STATE_PARKED and w.state("good") == STATE_ADMITTED, w.log.getvalue()
    reason = w.wf("hand-1")["metadata"]["annotations"][ANNOTATION_WAITING_REASON]
    assert reason == ("not admitted: its run-id parameter 'run-1' and its label offhours.io/run-id='decoy' disagree: "
                      "its steps write the parameter's checkpoints, the gate reads the label")
    assert _mismatches(w) == [f"workflow research/hand-1: {reason.removeprefix('not admitted: ')}: not admitted "
                              "while it is so"], w.cluster.events


def test_a_running_workflow_whose_parameter_is_an_expression_is_stopped_and_its_copy_held() -> None:
    """The fault: `argo submit` with `-p run-id={{workflow.name}}`: its checkpoints are any run's. Running without
    admission, it is stopped (serving never lends to it) with a copy, and the copy waits, saying why."""
    w = World()
    w.park("expr", replicas=2, state="")
    w.wf("expr")["spec"].pop("suspend", None)
    _set_run_param(w, "expr", "{{workflow.name}}")
    _ticks(w, 3)
    assert w.wf("expr")["spec"].get("shutdown") == "Stop" and w.replicas() == 8, w.log.getvalue()
    assert any("expr" in m and m.endswith(": stopped") for m in _mismatches(w)), w.cluster.events
    _ticks(w, 10)
    assert w.state("expr-p1") == STATE_PARKED and w.replicas() == 8, w.log.getvalue()
    assert "Argo expression" in w.wf("expr-p1")["metadata"]["annotations"][ANNOTATION_WAITING_REASON]


def test_a_relabelled_workflows_copy_carries_the_run_its_steps_write_and_runs_it() -> None:
    """The fault: a tenant relabels my admitted workflow. Stopped (its run id no longer one), its copy is the gate's,
    labelled with the run its steps write, and runs my run again: the relabel costs one stop, never the run."""
    w = World()
    w.park("mine", replicas=2)
    _set_run_param(w, "mine", "mine")
    _ticks(w, 7)
    assert w.state("mine") == STATE_ADMITTED, w.log.getvalue()
    w.wf("mine")["metadata"]["labels"][LABEL_RUN_ID] = "someone-else"
    _ticks(w, 12)
    assert w.wf("mine-p1")["metadata"]["labels"][LABEL_RUN_ID] == "mine"
    assert w.state("mine-p1") == STATE_ADMITTED, w.log.getvalue()


def _scheduled(w: World, name: str, label: str) -> None:
    w.park(name, replicas=2, run_id=label)
    w.wf(name)["metadata"]["annotations"][ARGO_SCHEDULED_TIME_ANNOTATION] = "2025-01-13T12:00:00Z"
    w.wf(name)["metadata"]["creationTimestamp"] = "2025-01-13T12:00:01Z"  # as its CronWorkflow fires
    _set_run_param(w, name, "night-{{=sprig.replace('T', '-', sprig.replace(':', '', sprig.replace('-', '', "
                            "sprig.substr(0, 16, workflow.scheduledTime))))}}")


def test_a_nightly_run_is_admitted_once_argo_has_labelled_it_with_its_night() -> None:
    """What survives: a scheduled run's run-id argument is an Argo expression of its firing, which the gate reads as
    Argo will. Listed before Argo's controller set the night's label, it waits that tick; then it is admitted."""
    w = World()
    _scheduled(w, "night-1736769600", "night")  # the label as the CronWorkflow creates it, before labelsFrom
    _ticks(w, 7)
    assert w.state("night-1736769600") == STATE_PARKED, w.log.getvalue()
    w.wf("night-1736769600")["metadata"]["labels"][LABEL_RUN_ID] = "night-20250113-1200"
    _ticks(w, 1)
    assert w.state("night-1736769600") == STATE_ADMITTED, w.log.getvalue()


def test_a_decoy_linked_to_my_workflow_under_my_copys_name_is_never_taken_for_my_copy() -> None:
    """The fault: before my workflow is stopped, a tenant creates `alice-p1` (the name my copy will get) labelled
    copy-of my workflow's UID, with my run id: the gate took it for my copy (linked by label), parked nothing of
    its own, and the decoy's spec ran my run. Now my copy goes elsewhere and the decoy is never admitted."""
    w = World()
    w.park("alice", replicas=2)
    _set_run_param(w, "alice", "alice")
    _ticks(w, 7)
    w.park("alice-p1", replicas=2, run_id="alice", priority=9)
    w.wf("alice-p1")["metadata"]["labels"][LABEL_COPY_OF] = w.wf("alice")["metadata"]["uid"]
    w.wf("alice-p1")["metadata"]["annotations"]["offhours.io/parked-from"] = "alice"
    w.tick(chat=FULL)
    argo_controller(w.cluster)
    mine = [n for (_, n), wf in w.cluster.workflows.items() if n.startswith("alice-p1-")]
    assert len(mine) == 1 and w.state(mine[0]) == STATE_PARKED, w.log.getvalue()
    _ticks(w, 12)
    assert w.state(mine[0]) == STATE_ADMITTED and w.state("alice-p1") == STATE_PARKED, w.log.getvalue()


def test_a_stop_that_failed_after_its_copy_was_made_is_retried_with_that_copy() -> None:
    """The fault: the copy is made, the stop's call fails; the next tick stops again: one copy, never two."""
    w = World()
    w.park("alice", replicas=2)
    _set_run_param(w, "alice", "alice")
    _ticks(w, 7)
    w.cluster.fail_next["stop"] = [ClusterError("patch workflow: HTTP 500")]
    w.tick(chat=FULL)
    assert w.state("alice") == STATE_ADMITTED and w.state("alice-p1") == STATE_PARKED, w.log.getvalue()
    w.tick(chat=FULL)
    argo_controller(w.cluster)
    copies = [n for (_, n), wf in w.cluster.workflows.items() if wf["metadata"]["labels"].get(LABEL_COPY_OF)]
    assert copies == ["alice-p1"] and w.state("alice") == STATE_PREEMPTED, w.log.getvalue()
    _ticks(w, 12)
    assert w.state("alice-p1") == STATE_ADMITTED, w.log.getvalue()


def test_a_record_of_an_older_gate_keeps_its_copies_and_runs_them() -> None:
    """An upgrade: the stored record has no lineages, and its copies no token: the copies it linked are the run's."""
    w = World()
    _preempted(w)
    raw = json.loads(w.cluster.states[("serving", "chat")])
    raw.pop("lineages")
    raw["copies"] = [entry[:3] for entry in raw["copies"]]
    w.cluster.states[("serving", "chat")] = json.dumps(raw)
    w.wf("alice-p1")["metadata"]["annotations"].pop("offhours.io/copy-token")
    w.park("bob", replicas=2, run_id="alice", priority=5)  # a squatter, after the upgrade
    _ticks(w, 12)
    assert w.state("alice-p1") == STATE_ADMITTED and w.state("bob") == STATE_PARKED, w.log.getvalue()
    uid = w.wf("alice-p1")["metadata"]["uid"]
    assert any(run == "alice" and uid in uids for run, uids in w.record().lineages or ()), w.record().lineages


def test_argo_retry_of_my_preempted_workflow_is_still_mine_and_a_duplicate_of_my_copy() -> None:
    """Argo's verb: `argo retry` runs my stopped workflow again (its UID is my run's): a duplicate of my waiting copy,
    stopped without another copy, and the copy still runs the run."""
    w = World()
    _preempted(w)
    w.wf("alice")["status"]["phase"] = "Failed"
    w.cluster.argo_verb("retry", "research", "alice")
    out = w.tick(chat=LOW)["chat"]
    assert out.plan is not None and [j.name for j in out.plan.cancel] == ["alice"], w.log.getvalue()
    _ticks(w, 12)
    live = [n for (_, n), wf in w.cluster.workflows.items() if running(wf)]
    assert live == ["alice-p1"] and w.state("alice-p1") == STATE_ADMITTED, w.log.getvalue()


def test_a_hundred_fold_squat_never_delays_a_reclaim_nor_runs_my_run_twice() -> None:
    """A fleet 100x larger, and a hostile tenant: 300 parked workflows under my run id and 300 whose label and
    parameter disagree. A reclaim still gives serving its replicas back on its first tick, the Warning Events and
    waiting reasons stay within the advisory budget a tick, and only my run's own copy ever runs it."""
    w = World(replicas=40)
    _preempted(w, full=10 * FULL)
    for i in range(300):
        w.park(f"squat-{i:03d}", replicas=1, run_id="alice", priority=9)
        w.park(f"mixed-{i:03d}", replicas=1, run_id=f"label-{i}")
        _set_run_param(w, f"mixed-{i:03d}", "alice")
    for _ in range(12):
        started = time.monotonic()
        w.tick(chat=LOW)
        assert time.monotonic() - started < 10, "a tick of a large fleet must stay short"
        argo_controller(w.cluster)
        assert len(_mismatches(w)) <= 100 * 12
    alive = [n for (_, n), wf in w.cluster.workflows.items()
             if running(wf) and n.startswith(("alice", "squat", "mixed"))]
    assert alive == ["alice-p1"] and w.state("alice-p1") == STATE_ADMITTED, w.log.getvalue()[-3000:]
    w.tick(chat=10 * FULL)
    assert w.replicas() == 40, w.log.getvalue()[-3000:]


def _copy_unrecorded(w: World, monkeypatch: Any) -> None:
    """The record of the copy's UID fails once (the gate died between the copy and that write, or the API refused)."""
    real = actuate.record_copies

    def fails_once(gate: Gate, *args: Any) -> None:
        monkeypatch.setattr(actuate, "record_copies", real)
        raise ClusterError("update configmap: HTTP 500")

    monkeypatch.setattr(actuate, "record_copies", fails_once)


def test_a_decoy_made_before_the_stop_never_becomes_my_copy_by_copying_its_token(monkeypatch: Any) -> None:
    """The fault: a tenant's workflow already holds my copy's usual name (so mine is made elsewhere); the copy's UID
    is not recorded; the tenant then writes my copy's link and token on its decoy. Made before my stop, it cannot
    be the copy of that stop: my copy is, and runs my run."""
    w = World()
    w.park("alice", replicas=2)
    _set_run_param(w, "alice", "alice")
    _ticks(w, 7)
    w.park("alice-p1", replicas=2, run_id="alice", priority=9)
    _copy_unrecorded(w, monkeypatch)
    w.tick(chat=FULL)
    argo_controller(w.cluster)
    (mine,) = [n for (_, n) in w.cluster.workflows if n.startswith("alice-p1-")]
    theirs = w.wf("alice-p1")["metadata"]
    theirs["labels"][LABEL_COPY_OF] = w.wf(mine)["metadata"]["labels"][LABEL_COPY_OF]
    theirs["annotations"].update({k: v for k, v in w.wf(mine)["metadata"]["annotations"].items()
                                  if k in ("offhours.io/copy-token", "offhours.io/parked-from")})
    _ticks(w, 12)
    assert w.state(mine) == STATE_ADMITTED and w.state("alice-p1") == STATE_PARKED, w.log.getvalue()


def test_a_clone_of_my_unrecorded_copy_made_after_it_never_runs_my_run(monkeypatch: Any) -> None:
    """The fault: the copy's UID is not recorded, and a tenant clones it (labels, token and all) at once, with a
    higher priority and a name that sorts first: the older of the two is the copy, the clone waits."""
    w = World()
    w.park("alice", replicas=2)
    _set_run_param(w, "alice", "alice")
    _ticks(w, 7)
    _copy_unrecorded(w, monkeypatch)
    w.tick(chat=FULL)
    argo_controller(w.cluster)
    w.now += 1
    w.cluster.clock = w.now
    clone = w.cluster.argo_verb("resubmit", "research", "alice-p1", new_name="a-clone")
    assert clone == "a-clone"
    w.wf(clone)["metadata"]["annotations"]["offhours.io/priority"] = "9"
    _ticks(w, 12)
    assert w.state("alice-p1") == STATE_ADMITTED and w.state(clone) == STATE_PARKED, w.log.getvalue()


def test_an_admitted_workflow_rewritten_to_my_run_id_is_stopped_and_its_copy_never_runs_my_run() -> None:
    """The fault: a tenant rewrites its admitted workflow's run-id label and parameter to my run id, consistently
    (Argo reads the parameter again for the steps to come): the gate counted it as its own run while its steps
    wrote my checkpoints, and its copy, the gate's, would have run my run as theirs. Stopped, its copy held."""
    w = World()
    _preempted(w)  # my run: alice, its copy waiting
    w.park("theirs", replicas=2)
    _set_run_param(w, "theirs", "theirs")
    _ticks(w, 12)
    assert w.state("alice-p1") == STATE_ADMITTED and w.state("theirs") == STATE_ADMITTED, w.log.getvalue()
    w.wf("theirs")["metadata"]["labels"][LABEL_RUN_ID] = "alice"
    for param in w.wf("theirs")["spec"]["arguments"]["parameters"]:
        param["value"] = "alice" if param["name"] == "run-id" else param["value"]
    _ticks(w, 12)
    assert w.wf("theirs")["spec"].get("shutdown") == "Stop", w.log.getvalue()
    assert w.state("theirs-p1") == STATE_PARKED and w.state("alice-p1") == STATE_ADMITTED, w.log.getvalue()
    reason = w.wf("theirs-p1")["metadata"]["annotations"][ANNOTATION_WAITING_REASON]
    assert reason.startswith("not admitted: its run id is now alice, not theirs"), reason
