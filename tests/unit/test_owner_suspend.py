"""`argo suspend` of an admitted workflow by its owner: the README's verb table says it stays counted and
stoppable. A suspended workflow that never had a pod is an admission that never landed (parked); one that
ran a step and was then suspended is its owner's pause, which the gate must not undo by admitting it again.
"""

from offhours.scripts.names import STATE_ADMITTED

from .test_gate_controller import World


def test_an_owners_suspend_between_steps_is_not_resumed_by_the_gate() -> None:
    w = World()
    w.lend(1)
    w.cluster.argo_verb("suspend", "research", "job-0")  # its owner pauses it (a bad checkpoint, a fix to make)
    w.wf("job-0")["status"]["nodes"] = {"n1": {"name": "job-0.train", "type": "Pod", "phase": "Succeeded"}}
    w.tick()
    assert w.state("job-0") == STATE_ADMITTED
    assert w.wf("job-0")["spec"].get("suspend") is True, w.cluster.calls[-10:]
