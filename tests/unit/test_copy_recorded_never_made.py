"""A copy the gate recorded but never made: the gate killed between its record and its stop (or the stop failed).

The copies are recorded before the stop, as admissions are; an original in that record is never read for how
it ended ("one the gate stopped itself did not succeed"). Its stop never landed, so it ran on, admitted,
and succeeded: the record kept it as stopped while it was listed, and its run was never done.
"""

import pytest

from offhours.scripts.gate import actuate
from offhours.scripts.names import STATE_ADMITTED
from offhours.scripts.policy.record import with_copies

from .test_argo_verbs import FULL, LOW
from .test_gate_controller import World


def test_a_run_whose_recorded_stop_never_landed_is_done_when_it_succeeds() -> None:
    """The fault: the gate dies after recording alice's copy; alice runs on and succeeds; her run is never done."""
    w = World()
    w.park("alice", replicas=2)
    for _ in range(7):
        w.tick(chat=LOW)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(actuate, "research_side", lambda *_a, **_k: None)  # killed after the record
        w.tick(chat=FULL)
    uid = w.wf("alice")["metadata"]["uid"]
    assert w.state("alice") == STATE_ADMITTED and [c[0] for c in w.record().copies] == [uid]
    for _ in range(3):
        w.tick(chat=LOW)
    w.cluster.finish("research", "alice", "Succeeded")
    for _ in range(3):
        w.tick(chat=LOW)
    assert [run for run, _ in w.record().done] == ["alice"], w.log.getvalue()


def test_a_copy_is_kept_while_its_original_is_stopped_and_forgotten_while_it_still_runs_admitted() -> None:
    """The rule itself: an entry whose original is still listed as admitted is forgotten; this tick's stop is kept."""
    copies = (("u", "r", 0.0, "ku"), ("v", "s", 0.0, "kv"))
    kept = with_copies(copies, [("w", "t"), ("v", "s")], ["u", "v", "w"], 60.0, running=["v", "w"], token=lambda: "new")
    assert [c[0] for c in kept] == ["u", "w", "v"]
    # A stop tried again keeps the token of its first try: a copy that try made carries it.
    assert [c[3] for c in kept] == ["ku", "new", "kv"]
