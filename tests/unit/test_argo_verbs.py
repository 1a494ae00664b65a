"""Every Argo verb on every kind of offhours workflow converges: what runs on lent GPUs is counted and stoppable,
one run never runs twice at once, and a reclaim gives serving everything back.

The verbs are applied as Argo v4 applies them (`MemoryCluster.argo_verb`); Argo's controller is modelled after
each tick: a stopped workflow runs its exit hook and ends Failed, a terminated one ends Failed without it.
"""

from typing import Any

import pytest

from offhours.scripts.cluster.memory import MemoryCluster
from offhours.scripts.names import FINISHED_PHASES, LABEL_RUN_ID, LABEL_SCHEDULE
from tests.unit.test_gate_controller import World

KINDS = ("parked", "admitted", "preempted", "parked copy", "cron run")
VERBS = ("submit", "retry", "resubmit", "resume", "suspend", "stop", "terminate", "delete")
FULL, LOW = 100.0, 10.0  # requests per second: every replica needed / two replicas needed (of 8)


def argo_controller(cluster: MemoryCluster) -> None:
    """Argo ends what was stopped (its exit hook marks it) or terminated (no exit hook)."""
    for (ns, name), wf in list(cluster.workflows.items()):
        if wf.setdefault("status", {"phase": "Running"}).get("phase") in FINISHED_PHASES:  # it picks up a new copy
            continue
        shutdown = wf["spec"].get("shutdown")
        if shutdown == "Stop":
            cluster.finish(ns, name, "Failed")
        elif shutdown == "Terminate":
            wf["status"]["phase"] = "Failed"


def running(wf: dict[str, Any]) -> bool:
    """Its pods run (or may): not ended, not shut down, and not suspended with no pod of its own pending or running
    (parked, or suspended between two steps: whatever its label says, it holds no GPU)."""
    pods = [n for n in wf.get("status", {}).get("nodes", {}).values() if n.get("type") == "Pod"]
    parked = wf["spec"].get("suspend") and not any(n.get("phase") in ("Pending", "Running") for n in pods)
    return (wf.get("status", {}).get("phase") not in FINISHED_PHASES and not wf["spec"].get("shutdown")
            and not parked)


def setup(kind: str) -> tuple[World, str]:
    """A world with one workflow of `kind` on chat; return it and the workflow's name."""
    w = World()
    if kind == "parked":
        w.park("job-0")
        return w, "job-0"
    if kind == "cron run":
        w.park("night-0", run_id="night-20261201")
        w.wf("night-0")["metadata"]["labels"][LABEL_SCHEDULE] = "night"
        for _ in range(7):
            w.tick(chat=LOW)
        assert w.state("night-0") == "admitted"
        return w, "night-0"
    w.lend(1)
    if kind == "admitted":
        return w, "job-0"
    w.tick(chat=FULL)  # a reclaim: job-0 stopped, parked again as job-0-p1
    argo_controller(w.cluster)
    assert w.state("job-0") == "preempted" and w.state("job-0-p1") == "parked"
    return w, "job-0" if kind == "preempted" else "job-0-p1"


def apply(w: World, verb: str, name: str) -> None:
    wf = w.wf(name)
    phase = wf.get("status", {}).get("phase")
    if verb == "submit":  # a person submits the same run again, straight from the template (not parked)
        w.park("again", run_id=wf["metadata"]["labels"][LABEL_RUN_ID], state="")
        w.wf("again")["spec"].pop("suspend", None)
    elif verb == "retry" and phase not in ("Failed", "Error"):
        wf["status"]["phase"] = "Failed"  # first it failed on its own (Argo retries only an ended workflow)
        w.cluster.argo_verb("retry", "research", name)
    else:
        w.cluster.argo_verb(verb, "research", name)


def check(w: World) -> None:
    live = [wf for wf in w.cluster.workflows.values() if running(wf)]
    runs = [wf["metadata"]["labels"].get(LABEL_RUN_ID) for wf in live]
    assert len(runs) == len(set(runs)), f"one run runs twice at once: {[wf['metadata']['name'] for wf in live]}"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("verb", VERBS)
def test_under_full_load_anything_running_is_stopped_and_serving_gets_everything_back(kind: str, verb: str) -> None:
    w, name = setup(kind)
    apply(w, verb, name)
    for _ in range(2):
        w.tick(chat=FULL)
        check(w)
        argo_controller(w.cluster)
    assert w.replicas() == 8, w.log.getvalue()
    assert [wf["metadata"]["name"] for wf in w.cluster.workflows.values() if running(wf)] == [], w.log.getvalue()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("verb", VERBS)
def test_under_low_load_whatever_runs_is_counted_as_lent_and_no_run_runs_twice(kind: str, verb: str) -> None:
    w, name = setup(kind)
    apply(w, verb, name)
    for _ in range(8):
        w.tick(chat=LOW)
        check(w)
        argo_controller(w.cluster)
        record = w.record()
        live = {wf["metadata"]["uid"] for wf in w.cluster.workflows.values() if running(wf)}
        # Counted: everything that runs is the gate's own admission (or is stopped this tick), and serving
        # is lowered by exactly what the gate admitted.
        assert live <= set(record.admitted or {}) | stopping(w), w.log.getvalue()
        assert w.replicas() + record.lent == 8, w.log.getvalue()
    # Then full load: serving gets all of it back within two ticks, whatever the verb left.
    for _ in range(2):
        w.tick(chat=FULL)
        argo_controller(w.cluster)
    assert w.replicas() == 8 and not any(running(wf) for wf in w.cluster.workflows.values()), w.log.getvalue()


def stopping(w: World) -> set[str]:
    return {wf["metadata"]["uid"] for wf in w.cluster.workflows.values() if wf["spec"].get("shutdown")}


def test_a_retried_preempted_workflow_is_stopped_at_the_next_reclaim_and_keeps_its_one_copy() -> None:
    # Seen: `argo retry` of a preempted workflow ran it again under state=preempted; the gate ignored every
    # preempted workflow, so after three full-load ticks it still ran (and its copy could be admitted too).
    w, _ = setup("preempted")
    w.wf("job-0")["status"]["phase"] = "Failed"
    w.cluster.argo_verb("retry", "research", "job-0")
    out = w.tick(chat=FULL)
    assert w.wf("job-0")["spec"]["shutdown"] == "Stop"
    # A duplicate of the copy the gate made of its run, which waits: stopped without another copy (one copy).
    assert "job-0 runs run job-0 that another workflow carries: stopped, not parked again" in out["chat"].plan.notes
    copies = [n for (_, n) in w.cluster.workflows if n.startswith("job-0-")]
    assert copies == ["job-0-p1"] and w.replicas() == 8


def test_a_resubmitted_admitted_workflow_carries_the_mark_but_is_not_counted() -> None:
    # `argo resubmit` copies every label and annotation, the admission mark too: it lends nothing.
    w = World()
    w.lend(1)
    made = w.cluster.argo_verb("resubmit", "research", "job-0")
    assert made is not None and w.wf(made)["metadata"]["annotations"]["offhours.io/borrowed-from"]
    out = w.tick(chat=LOW)
    assert out["chat"].decision is not None and out["chat"].decision.lent == 2
    assert w.wf(made)["spec"]["shutdown"] == "Stop" and w.replicas() == 6


@pytest.mark.parametrize("label", ["", "parked"])
def test_a_running_workflow_suspended_by_its_owner_is_not_taken_for_a_parked_one(label: str) -> None:
    """Fault: `argo suspend` of a workflow running without admission made it read as parked; its pods kept running."""
    w = World()
    w.park("sneak", state=label)
    wf = w.wf("sneak")
    wf["spec"].pop("suspend", None)  # submitted straight from the template: its pod starts at once
    wf["status"]["nodes"] = {"sneak": {"name": "sneak", "type": "Steps", "phase": "Running"},
                             "sneak-1": {"name": "sneak[0].train", "type": "Pod", "phase": "Running"}}
    w.cluster.argo_verb("suspend", "research", "sneak")  # Argo starts no new step; the running pod goes on
    out = w.tick(chat=FULL)["chat"]
    assert out.plan is not None and [j.name for j in out.plan.stop] == ["sneak"], w.log.getvalue()
    assert w.wf("sneak")["spec"].get("shutdown") == "Stop" and w.replicas() == 8


def test_a_parked_workflow_with_no_pod_running_is_still_parked() -> None:
    # A workflow suspended between two steps holds no GPU: it waits in the queue like any parked one.
    w = World()
    w.park("between")
    w.wf("between")["status"]["nodes"] = {"between-1": {"name": "between[0].prepare", "type": "Pod",
                                                        "phase": "Succeeded"}}
    for _ in range(7):
        w.tick(chat=LOW)
    assert w.state("between") == "admitted" and w.replicas() == 6


def test_another_workflow_labelled_with_my_run_id_does_not_get_my_run_stopped_without_a_copy() -> None:
    """Fault: a parked workflow copying another's run-id label made that run's running workflow a duplicate, stopped uncopied."""
    w = World()
    w.park("mine")
    w.cluster.argo_verb("resume", "research", "mine")  # its owner starts it before the gate admits it
    w.park("decoy", run_id="mine")  # someone else's parked workflow, labelled with my run id
    w.tick(chat=LOW)
    uid = w.wf("mine")["metadata"]["uid"]
    copies = [wf for wf in w.cluster.workflows.values() if wf["metadata"]["labels"].get("offhours.io/copy-of") == uid]
    assert w.state("mine") == "admitted" or copies, w.log.getvalue()


@pytest.mark.parametrize("value", ["No", "stop", " "])
def test_a_shutdown_value_argo_does_not_act_on_does_not_hide_a_running_workflow(value: str) -> None:
    """Fault: any non-empty spec.shutdown hid a workflow from the gate, though Argo runs it on under a value it does not know."""
    w = World()
    w.park("sneak", state="")
    w.wf("sneak")["spec"].pop("suspend", None)  # running without admission
    w.wf("sneak")["spec"]["shutdown"] = value  # Argo stops only for Stop or Terminate: its pods run on
    out = w.tick(chat=FULL)["chat"]
    assert out.plan is not None and [j.name for j in out.plan.stop] == ["sneak"], w.log.getvalue()
    assert w.wf("sneak")["spec"]["shutdown"] == "Stop"
