"""A stop is measured from when the gate wrote it, not from the start of the tick that planned it.

The tick records `now` (its start) as the stop's time, and `release_seconds` leaves out every pod created
after it as the exit handler's. The stop itself is written seconds later, after every service's serving
writes, records and advisory reads (a reclaim reads the victims' checkpoint progress first, up to the
tick's advisory budget). A step pod Argo started in between holds GPUs and is stopped like the others,
but was left out, and a step that ended in between was taken for the release's end.
"""

from offhours.scripts.policy.release import PodExit

from .test_gate_controller import World, config


def test_a_step_started_between_the_ticks_start_and_the_stop_write_is_measured() -> None:
    """Fault: a 70 s release read as 3 s: the next step's pod, created 5 s after the tick started, was left out."""
    w = World(config(maxGraceSeconds=300))
    w.lend(2)

    def slow_progress(job: object) -> None:  # the checkpoint store answers after 10 s
        w.now += 10.0
        w.cluster.clock = w.now

    w.gate.progress = slow_progress
    w.tick(chat=40)  # a reclaim: job-0 is stopped after its progress was read
    start = w.record().releasing[0][2]
    assert w.wf("job-0")["metadata"]["annotations"]["offhours.io/preempted-at"] > "1970-01-01T00:08:00Z"
    w.gate.progress = None
    w.cluster.finish("research", "job-0", "Failed")
    w.cluster.set_workflow_pods("research", "job-0", [
        PodExit("job-0-step-1", start - 100, start + 3, gpus=True),  # ended 3 s into the tick, before the stop's write
        PodExit("job-0-step-2", start + 5, start + 70, gpus=True)])  # started by Argo before the stop arrived
    w.tick(chat=40)
    assert w.record().releases and w.record().releases[-1][2] == 70.0, w.record().releases


def test_an_exit_handlers_pod_after_the_stop_is_not_the_release() -> None:
    """Fault guarded: the exit handler (no GPU, created after the stop) runs on after the GPUs are free; it is no holder."""
    w = World(config(maxGraceSeconds=300))
    w.lend(2)
    w.tick(chat=40)
    start = w.record().releasing[0][2]
    w.cluster.finish("research", "job-0", "Failed")
    w.cluster.set_workflow_pods("research", "job-0", [
        PodExit("job-0-step", start - 100, start + 20, gpus=True),  # checkpointed, gone 20 s after the stop
        PodExit("job-0-exit", start + 21, start + 75)])  # the exit handler: no GPU, slow to end
    w.tick(chat=40)
    assert w.record().releases and w.record().releases[-1][2] == 20.0, w.record().releases
