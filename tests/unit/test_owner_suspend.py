"""`argo suspend` of an admitted workflow by its owner: the README's verb table says it stays counted and
stoppable. Since a suspended workflow with no live pod reads as parked (629ed54), the gate puts it back in
the queue and its next admission resumes it: the owner's pause is undone within a tick.
"""

import pytest

from offhours.scripts.names import STATE_ADMITTED

from .test_gate_controller import World


@pytest.mark.xfail(strict=True, reason="an admitted workflow its owner suspended between two steps reads as "
                   "parked and the gate resumes it at the next tick: argo suspend is undone")
def test_an_owners_suspend_between_steps_is_not_resumed_by_the_gate() -> None:
    w = World()
    w.lend(1)
    w.cluster.argo_verb("suspend", "research", "job-0")  # its owner pauses it (a bad checkpoint, a fix to make)
    w.wf("job-0")["status"]["nodes"] = {"n1": {"name": "job-0.train", "type": "Pod", "phase": "Succeeded"}}
    w.tick()
    assert w.state("job-0") == STATE_ADMITTED
    assert w.wf("job-0")["spec"].get("suspend") is True, w.cluster.calls[-10:]
