"""A run's identity is the gate's own record, not a tenant-written label: what a hostile or careless tenant tries with it.

The record (`policy.record.ServiceRecord`) keeps the run each admitted workflow was admitted for and the
parked copies the gate made (by their original's UID). A relabelled workflow keeps its run, a parked copy
the gate made carries its run while it waits (so a rerun by `argo retry` or `resubmit` is a duplicate of
it), and nothing a tenant writes can get another's run stopped without a copy.
"""

import json
from dataclasses import replace

import pytest

from offhours.scripts.config.loader import parse_config
from offhours.scripts.names import LABEL_COPY_OF, LABEL_RUN_ID, STATE_ADMITTED, STATE_PARKED
from offhours.scripts.policy.record import (
    COPY_MEMORY_SECONDS,
    MAX_COPIES,
    MAX_DONE,
    MAX_LINEAGE_MEMBERS,
    MAX_LINEAGES,
    MAX_RETURNED,
    MAX_TOKEN_CHARS,
    ServiceRecord,
    with_copies,
    with_lineages,
)

from .test_argo_verbs import FULL, LOW, argo_controller
from .test_gate_controller import World
from .test_state_bound import full_history, largest, largest_lookback, stored

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
    assert {(u, r) for u, r, _, _ in w.record().copies} == {(mine_uid, "mine"), (theirs_uid, "theirs")}
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
    assert w.record().runs == {w.wf(n)["metadata"]["uid"]: (n, n) for n in ("job-0", "job-1")}  # run, name


def test_the_record_of_copies_is_bounded_and_forgets_what_nothing_links_to() -> None:
    """A 100x fleet (or a tenant making thousands of stopped copies): the newest MAX_COPIES, and only what is linked."""
    copies: tuple[tuple[str, str, float, str], ...] = ()
    for i in range(3 * MAX_COPIES):
        copies = with_copies(copies, [(f"{i:036d}", "r" * 63)], [], float(i), token=lambda: "k" * 100)
    assert len(copies) == MAX_COPIES and copies[-1][0] == f"{3 * MAX_COPIES - 1:036d}"
    assert {len(k) for _, _, _, k in copies} == {MAX_TOKEN_CHARS}  # a token is cut to what a record may hold
    later = with_copies(copies, [], [copies[0][0]], 3 * MAX_COPIES + COPY_MEMORY_SECONDS + 1)
    assert [u for u, _, _, _ in later] == [copies[0][0]]  # still linked by a listed workflow: kept; the rest forgotten


def test_the_record_with_every_run_copy_and_finished_run_at_their_bounds_stays_under_the_configmap_limit() -> None:
    """The largest schema-valid look-ahead history, 390 of 400 replicas lent to one-replica jobs of the longest names,
    and as many copies, finished runs and lineages as the record keeps: under Kubernetes' 1 MiB, read back the same."""
    policy = parse_config(largest(largest_lookback())).services[0]
    _, needs = full_history(policy)
    uids = [f"{i:036d}" for i in range(390)]
    record = replace(stored(policy, needs), admitted=dict.fromkeys(uids, 1),
                     runs={u: ("r" * 63, "n" * 253) for u in uids},
                     copies=tuple((f"{i:036d}", "r" * 63, 1.8e9 + i, "k" * MAX_TOKEN_CHARS) for i in range(MAX_COPIES)),
                     done=tuple((f"{i:063d}", 1.8e9 + i) for i in range(MAX_DONE)),
                     lineages=tuple((f"{i:063d}", tuple(f"{i:032d}{j:04d}" for j in range(MAX_LINEAGE_MEMBERS)))
                                    for i in range(MAX_LINEAGES)),
                     returned=tuple(f"{i:064d}" for i in range(MAX_RETURNED)))
    text = record.to_json()
    assert len(text.encode()) < 0.95 * MIB, len(text)
    back = ServiceRecord.from_json(text)
    assert (back.runs, back.copies, back.done, back.lineages, back.returned) == (
        record.runs, record.copies, record.done, record.lineages, record.returned)


def test_lineages_are_bounded_at_100x_and_only_live_ones_are_kept() -> None:
    """A fleet 100x larger: far more runs admitted than the record keeps lineages for; the newest are kept, each
    with its newest workflows, and a lineage none of whose workflows is listed (or still ending) is forgotten."""
    lineages: dict[str, tuple[str, ...]] = {}
    runs, joins = 2 * MAX_LINEAGES, MAX_LINEAGE_MEMBERS + 1
    uids = [f"{i:036d}" for i in range(runs * joins)]
    for i, uid in enumerate(uids):  # each run's workflows one after another: admitted, copied, copied again ...
        lineages = dict(with_lineages(lineages, [(f"run-{i // joins}", uid)], uids))  # every one still listed
    assert len(lineages) == MAX_LINEAGES and all(len(m) == MAX_LINEAGE_MEMBERS for m in lineages.values())
    newest = f"run-{runs - 1}"
    assert list(lineages)[-1] == newest and lineages[newest] == tuple(uids[-MAX_LINEAGE_MEMBERS:])
    kept = with_lineages(lineages, [], [lineages[newest][0]])
    assert kept == ((newest, lineages[newest]),)
    assert with_lineages(lineages, [], []) == ()


def test_a_tampered_run_or_copy_in_the_record_is_no_memory() -> None:
    """A hand-edited record: a copy entry or a run of the wrong shape drops the whole record (observe again)."""
    good = ServiceRecord(baseline=8, admitted={"u": 2}, runs={"u": ("r", "n")}, copies=(("u", "r", 1.0, "k"),),
                         done=(("r", 1.0),), lineages=(("r", ("u",)),), returned=("w",)).to_json()
    assert ServiceRecord.from_json(good).baseline == 8
    older = json.loads(good)
    older["copies"] = [["u", "r", 1.0]]  # an older gate's entry, without a token
    assert ServiceRecord.from_json(json.dumps(older)).copies == (("u", "r", 1.0, ""),)
    for field, value in (("copies", [["u", 5, 1.0]]), ("copies", [["u"]]), ("runs", {"u": 7}), ("runs", ["u"]),
                         ("runs", {"u": ["r"]}), ("done", [["r"]]), ("done", [["r", 1.0]] * (MAX_DONE + 1)),
                         ("copies", [["u", "r", 1.0]] * (MAX_COPIES + 1)), ("copies", [["u", "r", 1.0, 7]]),
                         ("copies", [["u", "r", 1.0, "k", "x"]]), ("copies", [["u", "r", 1.0, "k" * (MAX_TOKEN_CHARS + 1)]]),
                         ("lineages", [["r", []]]), ("lineages", [["r", ["u"] * (MAX_LINEAGE_MEMBERS + 1)]]),
                         ("lineages", [["r", ["u"]], ["r", ["v"]]]), ("lineages", [["r", [5]]]), ("lineages", {"r": ["u"]}),
                         ("lineages", [["r", ["u"]]] * (MAX_LINEAGES + 1)), ("lineages", [["", ["u"]]]),
                         ("returned", ["w"] * (MAX_RETURNED + 1)), ("returned", [""]), ("returned", [7]),
                         ("returned", {"w": 1})):
        raw = json.loads(good)
        raw[field] = value
        assert ServiceRecord.from_json(json.dumps(raw)) == ServiceRecord(), (field, value)


def _resubmitted_copy(priority: int = 0) -> tuple[World, str]:
    """A preempted run whose copy waits, and a tenant's `argo resubmit` of that copy: a second parked copy."""
    w = World()
    w.lend(1)
    w.tick(chat=FULL)
    argo_controller(w.cluster)
    second = w.cluster.argo_verb("resubmit", "research", "job-0-p1")
    assert second is not None and w.state(second) == STATE_PARKED
    w.wf(second)["metadata"]["annotations"]["offhours.io/priority"] = str(priority)
    return w, second


@pytest.mark.parametrize("link", ["copy-of and parked-from (as argo copies them)", "parked-from only"])
def test_a_second_parked_copy_is_never_admitted_after_its_run_succeeded(link: str) -> None:
    """The fault: `argo resubmit` of a parked copy; the first copy runs and succeeds: the second must not rerun it.

    The second copy is no workflow the gate made (a label is anyone's to write): it waits while the run's own
    copy runs, and once the run succeeded it is refused, told why, and left to its submitter (never deleted).
    """
    w, second = _resubmitted_copy()
    if link == "parked-from only":
        del w.wf(second)["metadata"]["labels"][LABEL_COPY_OF]
    for _ in range(12):
        w.tick(chat=LOW)
        argo_controller(w.cluster)
    assert w.state("job-0-p1") == STATE_ADMITTED and w.state(second) == STATE_PARKED, w.log.getvalue()
    w.cluster.finish("research", "job-0-p1", "Succeeded")
    for _ in range(10):
        w.tick(chat=LOW)
        argo_controller(w.cluster)
    assert [r for r, _ in w.record().done] == ["job-0"]
    assert w.state(second) == STATE_PARKED, w.log.getvalue()
    reason = w.wf(second)["metadata"]["annotations"]["offhours.io/waiting-reason"]
    assert reason == ("not admitted: its run job-0 has succeeded: nothing is left to run; submit under a new "
                      "run id to run it again")


def test_a_resubmitted_copy_with_a_higher_priority_never_jumps_the_runs_own_copy() -> None:
    """The fault: the tenant's copy (a higher priority) was admitted before the gate's own copy of the run, and its
    success (or its claim of one) then deleted the gate's copy. Only the run's lineage runs it: the gate's copy."""
    w, second = _resubmitted_copy(priority=5)
    for _ in range(12):
        w.tick(chat=LOW)
        argo_controller(w.cluster)
    assert w.state("job-0-p1") == STATE_ADMITTED and w.state(second) == STATE_PARKED, w.log.getvalue()
    reason = w.wf(second)["metadata"]["annotations"]["offhours.io/waiting-reason"]
    assert reason == ("not admitted: its run job-0 belongs to workflow job-0-p1, which the gate admitted or parked for "
                      "it: no other workflow runs it while that run lives; submit under another run id"), reason


def test_a_run_that_failed_is_not_done_and_a_gone_workflow_is_unknown() -> None:
    """No false "done": the admitted copy fails on its own, or is deleted; the second copy may still run the run."""
    for end in ("Failed", "deleted"):
        w, second = _resubmitted_copy()
        for _ in range(12):
            w.tick(chat=LOW)
            argo_controller(w.cluster)
        if end == "deleted":
            del w.cluster.workflows[("research", "job-0-p1")]
        else:
            w.cluster.finish("research", "job-0-p1", end)
        for _ in range(10):
            w.tick(chat=LOW)
            argo_controller(w.cluster)
        assert w.state(second) == STATE_ADMITTED and w.record().done == (), (end, w.log.getvalue())
