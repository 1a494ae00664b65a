"""A Workflow's status is anyone's to write (Argo's CRDs have no status subresource): what it says never buys a
workflow an exemption from the gate's stop.

The gate reads "its work is done, only its exit handler runs" (`Job.finishing`) from the status: the root node's
phase, or a node named `<workflow>.onExit`. A job so read was never stopped, so a tenant who wrote that node on a
workflow still at work kept its GPUs through every reclaim, admitted or not.
"""

from dataclasses import replace
from typing import Any

from offhours.scripts.cluster.workflow import GRACE_PARAMETER
from offhours.scripts.names import LABEL_COPY_OF
from tests.unit.test_argo_verbs import FULL, LOW, argo_controller, running
from tests.unit.test_gate_controller import World, config


def forge_exit_handler(wf: dict[str, Any]) -> None:
    """What a tenant writes: an exit handler node, next to the pod that still trains."""
    name = wf["metadata"]["name"]
    wf["status"]["nodes"] = {"x": {"name": f"{name}.onExit", "phase": "Running"},
                             f"{name}-1": {"name": f"{name}[0].train", "type": "Pod", "phase": "Running"}}


def copies_of(w: World, name: str) -> list[str]:
    uid = w.wf(name)["metadata"]["uid"]
    return [wf["metadata"]["name"] for wf in w.cluster.workflows.values()
            if wf["metadata"]["labels"].get(LABEL_COPY_OF) == uid]


def test_a_forged_exit_handler_node_does_not_keep_a_workflow_running_without_admission() -> None:
    """Fault: submitted straight from the template (never admitted), with an `.onExit` node written in its status,
    a workflow was neither stopped nor adopted: it ran on GPUs uncounted, through a full-load reclaim."""
    w = World()
    w.park("sneak", state="")
    w.wf("sneak")["spec"].pop("suspend", None)
    forge_exit_handler(w.wf("sneak"))
    out = w.tick(chat=FULL)["chat"]
    assert out.plan is not None and [j.name for j in out.plan.cancel] == ["sneak"], w.log.getvalue()
    assert w.wf("sneak")["spec"].get("shutdown") == "Stop" and w.replicas() == 8
    assert copies_of(w, "sneak") == []  # its status says it ended: no copy runs it again


def test_a_forged_root_success_does_not_exempt_an_admitted_workflow_from_a_reclaim() -> None:
    """Fault: an admitted workflow whose status a tenant rewrote to say its root node succeeded was never a victim:
    under full load, serving was raised but the gate stopped only the other job, and this one kept its pods."""
    w = World()
    w.lend(2)
    wf = w.wf("job-0")
    wf["status"]["nodes"] = {"job-0": {"name": "job-0", "phase": "Succeeded"},
                             "job-0-1": {"name": "job-0[0].train", "type": "Pod", "phase": "Running"}}
    out = w.tick(chat=FULL)["chat"]
    assert out.plan is not None and [j.name for j in out.plan.stop] == ["job-1"], w.log.getvalue()
    assert [j.name for j in out.plan.cancel] == ["job-0"] and out.plan.lent_after == 0
    assert wf["spec"].get("shutdown") == "Stop" and w.replicas() == 8
    assert copies_of(w, "job-0") == [] and copies_of(w, "job-1") == ["job-1-p1"]
    argo_controller(w.cluster)
    w.tick(chat=FULL)
    assert w.record().lent == 0 and not any(running(x) for x in w.cluster.workflows.values())


def test_a_finishing_job_is_stopped_only_when_the_others_do_not_free_enough() -> None:
    """What survives: a reclaim the other jobs satisfy leaves a finishing job alone (its exit handler runs on)."""
    w = World()
    w.lend(2)  # 4 lent of 8
    forge_exit_handler(w.wf("job-0"))
    out = w.tick(chat=45)["chat"]  # 45 rps: 6 replicas needed with headroom: 2 of the 4 lent come back
    assert out.plan is not None and [j.name for j in out.plan.stop] == ["job-1"] and out.plan.cancel == ()
    assert w.state("job-0") == "admitted" and w.replicas() == 6


def test_a_job_whose_work_really_ended_and_was_stopped_still_makes_its_run_done() -> None:
    """What survives: a stopped finishing job is not copied, and Argo's own success of it makes its run done."""
    w = World()
    w.lend(2)
    w.wf("job-0")["status"]["nodes"] = {"job-0": {"name": "job-0", "phase": "Succeeded", "finishedAt": "t"},
                                       "x": {"name": "job-0.onExit", "phase": "Running"}}
    w.tick(chat=FULL)
    assert copies_of(w, "job-0") == []
    w.cluster.finish("research", "job-0", "Succeeded")  # its exit handler ends; Argo writes the workflow's end
    w.tick(chat=FULL)
    assert "job-0" in {run for run, _ in w.record().done}
    for _ in range(8):
        w.tick(chat=LOW)
        argo_controller(w.cluster)
    assert w.state("job-0") != "admitted" and not [n for (_, n) in w.cluster.workflows if n.startswith("job-0-")]


def test_a_forged_exit_handler_node_does_not_hide_a_grace_raised_after_admission() -> None:
    """Fault: the grace check skipped a job whose status says its work is done: a tenant who raised the grace
    parameter of an admitted job, and wrote an `.onExit` node, kept it admitted, its next pods a day's grace each."""
    w = World(config(maxGraceSeconds=30))
    w.park("greedy", replicas=2)
    for _ in range(7):
        w.tick(chat=1)
    assert w.state("greedy") == "admitted"
    for p in w.wf("greedy")["spec"]["arguments"]["parameters"]:
        if p.get("name") == GRACE_PARAMETER:
            p["value"] = "86400"
    forge_exit_handler(w.wf("greedy"))
    out = w.tick(chat=1)["chat"]
    assert out.plan is not None and [j.name for j in out.plan.cancel] == ["greedy"], w.log.getvalue()
    assert w.wf("greedy")["spec"].get("shutdown") == "Stop" and copies_of(w, "greedy") == []
    assert w.replicas() == 8


def test_a_retried_preempted_workflow_with_a_forged_exit_handler_node_is_still_stopped() -> None:
    """Fault: `argo retry` of a preempted workflow clears its shutdown and runs it again under that label; with an
    `.onExit` node written in its status, the codec dropped it: it ran uncounted beside its run's parked copy."""
    w = World()
    w.lend(1)
    w.tick(chat=FULL)  # a reclaim: job-0 stopped, parked again as job-0-p1
    argo_controller(w.cluster)
    w.cluster.argo_verb("retry", "research", "job-0")
    forge_exit_handler(w.wf("job-0"))
    w.tick(chat=FULL)
    assert w.wf("job-0")["spec"].get("shutdown") == "Stop" and w.state("job-0-p1") == "parked"
    assert [n for (_, n) in w.cluster.workflows if n.startswith("job-0-")] == ["job-0-p1"]


def test_a_workflow_labelled_returned_with_a_forged_exit_handler_node_is_still_stopped() -> None:
    """Fault: submitted straight from the template, labelled `returned` with an `.onExit` node in its status, a
    workflow was never listed: it ran on GPUs uncounted and unstopped through a full-load reclaim. Returned is
    what the gate's record says it admitted, never a label."""
    w = World()
    w.park("sneak", state="returned")
    w.wf("sneak")["spec"].pop("suspend", None)
    forge_exit_handler(w.wf("sneak"))
    out = w.tick(chat=FULL)["chat"]
    assert out.plan is not None and [j.name for j in out.plan.cancel] == ["sneak"], w.log.getvalue()
    assert w.wf("sneak")["spec"].get("shutdown") == "Stop" and copies_of(w, "sneak") == []
    assert w.replicas() == 8 and w.record().returned == ()


def test_the_returned_marks_of_an_admitted_workflow_copied_onto_another_do_not_make_it_returned() -> None:
    """Fault: the label, the admission mark and the status are all a tenant's to copy from a workflow the gate
    admitted; only that workflow's UID is in the gate's record, so the copy runs without admission: stopped."""
    w = World()
    w.lend(1)
    marks = w.wf("job-0")["metadata"]
    w.park("twin", state="returned")
    w.wf("twin")["metadata"]["annotations"].update(marks.get("annotations") or {})
    w.wf("twin")["spec"].pop("suspend", None)
    forge_exit_handler(w.wf("twin"))
    w.tick(chat=LOW)
    assert w.wf("twin")["spec"].get("shutdown") == "Stop" and copies_of(w, "twin") == []
    assert w.state("job-0") == "admitted" and w.wf("job-0")["spec"].get("shutdown") is None


def test_a_workflow_the_gate_admitted_stays_returned_while_its_exit_handler_runs_and_its_run_ends_done() -> None:
    """What survives: the exit hook's return of an admitted workflow is believed, tick after tick while its exit
    handler runs (never stopped, never relabelled preempted, not counted as lent), and its success ends its run."""
    w = World()
    w.lend(1)
    wf = w.wf("job-0")
    wf["status"]["nodes"] = {"job-0": {"name": "job-0", "phase": "Succeeded", "finishedAt": "t"},
                             "x": {"name": "job-0.onExit", "phase": "Running"}}
    wf["metadata"]["labels"]["offhours.io/state"] = "returned"  # what the exit hook writes
    uid = wf["metadata"]["uid"]
    for _ in range(3):
        out = w.tick(chat=FULL)["chat"]
        assert out.plan is not None and out.plan.cancel == () and out.plan.stop == (), w.log.getvalue()
        assert w.state("job-0") == "returned" and wf["spec"].get("shutdown") is None
        assert w.record().returned == (uid,) and w.record().lent == 0
    w.cluster.finish("research", "job-0", "Succeeded")
    w.tick(chat=FULL)
    assert w.record().returned == () and "job-0" in {run for run, _ in w.record().done}


def test_a_return_an_older_gate_recorded_only_as_an_admission_still_ending_is_believed() -> None:
    """What survives an upgrade: an older gate listed a returned workflow no more and kept it only among the runs it
    reads the end of (no `returned` in its record); the next gate does not take it for a forgery and stop it."""
    w = World()
    w.lend(1)
    wf = w.wf("job-0")
    forge_exit_handler(wf)  # as the exit hook leaves it: its handler runs
    wf["metadata"]["labels"]["offhours.io/state"] = "returned"
    uid = wf["metadata"]["uid"]
    older = replace(w.record(), admitted={}, returned=())
    assert uid in (older.runs or {})
    w.cluster.states[("serving", "chat")] = older.to_json()
    w.tick(chat=FULL)
    assert w.state("job-0") == "returned" and wf["spec"].get("shutdown") is None and w.record().returned == (uid,)
