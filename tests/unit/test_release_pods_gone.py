"""A stop whose slowest pod is deleted once it ends (pod GC) must not be measured from the pods left behind.

`release_seconds` counts a pod that is gone as released, and dates the release by the pods it still
reads. With `podGC: OnPodSuccess` (a workflow's own spec) the pod that checkpoints and exits 0 is
deleted at once, while a rank killed by the stop (exit 143, Failed) stays: the stop reads as fast
as the fastest pod, and the job is planned to free its GPUs sooner than it does. The workflow's own
status (its Pod nodes' finishedAt) still says when every pod ended.
"""

import pytest

from offhours.scripts.policy.release import PodExit

from .test_gate_controller import World, config


def test_a_stop_is_not_measured_faster_than_its_pod_gc_deleted_rank() -> None:
    """Fault: the checkpointing rank, deleted on success, was left out and the stop measured as 1 s instead of 100 s."""
    w = World(config(maxGraceSeconds=300))
    w.lend(2)
    w.wf("job-0")["spec"]["podGC"] = {"strategy": "OnPodSuccess"}  # its own spec says so while it runs
    w.tick(chat=40)  # a reclaim: job-0 is stopped
    stopped_at = w.now
    wf = w.wf("job-0")
    # As Argo records its two ranks: rank 0 checkpointed for 100 s and succeeded (its pod deleted), rank 1 was killed.
    wf["status"]["nodes"] = {
        "job-0-1": {"id": "job-0-1", "type": "Pod", "phase": "Succeeded", "startedAt": "1970-01-01T00:03:00Z",
                    "finishedAt": "1970-01-01T00:09:40Z"},
        "job-0-2": {"id": "job-0-2", "type": "Pod", "phase": "Failed", "startedAt": "1970-01-01T00:03:00Z",
                    "finishedAt": "1970-01-01T00:08:01Z"}}
    assert stopped_at == 480.0  # 00:08:00: rank 0 ended 100 s after the stop, rank 1 one second after it
    w.cluster.set_workflow_pods("research", "job-0", [PodExit("job-0-rank-1", 180.0, stopped_at + 1)])
    w.tick(chat=40)
    releases = w.record().releases
    assert not releases or releases[-1][2] >= 100.0, releases


@pytest.mark.parametrize("gc, measured", [({"strategy": "OnWorkflowCompletion"}, True), ({}, True),
                                          ({"strategy": "OnPodCompletion"}, False),
                                          ({"strategy": "onpodsuccess"}, False), ("OnPodSuccess", False)])
def test_only_a_pod_gc_that_keeps_pods_until_the_workflow_ends_is_measured(gc: object, measured: bool) -> None:
    """Invariant: a stop is measured only where no pod of it can be deleted unread; an unknown strategy deletes."""
    w = World(config(maxGraceSeconds=300))
    w.lend(2)
    w.wf("job-0")["status"]["storedWorkflowTemplateSpec"] = {"podGC": gc}  # from a template of its own
    w.tick(chat=40)
    stopped_at = w.now
    w.cluster.finish("research", "job-0", "Failed")
    w.cluster.set_workflow_pods("research", "job-0", [PodExit("job-0-step", 180.0, stopped_at + 40)])
    w.tick(chat=40)
    assert bool(w.record().releases) is measured, w.record().releases
