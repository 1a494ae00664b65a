"""Another workflow carrying my run id must not write its stops into my run's release measurements.

The measurements are kept under the run id, a tenant-written label. A workflow submitted straight
(`argo submit`, running without admission) labelled with a run that is parked now is stopped by the
gate's next tick like any job running without admission, and that stop was measured under my run:
a decoy that ignores SIGTERM for the whole grace made my run read as slow as the cap (stopped last at
equal priority), one that exits at once as fast as it likes.
"""

from offhours.scripts.names import LABEL_RUN_ID
from offhours.scripts.policy.release import PodExit

from .test_gate_controller import World, config


def _stopped_run_0() -> World:
    w = World(config(maxGraceSeconds=300))
    for name, run in (("job-0", "run-0"), ("job-1", "run-1")):
        w.park(name, replicas=2, run_id=run)  # each admitted under its own run (the gate records it)
    for _ in range(7):
        w.tick()
    assert w.replicas() == 4, w.log.getvalue()
    out = w.tick(chat=40)  # a reclaim: job-0 is stopped, its copy parked
    assert out["chat"].plan is not None and [j.name for j in out["chat"].plan.stop] == ["job-0"]
    stopped = w.now
    w.cluster.finish("research", "job-0", "Failed")
    w.cluster.set_workflow_pods("research", "job-0", [PodExit("job-0-step", stopped - 300, stopped + 5)])
    w.tick(chat=40)
    assert w.record().releases == (("run-0", w.now, 5.0),)
    return w


def _measured_after(w: World, decoy: str, load: float = 40.0) -> tuple:
    w.tick(chat=load)  # the decoy is stopped
    stopped = w.now
    w.cluster.set_workflow_pods("research", decoy, [PodExit(f"{decoy}-step", stopped - 10, None)])
    for _ in range(4):
        w.tick(chat=40)
    w.cluster.finish("research", decoy, "Failed")
    w.cluster.set_workflow_pods("research", decoy, [PodExit(f"{decoy}-step", stopped - 10, stopped + 290)])
    for _ in range(2):
        w.tick(chat=40)
    return tuple(r for r in w.record().releases if r[0] == "run-0")


def test_a_workflow_running_without_admission_under_my_run_id_measures_nothing_for_my_run() -> None:
    """Fault: a decoy submitted straight with my parked run's id was stopped and its 290 s recorded under my run."""
    w = _stopped_run_0()
    w.park("decoy", replicas=2, state="", run_id="run-0")  # argo submit --from, running, never admitted
    assert [r[2] for r in _measured_after(w, "decoy")] == [5.0], w.log.getvalue()


def test_an_admitted_job_relabelled_with_my_run_id_measures_nothing_for_my_run() -> None:
    """Fault: an admitted job relabelled with my parked run's id wrote its stop's 290 s under my run."""
    w = _stopped_run_0()
    w.wf("job-1")["metadata"]["labels"][LABEL_RUN_ID] = "run-0"  # kubectl label --overwrite on their own job
    # The next reclaim stops job-1 too.
    assert [r[2] for r in _measured_after(w, "job-1", load=80.0)] == [5.0], w.log.getvalue()
