"""The return watch follows a bounded set of victims per reclaim, whatever a tenant floods the plan with.

Class: per-poll work a tenant sets. Each poll (every second while a reclaim is open) reads each victim's
pods (one list per workflow on a real cluster); a reclaim's stops include the workflows running without
admission (up to `research_writes_per_tick` of them, a tenant's to multiply), so a flood made the watch
list hundreds of workflows' pods every second. It follows the gate's own admissions first, and at most
MAX_VICTIMS in all.
"""

from hypothesis import given, settings
from hypothesis import strategies as st

from offhours.scripts.gate.return_metrics import ReturnMetrics
from offhours.scripts.gate.return_watch import MAX_VICTIMS, ReturnWatch
from offhours.scripts.gate.tick_state import ServiceOutcome
from offhours.scripts.policy.decide import Decision, ServiceState
from offhours.scripts.policy.plan import ADMITTED, Job, Plan

from .test_gate_controller import World


@settings(max_examples=20, deadline=None)
@given(own=st.integers(0, 40), others=st.integers(0, 600))
def test_a_reclaims_victims_are_its_own_stops_first_and_bounded(own: int, others: int) -> None:
    w = World()
    watch = ReturnWatch(w.gate, ReturnMetrics(["chat"]), monotonic=lambda: 10.0)
    stops = (*(Job(f"own-{i}", "chat", 1, ADMITTED, uid=f"u-own-{i}") for i in range(own)),
             *(Job(f"flood-{i}", "chat", 1, "parked", uid=f"u-flood-{i}") for i in range(others)))
    plan = Plan(service="chat", scale_to=8, lent_after=0, stop=stops)
    decision = Decision("chat", "reclaim", 0, 4, 8, "rise", ServiceState((), 0))
    watch.passed([ServiceOutcome("chat", decision=decision, plan=plan)], 9.0)
    followed = watch.victims["chat"]
    assert len(followed) <= MAX_VICTIMS
    assert {f"own-{i}" for i in range(min(own, MAX_VICTIMS))} <= set(followed)
