"""States that mean what they say, the same in jobs, why, report, usage and the read model.

A run is built as the gate leaves it: an original (submitted with `argo submit --from`, so created by
a person and not parked, or parked by `offhours submit`), then after each stop a parked copy the gate
creates (no creator of its own). Each stop happens either after the gate admitted the copy (it held
lent GPUs) or before (its pods were Unschedulable, nothing was lent).

Invariants, in words:
- a run's preemptions, in `jobs`, `why`, `report` and `usage`, are exactly the stops of copies that
  had been admitted; a stop before admission is no preemption and loses no GPU-hours;
- a run whose newest copy waits is "preempted→waiting" only if it was really preempted, else "waiting";
- a workflow run straight from Argo that was never admitted and whose work has no pod started is
  waiting for admission, not running;
- every copy belongs to its original's creator: `usage --by user` shows one user for one run.
"""

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from offhours.scripts.cli.jobs import jobs_text, usage_text, why_text
from offhours.scripts.pool.model import (
    PREEMPTED,
    RESUMED_WAITING,
    STOPPED_UNADMITTED,
    WAITING,
    build_pool,
)
from offhours.scripts.pool.usage import usage_by_month, usage_lines
from tests.support.pool_fixture import NOW, SERVING, chat_state, deployment, state_configmap, ts, workflow

CREATOR = {"workflows.argoproj.io/creator": "alice"}


def _nodes(work_phase: str) -> dict[str, Any]:
    return {"n1": {"type": "Pod", "templateRef": {"template": "check-parameters"}, "phase": "Succeeded",
                   "startedAt": ts(200)},
            "n2": {"type": "Pod", "templateName": "train", "phase": work_phase, "startedAt": ts(199)}}


def _chain(admitted_before_stop: list[bool], last_waits: bool = True) -> list[dict[str, Any]]:
    """The original and one copy per stop; the newest copy parked (or, with `last_waits` false, admitted and running)."""
    copies = []
    names = ["sweep"] + [f"sweep-p{i}" for i in range(1, len(admitted_before_stop) + 1)]
    for index, admitted in enumerate(admitted_before_stop):
        start = 300 - index * 20
        notes = {"offhours.io/preempted-at": ts(start - 10)}
        if admitted:
            notes["offhours.io/admitted-at"] = ts(start - 2)
            notes["offhours.io/last-checkpoint"] = ts(start - 5)
        if index:
            notes |= {"offhours.io/preemptions": str(index), "offhours.io/parked-from": names[index - 1]}
        wf = workflow(names[index], "chat", 2, "preempted", "Failed", created=start, run_id="sweep",
                      started=start - 1, finished=start - 11, shutdown="Stop", annotations=notes,
                      labels=CREATOR if index == 0 else {}, gpu_seconds=3600 if admitted else 0)
        wf["status"]["nodes"] = _nodes("Running" if admitted else "Pending")
        copies.append(wf)
    index = len(admitted_before_stop)
    notes = {"offhours.io/preemptions": str(index), "offhours.io/parked-from": names[index - 1]} if index else {}
    if last_waits:
        wf = workflow(names[index], "chat", 2, "parked", created=100, run_id="sweep", suspend=True, annotations=notes,
                      labels=CREATOR if index == 0 else {})
    else:
        wf = workflow(names[index], "chat", 2, "admitted", "Running", created=100, run_id="sweep", started=99,
                      annotations={**notes, "offhours.io/admitted-at": ts(99)}, labels=CREATOR if index == 0 else {})
        wf["status"]["nodes"] = _nodes("Running")
    copies.append(wf)
    return copies


def _pool(workflows: list[dict[str, Any]]) -> Any:
    return build_pool([state_configmap("chat", chat_state())], [deployment("chat", 10, 10)], workflows, SERVING, NOW)


@given(stops=st.lists(st.booleans(), max_size=5), last_waits=st.booleans())
def test_only_stops_after_admission_are_preemptions_in_every_verb(stops: list[bool], last_waits: bool) -> None:
    pool = _pool(_chain(stops, last_waits))
    (run,) = pool.runs
    real = sum(stops)
    assert run.preemptions == real
    assert sum(r.preemptions for r in usage_by_month(pool)) == real
    assert sum(r.preemptions for r in usage_lines(pool)) == real
    assert sum(1 for c in run.copies if c.state == PREEMPTED) == real
    assert sum(1 for c in run.copies if c.state == STOPPED_UNADMITTED) == len(stops) - real
    unadmitted_lost = [r.lost for r in usage_lines(pool)]
    if not real:
        assert unadmitted_lost == [0.0] or unadmitted_lost == []
    if last_waits:
        assert run.state == (RESUMED_WAITING if real else WAITING)
    preempted_lines = [e for e in run.timeline() if e.what.startswith("preempted")]
    assert len(preempted_lines) == real
    assert jobs_text(pool, [run]).splitlines()[1].split()[7] == str(real)  # the PREEMPTIONS column
    # One run, one user: the gate's copies carry no creator, and belong to the original's.
    by_user = usage_lines(pool, "user")
    assert [r.key for r in by_user] == ["alice"] and len(by_user[0].runs) == 1


def test_a_workflow_from_argo_submit_whose_pods_are_unschedulable_waits_for_admission() -> None:
    wf = workflow("sweep", "chat", 2, "", "Running", created=5, run_id="sweep", started=5, labels=CREATOR)
    wf["status"]["nodes"] = _nodes("Pending")  # the parameter check ran; the work's pod is Unschedulable
    pool = _pool([wf])
    (run,) = pool.runs
    assert run.state == WAITING and run.preemptions == 0
    assert "preempted" not in why_text(run, pool) and "running since" not in why_text(run, pool)
    assert run.current.reason and run.current.reason_computed  # why it waits, computed from the service's state
    wf["status"]["nodes"] = _nodes("Running")  # its work runs (on GPUs nobody lent): it is running, not waiting
    assert _pool([wf]).runs[0].state == "running"


def test_a_stop_before_admission_reads_as_such() -> None:
    pool = _pool(_chain([False]))
    (run,) = pool.runs
    text = why_text(run, pool)
    assert "stopped before admission (it held no lent GPUs)" in text
    assert "parked as sweep-p1 to wait for admission" in text
    assert "preempted" not in text
    assert usage_text(usage_lines(pool), "service").splitlines()[1].split()[:2] == ["chat", "1"]


def test_the_gates_parked_copy_carries_its_originals_creator() -> None:
    from offhours.scripts.cluster.workflow import build_parked_copy

    original = _chain([True], last_waits=False)[0]
    copy = build_parked_copy(original)
    assert copy["metadata"]["labels"]["offhours.io/user"] == "alice"
    assert "workflows.argoproj.io/creator" not in copy["metadata"]["labels"]  # Argo's own labels stay Argo's
    assert _pool([copy]).runs[0].current.user == "alice"  # read alone (its original deleted), still alice's
