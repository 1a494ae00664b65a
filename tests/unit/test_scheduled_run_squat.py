"""A scheduled run's id, taken first by someone else's workflow.

A run id not yet in any lineage belongs to the first workflow the gate admits under it. A scheduled run's id is
known ahead (`<prefix>-<the firing's UTC date and minute>`, `offhours schedule`): a tenant who submitted a
workflow under tomorrow's id before the CronWorkflow fired had it admitted first, its steps writing that run's
checkpoints, and the scheduled run itself then waited behind it for as long as it lived.

Every mark on a workflow is a tenant's to write (its labels, the scheduled-time annotation, an ownerReference to
the CronWorkflow), but not its creationTimestamp: the API server's. A scheduled run's workflow is created when
its CronWorkflow fires, never before the minute its id names; and it is the first workflow of that id.
"""

from datetime import datetime, timezone

from offhours.scripts.cluster.workflow import SCHEDULE_SKEW_SECONDS, workflow_job
from offhours.scripts.names import (
    ANNOTATION_WAITING_REASON,
    LABEL_REPLICAS,
    LABEL_RUN_ID,
    STATE_ADMITTED,
    STATE_PARKED,
)
from offhours.scripts.policy.plan import Job

from .test_argo_verbs import LOW, argo_controller
from .test_gate_controller import World
from .test_run_identity_gate import _scheduled, _set_run_param, _ticks

NIGHT = "night-20250113-1200"  # the id of the run `_scheduled` fires at 2025-01-13T12:00:00Z


def _created(w: World, name: str, at: str) -> None:
    w.wf(name)["metadata"]["creationTimestamp"] = at  # the API server's, as it created the workflow


def test_a_workflow_submitted_under_a_scheduled_runs_id_before_its_night_is_never_admitted() -> None:
    """Fault: submitted the day before under the id of tomorrow's run (label and parameter agreeing), a tenant's
    workflow was admitted and took the run; the scheduled run, when it fired, waited behind it."""
    w = World()
    w.park("squat", replicas=2, run_id=NIGHT, priority=1000)
    _set_run_param(w, "squat", NIGHT)
    _created(w, "squat", "2025-01-12T12:00:00Z")
    _ticks(w, 7)
    assert w.state("squat") == STATE_PARKED, w.log.getvalue()
    reason = w.wf("squat")["metadata"]["annotations"][ANNOTATION_WAITING_REASON]
    assert "before the time its run id names" in reason, reason
    _scheduled(w, "night-1736769600", NIGHT)  # the CronWorkflow fires
    _created(w, "night-1736769600", "2025-01-13T12:00:01Z")
    _ticks(w, 2)
    assert w.state("night-1736769600") == STATE_ADMITTED and w.state("squat") == STATE_PARKED, w.log.getvalue()


def test_a_workflow_submitted_under_a_scheduled_runs_id_just_after_it_fired_never_jumps_it() -> None:
    """Fault: created seconds after the CronWorkflow fired (its night has begun), with a higher priority, while the
    scheduled run waited parked: the first admitted under the id was the tenant's."""
    w = World()
    _scheduled(w, "night-1736769600", NIGHT)
    _created(w, "night-1736769600", "2025-01-13T12:00:00Z")
    w.park("squat", replicas=2, run_id=NIGHT, priority=1000)
    _set_run_param(w, "squat", NIGHT)
    _created(w, "squat", "2025-01-13T12:00:30Z")
    _ticks(w, 7)
    assert w.state("night-1736769600") == STATE_ADMITTED and w.state("squat") == STATE_PARKED, w.log.getvalue()
    reason = w.wf("squat")["metadata"]["annotations"][ANNOTATION_WAITING_REASON]
    assert "night-1736769600" in reason, reason


def test_a_scheduled_runs_own_copies_and_a_later_rerun_of_an_old_night_still_run() -> None:
    """What survives: the run's parked copy (made after the night, by the gate) runs it on, and a workflow submitted
    later under a past night's id is an ordinary submission (first admitted: its run)."""
    w = World()
    _scheduled(w, "night-1736769600", NIGHT)
    _created(w, "night-1736769600", "2025-01-13T12:00:00Z")
    _ticks(w, 7)
    assert w.state("night-1736769600") == STATE_ADMITTED
    w.tick(chat=100.0)  # a reclaim: stopped, parked again as its copy
    argo_controller(w.cluster)
    copies = [n for (_, n) in w.cluster.workflows if n.startswith("night-1736769600-p")]
    assert copies and w.state(copies[0]) == STATE_PARKED
    _created(w, copies[0], "2025-01-14T08:00:00Z")
    _ticks(w, 7)
    assert w.state(copies[0]) == STATE_ADMITTED, w.log.getvalue()
    w.park("rerun", replicas=1, run_id="old-20240101-0000")
    _set_run_param(w, "rerun", "old-20240101-0000")
    _created(w, "rerun", "2025-02-01T00:00:00Z")
    _ticks(w, 3)
    assert w.state("rerun") == STATE_ADMITTED, w.log.getvalue()


def test_a_run_id_naming_a_firing_is_checked_against_the_creation_time_alone() -> None:
    """The codec's rule at its edges: created within the clocks' skew of the minute named is the run's; earlier, or
    with no creation time, it is not; an id whose suffix is no date is an ordinary run id."""
    def job(run: str, created: object) -> Job | None:
        return workflow_job({"metadata": {"name": "w", "creationTimestamp": created,
                                          "labels": {LABEL_REPLICAS: "1", LABEL_RUN_ID: run}}, "spec": {"suspend": True}})

    at = datetime(2025, 1, 13, 12, 0, tzinfo=timezone.utc).timestamp()
    for created, refused in ((at, False), (at - SCHEDULE_SKEW_SECONDS, False), (at - SCHEDULE_SKEW_SECONDS - 1, True),
                             (at + 86_400, False), (None, True), ("soon", True)):
        read = job(NIGHT, created)
        assert read is not None and (read.problem is not None) == refused, (created, read.problem)
    for ordinary in ("night-99999999-9999", "night-20251301-0000", "night-2025011-1200", "night"):
        read = job(ordinary, None)
        assert read is not None and read.problem is None, (ordinary, read.problem)


def test_a_later_workflow_under_a_scheduled_runs_id_in_another_service_never_jumps_it() -> None:
    """Fault: the same squat through another service of the research namespace (chat, ticked before code, where the
    scheduled run waits): each service saw one workflow of the id, and the first service to admit took the run."""
    w = World()
    _scheduled(w, "night-1736769600", NIGHT)
    w.wf("night-1736769600")["metadata"]["labels"]["offhours.io/service"] = "code"
    _created(w, "night-1736769600", "2025-01-13T12:00:00Z")
    w.park("squat", replicas=2, run_id=NIGHT, priority=1000)
    _set_run_param(w, "squat", NIGHT)
    _created(w, "squat", "2025-01-13T12:00:30Z")
    _ticks(w, 7, code=LOW)
    assert w.state("squat") == STATE_PARKED, w.log.getvalue()
    assert w.state("night-1736769600") == STATE_ADMITTED, w.log.getvalue()

