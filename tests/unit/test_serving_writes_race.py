"""Another writer of serving lands between every read and write of the gate: no serving write is blind.

The gate lowers serving only through `Cluster.lower_serving` (a JSON-patch `test` of the value its
decision read + `replace`) and raises it only through `Cluster.raise_serving` (max(what is there,
what is needed), tried again at once on a failed test). This state machine runs the gate's ticks, its
reclaim checks between ticks, the backstop and a removed service's release over the campaign's world
(tests/support/campaign.py), with an on-call engineer (or an HPA's owner) whose write lands inside the
gate's serving write: after the gate read the value, before its write arrives (`MemoryCluster.serving_writer`).

Invariants, in words (checked after every step, or in the rule that makes them observable):
- the gate never overwrites a value it did not read: what it leaves plus what research holds is at
  least the owner's baseline, counting every change the other writer made (a lower of serving written
  over a value it did not read would leave less), and no write it makes is above that baseline;
- serving is never lowered below what another writer set after the gate read it: a lower whose test
  failed writes nothing, and the decision made again adopts the other writer's value;
- a raise always lands on the same call: after a tick or a reclaim check that decided a reclaim, serving
  holds at least what that decision needs, whatever the other writer did in between (a raise is
  max(what is there, what is needed): the other writer's higher value stays, its lower one does not);
- a conflict is never a failed tick: without API faults, every service's tick runs clean;
- nothing is lent that serving did not give: after a tick, what research holds is at most the owner's
  baseline less serving's value (no admission on a lower that was never written).
"""

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from offhours.scripts.backstop.restore import HELD_LEASES, run_backstop
from offhours.scripts.cluster.base import Autoscaler, Serving, serving_value
from offhours.scripts.gate.controller import LOWER_TRIES, ServiceOutcome
from offhours.scripts.gate.reclaim import ReclaimCheck
from tests.support.campaign import CLEAN, FAULTY, NS, TICK, InsideWriter, World, campaign_config, live

SERVICE = st.sampled_from((CLEAN, FAULTY))
RPS = st.sampled_from([0.0, 5.0, 20.0, 45.0, 70.0, 120.0])
# What the other writer does at each of the next serving writes: nothing (None), or set this value.
LANDS = st.lists(st.one_of(st.none(), st.integers(1, 14)), min_size=1, max_size=4)


class ServingRaces(RuleBasedStateMachine):
    """The gate's every serving write, with another writer landing between its read and its write."""

    def __init__(self) -> None:
        super().__init__()
        self.w = World((CLEAN, FAULTY))
        self.writer = InsideWriter(self.w)
        self.w.cluster.serving_writer = self.writer
        self.outcomes: list[ServiceOutcome] = []
        self._capture(self.w)
        self.checks = ReclaimCheck(self.w.gate)
        self.jobs = 0
        self.ticked = False
        self.clean: dict[str, bool] = {}

    def _capture(self, w: World) -> None:
        """Keep the outcomes of the gate's passes (the reclaim checks start from them)."""
        tick = w.gate.tick

        def captured(*args: Any, **kwargs: Any) -> list[ServiceOutcome]:
            self.outcomes = tick(*args, **kwargs)
            return self.outcomes

        w.gate.tick = captured  # type: ignore[method-assign]

    def _step(self) -> None:
        self.ticked = False

    def _needs_met(self, outcomes: list[ServiceOutcome]) -> None:
        """A raise lands on the same call: a reclaim's need is met when the pass returns, whatever was written meanwhile."""
        for o in outcomes:
            d = o.decision
            if d is not None and d.action == "reclaim" and o.baseline is not None and not o.error:
                assert serving_value(self._target(o.service)) >= o.baseline - d.target_lent, (
                    f"{o.service}: the reclaim needs {o.baseline - d.target_lent}, serving at "
                    f"{self.w.value(o.service)}: {o.detail()}")

    def _owed(self, service: str) -> int:
        """The owner's baseline; while an owner's change inside a write is ambiguous (`World.in_flight`), the lower
        of its two readings (no controller can tell which the owner meant)."""
        w = self.w
        if service in w.unsure:
            return min(w.unsure[service][0], w.gate_reading(service, w.value(service)), w.baseline[service])
        return w.baseline[service]

    def _target(self, service: str) -> Serving:
        scaler = self.w.scaler(service)
        return scaler if scaler is not None else self.w.dep(service)

    # -- rules --------------------------------------------------------------------------------
    @initialize(chat=st.integers(0, 2), code=st.integers(0, 2))
    def start(self, chat: int, code: int) -> None:
        for i in range(2 + chat):
            self.submit(CLEAN, 1 + i % 3)
        for i in range(2 + code):
            self.submit(FAULTY, 1 + i % 2)

    @rule(service=SERVICE, replicas=st.integers(1, 3))
    def submit(self, service: str, replicas: int) -> None:
        """A researcher submits a job (parked until the gate admits it)."""
        self._step()
        self.jobs += 1
        name = f"{service}-job{self.jobs}"
        self.w.cluster.add_workflow(NS, name, service, replicas, created=self.w.cluster.clock)
        self.w.submitted[name] = replicas

    @rule(chat=RPS, code=RPS, lands=LANDS)
    def tick(self, chat: float, code: float, lands: list[int | None]) -> None:
        """A tick; the other writer lands inside its serving writes."""
        self._step()
        w = self.w
        w.source.demand.update({CLEAN: chat, FAULTY: code})
        self.writer.lands = {"*": list(lands)}
        self.clean = w.tick()
        self.writer.lands = {}
        assert all(self.clean.values()), f"a tick failed without any API fault: {w.log.getvalue()[-1500:]}"
        self._needs_met(self.outcomes)
        self.checks.remember(self.outcomes)
        w.argo()
        self.ticked = True
        for s in w.services:
            # What research holds after a tick was taken from serving: nothing is lent on a lower never written.
            if self.clean.get(s) and s not in w.unsure:
                assert w.lent(s) <= self._owed(s) - w.value(s), (
                    f"{s}: {w.lent(s)} lent, serving at {w.value(s)} of the owner's baseline {self._owed(s)}\n"
                    f"{w.log.getvalue()[-1500:]}")

    @rule(chat=RPS, code=RPS, lands=LANDS)
    def reclaim_check(self, chat: float, code: float, lands: list[int | None]) -> None:
        """A reclaim check between ticks, with the load of now; the other writer lands inside its raise."""
        self._step()
        w = self.w
        w.source.demand.update({CLEAN: chat, FAULTY: code})
        self.writer.lands = {"*": list(lands)}
        w.cluster.lowered = []
        acted = self.checks.run()
        self.writer.lands = {}
        assert not w.cluster.lowered, f"a reclaim check lowered serving of {w.cluster.lowered}"
        assert not any(o.error for o in acted), [o.detail() for o in acted]
        self._needs_met(acted)
        w.run_autoscalers()
        w.sync_pods()

    @rule(service=SERVICE, replicas=st.integers(1, 14))
    def owner_scales(self, service: str, replicas: int) -> None:
        """On-call sets serving between two ticks: the baseline moves by as much."""
        self._step()
        w = self.w
        scaler = w.scaler(service)
        if scaler is not None:
            replicas = max(replicas, scaler.min_replicas)
        w.owner_sets(service, replicas)
        if scaler is not None:
            scaler.max_replicas = replicas
        else:
            w.dep(service).replicas = replicas
        w.clean[service] = []
        w.run_autoscalers()
        w.sync_pods()

    @rule(service=SERVICE, low=st.integers(1, 3), high=st.integers(4, 12))
    def hpa_added(self, service: str, low: int, high: int) -> None:
        """An HPA now scales the Deployment: the gate lends by capping its maxReplicas, conditionally as well."""
        self._step()
        w = self.w
        if w.scaler(service) is None:
            w.cluster.autoscalers[(NS, service)] = Autoscaler("HorizontalPodAutoscaler", NS, f"{service}-hpa", low, high)
            w.run_autoscalers()
            w.sync_pods()
            w.rebase(service)
            w.clean[service] = []

    @rule(minutes=st.integers(1, 12), lands=LANDS)
    def gate_gone(self, minutes: int, lands: list[int | None]) -> None:
        """No tick runs, only the backstop, once a minute; the other writer lands inside its raises. Once the lease
        bound has passed, serving is back at the owner's baseline (its raise is max(what is there, baseline))."""
        self._step()
        w = self.w
        for _ in range(minutes):
            w.cluster.clock += TICK
            clock = w.cluster.clock
            self.writer.lands = {"*": list(lands)}
            run_backstop(w.cluster, NS, clock=lambda: clock, out=w.log, holder="backstop/races")
            self.writer.lands = {}
            w.run_autoscalers()
            w.sync_pods()
        for s in w.services:
            w.clean[s] = []
            record = w.record(s)
            if (record.renewed_at is None or record.lease_seconds is None or s in w.pending or s in w.unsure
                    or (record.deployment_uid, record.writes_to) != (w.dep(s).uid, w.target(s))):
                continue
            if w.cluster.clock - record.renewed_at > HELD_LEASES * record.lease_seconds + TICK:
                assert w.value(s) >= self._owed(s), (
                    f"{s}: the gate gone, serving at {w.value(s)} of its baseline {self._owed(s)}")

    @rule(chat=RPS, lands=LANDS)
    def service_removed(self, chat: float, lands: list[int | None]) -> None:
        """The faulty service leaves the configuration for one tick: its release raises serving back to the owner's
        baseline, with the other writer landing inside that raise; then it comes back."""
        self._step()
        w = self.w
        w.config = campaign_config((CLEAN,))
        w.gate = w.new_gate()
        self._capture(w)
        w.source.demand[CLEAN] = chat
        self.writer.lands = {"*": list(lands)}
        w.tick()
        self.writer.lands = {}
        if (NS, FAULTY) not in w.cluster.states:
            assert w.value(FAULTY) >= self._owed(FAULTY), (
                f"{FAULTY} removed: left at {w.value(FAULTY)} of its baseline {self._owed(FAULTY)}")
        w.argo()
        w.config = campaign_config((CLEAN, FAULTY))
        w.gate = w.new_gate()
        self._capture(w)
        self.checks = ReclaimCheck(w.gate)
        w.clean[FAULTY] = []
        if (NS, FAULTY) not in w.cluster.states:
            w.rebase(FAULTY)

    # -- invariants ---------------------------------------------------------------------------
    @invariant()
    def the_gate_owns_only_its_delta(self) -> None:
        """After a tick, what the gate left plus what research holds is at least the owner's baseline (every change
        of the other writer counted): a lower written over a value the gate did not read would leave less."""
        if not self.ticked:
            return
        w = self.w
        for s in w.services:
            held = max(w.lent(s), w.lent(s, readable=True))
            if self.clean.get(s):
                assert w.value(s) + held >= w.baseline[s], (
                    f"{s}: left at {w.value(s)} with {held} lent, the owner's baseline is {w.baseline[s]}\n"
                    f"{w.log.getvalue()[-1500:]}")

    @invariant()
    def no_run_twice(self) -> None:
        """The re-decision after a conflict admits nothing twice: every run has at most one live workflow."""
        runs: dict[str, int] = {}
        for wf in self.w.workflows():
            if live(wf):
                run = wf["metadata"]["labels"].get("offhours.io/run-id") or wf["metadata"]["name"]
                runs[run] = runs.get(run, 0) + 1
        assert all(n <= 1 for n in runs.values()), runs


ServingRacesInCI = ServingRaces.TestCase
ServingRacesInCI.settings = settings(max_examples=40, stateful_step_count=20, deadline=None, print_blob=True,
                                     derandomize=True, suppress_health_check=[HealthCheck.too_slow])


# -- named regressions: one each for what this class looked like -----------------------------------

def test_a_lower_over_an_on_call_raise_is_refused_and_the_raise_adopted() -> None:
    """On-call raises chat to 12 after the gate read 8 and decided to lend: the gate's lower is refused (nothing
    written), it decides again on 12 (the owner's baseline is now 12) and never leaves serving under 12 - lent."""
    w = World((CLEAN,))
    w.cluster.add_workflow(NS, "chat-job1", CLEAN, 2, created=w.cluster.clock)
    w.submitted["chat-job1"] = 2
    w.source.demand[CLEAN] = 5.0
    landed: list[int] = []

    def on_call(target: Serving) -> None:
        if not landed and int(w.cluster.calls[-1].split(" ")[-1]) < w.dep(CLEAN).replicas:
            landed.append(w.dep(CLEAN).replicas)
            w.dep(CLEAN).replicas = 12

    w.cluster.serving_writer = on_call
    for _ in range(6):  # low load: once its window has passed the gate lends, and on-call lands inside that lower
        outcomes = {o.service: o for o in w.gate.tick()}
        w.cluster.clock += 60
        if landed:
            break
    o = outcomes[CLEAN]
    assert landed == [8] and o.error is None, w.log.getvalue()
    assert "replicas set to 12 by another writer after the gate read 8" in (o.adopted or "")
    assert o.baseline == 12 and (w.dep(CLEAN).replicas, w.lent(CLEAN)) == (10, 2)  # the lend decided again on 12
    assert [c for c in w.cluster.calls if c.startswith("scale")][-1] != "scale chat 6"  # never the lower it first meant


def test_a_raise_lands_although_on_call_changed_serving_in_between() -> None:
    """The gate raises chat for a rise; on-call lowered it after the gate's read: the raise tests again and lands."""
    from offhours.scripts.cluster.memory import MemoryCluster

    c = MemoryCluster()
    dep = c.add_deployment(NS, CLEAN, 4)
    hits: list[int] = []

    def on_call(target: Serving) -> None:
        if not hits:
            hits.append(1)
            c.deployments[(NS, CLEAN)].replicas = 2

    c.serving_writer = on_call
    answer = c.raise_serving(dep, 4, 8)
    assert (answer.value, answer.conflict, c.deployments[(NS, CLEAN)].replicas) == (8, False, 8)


def _chat_with_three_jobs() -> World:
    w = World((CLEAN,))
    for i in range(3):
        w.cluster.add_workflow(NS, f"chat-job{i}", CLEAN, 2, created=w.cluster.clock)
        w.submitted[f"chat-job{i}"] = 2
    w.source.demand[CLEAN] = 5.0
    return w


def _tick_until_on_call_lands(w: World, on_call: Any) -> ServiceOutcome:
    w.cluster.serving_writer = on_call
    for _ in range(8):
        outcomes = {o.service: o for o in w.gate.tick()}
        w.cluster.clock += 60
        if on_call.hits:
            return outcomes[CLEAN]
    raise AssertionError(w.log.getvalue())


def test_a_lend_whose_lower_was_never_written_admits_nothing() -> None:
    """On-call raises chat by one inside each of the gate's lowers, LOWER_TRIES + 1 times: the lend holds, and its
    plan is the hold's - no job is admitted on GPUs serving never gave."""
    w = _chat_with_three_jobs()

    def on_call(target: Serving) -> None:
        if int(w.cluster.calls[-1].split(" ")[-1]) < w.dep(CLEAN).replicas and len(on_call.hits) <= LOWER_TRIES:
            on_call.hits.append(w.dep(CLEAN).replicas)
            w.dep(CLEAN).replicas += 1
    on_call.hits = []  # type: ignore[attr-defined]
    o = _tick_until_on_call_lands(w, on_call)
    assert len(on_call.hits) == LOWER_TRIES + 1, on_call.hits  # type: ignore[attr-defined]
    assert o.decision is not None and o.decision.action == "hold", o.detail()
    assert o.plan is not None and not o.plan.admit and w.lent(CLEAN) == 0, o.detail()


def test_a_reclaim_decided_after_the_last_lower_try_stays_a_reclaim() -> None:
    """The gate has lent; twice on-call raises chat inside its lower, the third time lowers it to 1: the decision
    made again on 1 is a reclaim, and it is written (serving raised, lent jobs stopped), not turned into a hold."""
    w = _chat_with_three_jobs()
    for _ in range(8):  # first the gate lends once, with nobody else writing
        w.gate.tick()
        w.cluster.clock += 60
        if w.lent(CLEAN):
            break
    assert w.lent(CLEAN) > 0

    def on_call(target: Serving) -> None:
        if int(w.cluster.calls[-1].split(" ")[-1]) < w.dep(CLEAN).replicas and len(on_call.hits) <= LOWER_TRIES:
            on_call.hits.append(w.dep(CLEAN).replicas)
            w.dep(CLEAN).replicas = w.dep(CLEAN).replicas + 1 if len(on_call.hits) <= LOWER_TRIES else 1
    on_call.hits = []  # type: ignore[attr-defined]
    o = _tick_until_on_call_lands(w, on_call)
    w.cluster.serving_writer = None
    assert len(on_call.hits) == LOWER_TRIES + 1, on_call.hits  # type: ignore[attr-defined]
    assert o.decision is not None and o.decision.action == "reclaim", o.detail()
    assert o.plan is not None and not o.plan.admit and o.baseline is not None, o.detail()
    assert w.dep(CLEAN).replicas >= o.baseline - o.decision.target_lent, o.detail()
    w.argo()
    assert w.lent(CLEAN) <= o.baseline - w.dep(CLEAN).replicas, o.detail()
