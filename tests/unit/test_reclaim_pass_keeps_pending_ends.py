"""A reclaim check's pass writes the service's record: it must keep what only a full tick reads.

The fault played: an admitted copy of a run succeeds, the tick that first misses it cannot read how it
ended (the API answered an error), so the record keeps it as an end to read again; before the next tick a
rise brings a reclaim check's pass, which reads no ends. That pass rewrote the record without the pending
end (and its run's lineage), so the next tick never read it: the run was not done and a second copy of it
ran again after it had succeeded. What must survive: the pending end, and the run done once it is read.
"""

from offhours.scripts.cluster.base import ClusterError
from offhours.scripts.gate.reclaim import ReclaimCheck
from offhours.scripts.names import STATE_ADMITTED, STATE_PARKED

from .test_argo_verbs import FULL, LOW, argo_controller
from .test_run_identity_record import _resubmitted_copy


def test_a_reclaim_pass_keeps_an_end_still_to_be_read_and_the_run_is_done_at_the_next_tick() -> None:
    w, second = _resubmitted_copy()
    w.park("other")
    for _ in range(12):
        w.tick(chat=LOW)
        argo_controller(w.cluster)
    assert w.state("job-0-p1") == STATE_ADMITTED and w.state("other") == STATE_ADMITTED, w.log.getvalue()
    uid = w.wf("job-0-p1")["metadata"]["uid"]
    w.cluster.finish("research", "job-0-p1", "Succeeded")
    w.cluster.fail_next["get-workflow job-0-p1"] = [ClusterError("get workflow: HTTP 503")]
    check = ReclaimCheck(w.gate)
    check.remember(w.tick(chat=LOW).values())
    assert uid in (w.record().runs or {}), "the end could not be read: kept to be read again"
    w.now += 15.0
    w.cluster.clock = w.now
    w.source.rps["chat"] = FULL
    assert [o.service for o in check.run()] == ["chat"] and w.state("other") != STATE_ADMITTED
    assert uid in (w.record().runs or {}), "the reclaim pass dropped the end still to be read"
    argo_controller(w.cluster)
    w.tick(chat=LOW)
    assert [r for r, _ in w.record().done] == ["job-0"], w.log.getvalue()
    for _ in range(10):
        w.tick(chat=LOW)
        argo_controller(w.cluster)
    assert w.state(second) == STATE_PARKED, "a second copy ran a run that had succeeded"
