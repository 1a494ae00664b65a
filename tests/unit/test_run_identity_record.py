"""A run's identity is the gate's own record, not a tenant-written label: what a hostile or careless tenant tries with it.

The record (`policy.record.ServiceRecord`) keeps the run each admitted workflow was admitted for and the
parked copies the gate made (by their original's UID). A relabelled workflow keeps its run, a parked copy
the gate made carries its run while it waits (so a rerun by `argo retry` or `resubmit` is a duplicate of
it), and nothing a tenant writes can get another's run stopped without a copy.
"""

import json

from offhours.scripts.names import LABEL_COPY_OF, LABEL_RUN_ID, STATE_ADMITTED, STATE_PARKED
from offhours.scripts.policy.record import COPY_MEMORY_SECONDS, MAX_COPIES, ServiceRecord, with_copies

from .test_argo_verbs import FULL, LOW, argo_controller
from .test_gate_controller import World

MIB = 1024 * 1024


def _copies_of(w: World, uid: str) -> list[str]:
    return [name for (_, name), wf in w.cluster.workflows.items() if wf["metadata"]["labels"].get(LABEL_COPY_OF) == uid]


def test_an_unadmitted_decoy_labelled_with_my_admitted_run_costs_me_nothing() -> None:
    """The fault: a tenant runs a workflow straight from the template (no admission) under my run id."""
    w = World()
    w.park("mine")
    for _ in range(7):
        w.tick(chat=LOW)
    assert w.state("mine") == STATE_ADMITTED
    w.park("decoy", state="", run_id="mine")
    w.now += 1
    out = w.tick(chat=LOW)["chat"]
    assert w.state("mine") == STATE_ADMITTED and "shutdown" not in w.wf("mine")["spec"], w.log.getvalue()
    assert out.plan is not None and [j.name for j in out.plan.cancel] == ["decoy"]


def test_a_relabelled_admitted_workflow_keeps_its_run_through_a_reclaim_and_mine_comes_back() -> None:
    """The fault: their admitted workflow relabelled with my run id, then a reclaim stops both runs."""
    w = World()
    w.park("theirs")
    w.now += 1
    w.park("mine")
    for _ in range(7):
        w.tick(chat=LOW)
    w.wf("theirs")["metadata"]["labels"][LABEL_RUN_ID] = "mine"
    w.tick(chat=FULL)  # both stopped, each parked again
    argo_controller(w.cluster)
    mine_uid, theirs_uid = w.wf("mine")["metadata"]["uid"], w.wf("theirs")["metadata"]["uid"]
    assert len(_copies_of(w, mine_uid)) == 1 and len(_copies_of(w, theirs_uid)) == 1, w.log.getvalue()
    assert {(u, r) for u, r, _ in w.record().copies} == {(mine_uid, "mine"), (theirs_uid, "theirs")}
    for _ in range(12):
        w.tick(chat=LOW)
        argo_controller(w.cluster)
    (mine_copy,) = _copies_of(w, mine_uid)
    assert w.state(mine_copy) == STATE_ADMITTED, w.log.getvalue()


def test_argo_retry_and_resubmit_of_one_preempted_workflow_leave_its_run_one_copy() -> None:
    """The fault: both verbs at once on a preempted workflow whose copy waits: two reruns, each a duplicate of it."""
    w = World()
    w.lend(1)
    w.tick(chat=FULL)
    argo_controller(w.cluster)
    made = w.cluster.argo_verb("resubmit", "research", "job-0")
    w.cluster.argo_verb("retry", "research", "job-0")
    out = w.tick(chat=FULL)["chat"]
    assert out.plan is not None and {j.name for j in out.plan.cancel} == {"job-0", made}, w.log.getvalue()
    argo_controller(w.cluster)
    for _ in range(10):
        w.tick(chat=LOW)
        argo_controller(w.cluster)
    parked_or_running = [n for (_, n), wf in w.cluster.workflows.items() if wf["status"].get("phase") == "Running"]
    assert parked_or_running == ["job-0-p1"] and w.state("job-0-p1") == STATE_ADMITTED, w.log.getvalue()


def test_a_decoy_claiming_to_be_my_copy_cannot_get_my_admitted_run_stopped() -> None:
    """The fault: a tenant's parked workflow labelled copy-of my stopped workflow's UID, with my run id."""
    w = World()
    w.lend(1)
    w.tick(chat=FULL)
    argo_controller(w.cluster)
    for _ in range(8):
        w.tick(chat=LOW)
        argo_controller(w.cluster)
    assert w.state("job-0-p1") == STATE_ADMITTED, w.log.getvalue()
    w.park("decoy", run_id="job-0")
    w.wf("decoy")["metadata"]["labels"][LABEL_COPY_OF] = w.wf("job-0")["metadata"]["uid"]
    for _ in range(3):
        w.tick(chat=LOW)
        argo_controller(w.cluster)
    assert w.state("job-0-p1") == STATE_ADMITTED and "shutdown" not in w.wf("job-0-p1")["spec"], w.log.getvalue()
    assert w.state("decoy") == STATE_PARKED  # it waits for the run it names: at most a wait, never a stop of mine


def test_a_copy_the_gate_made_is_known_by_its_originals_uid_whatever_its_label_says() -> None:
    """The fault: a tenant relabels the gate's waiting copy with another run id, then reruns the preempted workflow."""
    w = World()
    w.lend(1)
    w.tick(chat=FULL)
    argo_controller(w.cluster)
    w.wf("job-0-p1")["metadata"]["labels"][LABEL_RUN_ID] = "elsewhere"
    made = w.cluster.argo_verb("resubmit", "research", "job-0")
    out = w.tick(chat=FULL)["chat"]
    assert out.plan is not None and [j.name for j in out.plan.cancel] == [made], w.log.getvalue()


def test_a_record_of_an_older_gate_without_runs_or_copies_still_counts_its_admissions() -> None:
    """An upgrade: the stored record has no `runs` nor `copies`; unknown means the label decides, never admitted."""
    w = World()
    w.lend(2)
    raw = json.loads(w.cluster.states[("serving", "chat")])
    raw.pop("runs", None)
    raw.pop("copies", None)
    w.cluster.states[("serving", "chat")] = json.dumps(raw)
    old = ServiceRecord.from_json(w.cluster.states[("serving", "chat")])
    assert old.runs is None and old.copies == () and old.lent == 4
    w.tick(chat=LOW)
    assert w.replicas() == 4 and w.state("job-0") == w.state("job-1") == STATE_ADMITTED, w.log.getvalue()
    assert w.record().runs == {w.wf("job-0")["metadata"]["uid"]: "job-0", w.wf("job-1")["metadata"]["uid"]: "job-1"}


def test_the_record_of_copies_is_bounded_and_forgets_what_nothing_links_to() -> None:
    """A 100x fleet (or a tenant making thousands of stopped copies): the record stays far under 1 MiB."""
    copies = ()
    for i in range(3 * MAX_COPIES):
        copies = with_copies(copies, [(f"{i:036d}", "r" * 63)], [], float(i))
    assert len(copies) == MAX_COPIES and copies[-1][0] == f"{3 * MAX_COPIES - 1:036d}"
    record = ServiceRecord(admitted={f"{i:036d}": 1 for i in range(1000)},
                           runs={f"{i:036d}": "r" * 63 for i in range(1000)}, copies=copies)
    text = record.to_json()
    assert len(text.encode()) < MIB / 4 and ServiceRecord.from_json(text) == record
    later = with_copies(copies, [], [copies[0][0]], 3 * MAX_COPIES + COPY_MEMORY_SECONDS + 1)
    assert [u for u, _, _ in later] == [copies[0][0]]  # still linked by a listed workflow: kept; the rest forgotten


def test_a_tampered_run_or_copy_in_the_record_is_no_memory() -> None:
    """A hand-edited record: a copy entry or a run of the wrong shape drops the whole record (observe again)."""
    good = ServiceRecord(baseline=8, admitted={"u": 2}, runs={"u": "r"}, copies=(("u", "r", 1.0),)).to_json()
    assert ServiceRecord.from_json(good).baseline == 8
    for field, value in (("copies", [["u", 5, 1.0]]), ("copies", [["u"]]), ("runs", {"u": 7}), ("runs", ["u"]),
                         ("copies", [["u", "r", 1.0]] * (MAX_COPIES + 1))):
        raw = json.loads(good)
        raw[field] = value
        assert ServiceRecord.from_json(json.dumps(raw)) == ServiceRecord(), (field, value)
