"""`argo resubmit` of a preempted workflow whose parked copy waits.

The fault: a parked workflow carried no run, so the resubmitted one was the run's only running workflow,
stopped and parked again like any job running without admission: the run had two parked copies, and the
second one ran the finished run again, over its outputs. The gate's record now says which parked copies it
made: the one that waits carries the run, and the resubmitted workflow is its duplicate, stopped without
another copy (README's verb table).
"""

from offhours.scripts.names import STATE_ADMITTED

from .test_argo_verbs import FULL, LOW, argo_controller
from .test_gate_controller import World


def test_a_resubmitted_preempted_run_is_not_run_again_after_it_succeeded() -> None:
    w = World()
    w.lend(1)
    w.tick(chat=FULL)  # reclaim: job-0 stopped, parked again as job-0-p1
    argo_controller(w.cluster)
    w.cluster.argo_verb("resubmit", "research", "job-0")
    for _ in range(12):
        w.tick(chat=LOW)
        argo_controller(w.cluster)
    assert w.state("job-0-p1") == STATE_ADMITTED, w.log.getvalue()
    w.cluster.finish("research", "job-0-p1", "Succeeded")  # the run is done
    for _ in range(10):
        w.tick(chat=LOW)
        argo_controller(w.cluster)
    again = [name for (_, name), wf in w.cluster.workflows.items()
             if name != "job-0-p1" and wf["metadata"]["labels"].get("offhours.io/state") == STATE_ADMITTED]
    assert again == [], w.log.getvalue()
