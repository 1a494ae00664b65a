"""Issue 31 §7: one stateful campaign over the gate's observe -> reconcile -> actuate, every actor at once.

`WholeCampaign` is the fault campaign of tests/support/campaign.py (API errors, malformed readings, kills between
writes, a second gate, the Lease taken mid-tick, Argo's verbs, a tenant's labels, on-call's scale, an HPA, a
recreated Deployment, a corrupted record, the gate stopped, a service removed) with the actors it lacked, each
landing between any read and write of a tick:
- a hostile tenant writing any label, annotation, status phase, priority or spec field of its workflows, or making
  a workflow under the name the gate's copy would take, at any call of a tick (`SimCluster.meddle_at`);
- on-call or an HPA's owner writing serving inside the gate's own serving writes (`InsideWriter`);
- configuration edits of every field of a service and of the gate, and the service renamed;
- each process (gate, second gate, backstop, exit hook) on a node whose clock is off the API server's by up to a day
  (`node`);
- writes whose effect lands but whose answer is lost (`SimCluster.lose_next`);
- the gate restarted (a new process, no memory) between any two ticks.

Invariants, in words (each beside its code; the inherited ones are in tests/support/campaign.py):
- serving is never below what its load needs for longer than the return bound (`serving_within_reaction_time`);
- nothing the gate lent runs uncounted: after a tick that ran clean, every workflow it admitted against the
  Deployment it lends from, and that still runs (Argo has not ended it, whatever its status says), is in its record;
- what the gate lowered is restored after a configuration edit: an edit that keeps the service leaves serving plus
  what research holds at the owner's baseline (`gate_owns_only_its_delta`); a service renamed or removed has its
  baseline back on its first tick without a fault;
- no run id runs twice at once (`no_work_lost_or_duplicated`);
- a tick's API calls stay within the bound of tests/support/tick_bound.py (services, admissions and budgets).

CI runs a fixed budget, derandomized (60 examples x 40 steps: about a minute on two shared cores); `make campaign`
runs the long one (randomized, 2,000 x 60 by default; OFFHOURS_CAMPAIGN_EXAMPLES / OFFHOURS_CAMPAIGN_STEPS).
A failure prints its reproduction blob.
"""

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule

from offhours.scripts.names import (
    ANNOTATION_PRIORITY,
    ANNOTATION_ROOT,
    FINISHED_PHASES,
    LABEL_RUN_ID,
    LABEL_SERVICE,
    LABEL_STATE,
)
from offhours.scripts.policy.record import ServiceRecord
from tests.support.campaign import (
    CLEAN,
    FAULTY,
    NS,
    PICK,
    RPS,
    TENANT_VALUES,
    WRITES,
    GateCampaign,
    InsideWriter,
    World,
    campaign_config,
    run_of,
)
from tests.support.tick_bound import gate_call_bound

DAY = 86_400.0
SKEWS = st.sampled_from([-DAY, -3600.0, -61.0, 0.0, 61.0, 3600.0, DAY])
# What the other serving writer does at each of a service's next serving writes: nothing, or set this value.
LANDS = st.lists(st.one_of(st.none(), st.integers(1, 14)), min_size=0, max_size=3)
# Everything a tenant can write on its own workflow at any moment: (where, key, value).
TENANT_WRITES: tuple[tuple[str, str, Any], ...] = (
    *TENANT_VALUES,
    ("status", "phase", "Succeeded"),
    ("status", "phase", "Failed"),
    ("status", "phase", "Running"),
    ("status", "phase", "Pending"),
    ("spec", "priority", 1_000_000),
    ("spec", "podPriorityClassName", "system-node-critical"),
    ("spec", "activeDeadlineSeconds", 1),
    # Moves itself out of its service's queue (not into the neighbour's: the twin, which has no faulty service,
    # would then differ by design; a service label explains a count, never lowers one, whichever it names).
    ("labels", LABEL_SERVICE, "elsewhere"),
    ("labels", LABEL_STATE, "preempted"),
    ("annotations", ANNOTATION_PRIORITY, "1000"),
    ("name", "copy", ""),  # a workflow made under the name the gate's parked copy of this one would take
)
# Fields of the faulty service's configuration, each edited to a value the campaign's capacity model stays
# conservative under (its `required` uses the shipped headroom, capacity and floor: an edit may only keep more).
SERVICE_EDITS: tuple[tuple[str, Any], ...] = (
    ("headroom", 0.5), ("minReplicas", 3), ("stabilizationSeconds", 0), ("stabilizationSeconds", 900),
    ("maxLendStep", 1), ("maxLendStep", 4), ("lendHysteresis", 0), ("lendHysteresis", 3), ("gpusPerReplica", 8),
    ("gpusPerReplica", 1), ("maxGraceSeconds", 5), ("trend", False), ("capacity", {"requestsPerSecond": 8.0}),
    ("maxWaitingPerReplica", 1.0), ("coldStartSeconds", 600), ("volatilityHeadroomMax", 0.0),
    ("volatilityLookbackSeconds", 600), ("timeOfDayDays", 7),
)
GATE_EDITS: tuple[tuple[str, Any], ...] = (
    ("failSafe", {"failedTicksBeforeReclaim": 1}), ("failSafe", {"failedTicksBeforeReclaim": 5}),
    ("failSafe", {"failedTicksBeforeReclaim": 3, "leaseTicks": 2}),
    ("failSafe", {"failedTicksBeforeReclaim": 3, "leaseTicks": 6}), ("reclaimCheckSeconds", 0),
)
RENAMED = "renamed"  # the faulty service's name after a rename (its Deployment named in `deployment`)


class WholeCampaign(GateCampaign):
    """The fault campaign with every actor of issue 31 §7 between any read and write of a tick."""

    def __init__(self) -> None:
        super().__init__()
        self.writers = {id(w): InsideWriter(w) for w in (self.main, self.twin)}
        for w in (self.main, self.twin):
            w.cluster.serving_writer = self.writers[id(w)]
        self.edits: dict[str, Any] = {}
        self.service_edits: dict[str, dict[str, Any]] = {}

    # -- the bound on a tick's calls, checked on every tick of every rule ------------------------
    def _tick(self, chat: float, code: float, second: bool = False, main_only: bool = False) -> None:
        admitted = {id(w): self._admissions(w) for w in (self.main, self.twin)}
        super()._tick(chat, code, second, main_only)
        for w in (self.main, self.twin):
            self._within_bound(w, admitted[id(w)])

    @staticmethod
    def _admissions(w: World) -> int:
        return sum(len(ServiceRecord.from_json(text).admitted or {}) for text in w.cluster.states.values())

    def _within_bound(self, w: World, before: int) -> None:
        """Invariant: a tick's API calls are at most the bound of services, the gate's admissions (recorded before
        the tick, or made in it) and its budgets, whatever tenants made (an exit hook's calls are its job's)."""
        calls = [c for c in w.tick_calls if not c.startswith("exit-hook:")]
        made = sum(c.startswith(("admit ", "adopt ")) for c in calls)
        services = len(w.services) + 1  # and a renamed service's record, released beside its new name
        bound = gate_call_bound(w.gate, services, before + made)
        assert len(calls) <= bound, f"{len(calls)} calls in a tick, the bound is {bound}: {calls[:60]}"

    def _settle(self) -> None:
        for w in (self.main, self.twin):
            self.writers[id(w)].lands = {}

    def config_for(self, services: tuple[str, ...]) -> Any:
        """The configuration as edited so far, for `services` (the inherited removal of a service keeps the edits)."""
        return campaign_config(services, self.edits, {s: e for s, e in self.service_edits.items() if s in services})

    def _configure(self) -> None:
        """The configuration as edited so far, in both worlds (a gate edit is the neighbour's too); the gate reloads."""
        for w in (self.main, self.twin):
            w.config = self.config_for((CLEAN, FAULTY) if FAULTY in w.services and not w.removed else (CLEAN,))
            w.gate = w.new_gate()

    # -- the actors it lacked -----------------------------------------------------------------
    @rule(chat=RPS, code=RPS, chat_lands=LANDS, code_lands=LANDS)
    def someone_writes_inside_the_serving_writes(self, chat: float, code: float, chat_lands: list[int | None],
                                                 code_lands: list[int | None]) -> None:
        """A tick in which on-call (or an HPA's owner) writes serving between the gate's read and its serving write."""
        self._step()
        self.writers[id(self.main)].lands = {CLEAN: list(chat_lands), FAULTY: list(code_lands)}
        self.writers[id(self.twin)].lands = {CLEAN: list(chat_lands)}
        for writer in self.writers.values():
            writer.moved = set()
        try:
            self._tick(chat, code)
        finally:
            self._settle()
        # A change that landed inside the tick's serving write is the owner's: the gate reads it in the answer, and
        # adopts it on its next tick (which the invariants judge); judged on this one, a raise's answer above what
        # it wrote (on-call raised serving while replicas were lent) would be read as the gate's own shortfall.
        for service in self.writers[id(self.main)].moved:
            self.clean[service] = False

    @rule(chat=RPS, code=RPS, at=st.integers(0, 60), pick=PICK, write=st.sampled_from(TENANT_WRITES))
    def tenant_writes_mid_tick(self, chat: float, code: float, at: int, pick: int, write: tuple[str, str, Any]) -> None:
        """A tenant writes on one of the faulty service's workflows at the gate's `at`-th call of a tick."""
        self._step()
        w = self.main

        def meddle() -> None:
            wfs = [wf for wf in w.workflows(FAULTY) if wf.get("status", {}).get("phase") not in FINISHED_PHASES]
            if not wfs:
                return
            wf = wfs[pick % len(wfs)]
            where, key, value = write
            w.tampered.add(run_of(wf))
            meta = wf["metadata"]
            if where == "name":
                name = f"{meta['name']}-p1"
                if (NS, name) not in w.cluster.workflows:
                    made = w.cluster.add_workflow(NS, name, FAULTY, 1, state="", created=w.cluster.clock,
                                                  run_id=run_of(wf))
                    made["spec"].pop("suspend", None)
                    made["metadata"].setdefault("annotations", {})[ANNOTATION_ROOT] = run_of(wf)
            elif where == "status":
                wf.setdefault("status", {})[key] = value
            elif where == "spec":
                wf["spec"][key] = value
            else:
                meta.setdefault(where, {})[key] = value
            w.tampered.add(run_of(wf))  # a run id or service it took: that run's outcome may change with it

        w.cluster.meddle_at = (at, meddle)
        try:
            self._tick(chat, code)
        finally:
            w.cluster.meddle_at = None

    @rule(verb=st.sampled_from(WRITES), times=st.integers(1, 2))
    def answers_lost(self, verb: str, times: int) -> None:
        """The faulty service's next `verb` write(s) land, but their answer is lost (a timeout after the write)."""
        self._step()
        lose = self.main.cluster.lose_next
        lose[verb] = lose.get(verb, 0) + times

    @rule(gate=SKEWS, second=SKEWS, backstop=SKEWS, hook=SKEWS)
    def clocks_skewed(self, gate: float, second: float, backstop: float, hook: float) -> None:
        """Each process's node clock is off the API server's (and each other's) by up to a day."""
        self._step()
        for w in (self.main, self.twin):
            w.cluster.skews = {"gate": gate, "second-gate": second, "backstop": backstop, "hook": hook}

    @rule()
    def gate_restarts(self) -> None:
        """The gate's process is replaced between two ticks (its memory is gone; its Lease stays held)."""
        self._step()
        for w in (self.main, self.twin):
            w.gate = w.new_gate()

    @rule(field=st.sampled_from(SERVICE_EDITS))
    def service_configuration_edited(self, field: tuple[str, Any]) -> None:
        """A field of the faulty service's configuration is edited (it stays edited)."""
        self._step()
        key, value = field
        self.service_edits.setdefault(FAULTY, {})[key] = value
        self._configure()

    @rule(field=st.sampled_from(GATE_EDITS))
    def gate_configuration_edited(self, field: tuple[str, Any]) -> None:
        """A field of the gate's configuration is edited (both worlds: it is the neighbour's too)."""
        self._step()
        key, value = field
        self.edits[key] = value
        self._configure()

    @rule(ticks=st.integers(1, 3), chat=RPS, code=RPS)
    def service_renamed(self, ticks: int, chat: float, code: float) -> None:
        """The faulty service is renamed (its Deployment named in the configuration), then named back. Under the new
        name nothing is queued, so nothing is lent: what the old name lowered is back on the first tick without a
        fault on the faulty service's calls, and stays back."""
        self._step()
        w = self.main
        renamed = {RENAMED: {"deployment": FAULTY, **self.service_edits.get(FAULTY, {})}}
        w.config = campaign_config((CLEAN, RENAMED), self.edits, {**self.service_edits, **renamed})  # the rename
        w.removed = True
        w.gate = w.new_gate()
        for _ in range(ticks):
            self._tick(chat, code)
            if FAULTY not in w.cluster.faulted and (NS, FAULTY) not in w.cluster.states:
                assert w.value(FAULTY) >= w.baseline[FAULTY], (
                    f"{FAULTY} renamed {RENAMED}: left at {w.value(FAULTY)} of its baseline {w.baseline[FAULTY]}\n"
                    f"{w.log.getvalue()[-1500:]}")
        w.removed = False
        self._configure()
        w.clean[FAULTY] = []
        if (NS, FAULTY) not in w.cluster.states:
            w.rebase(FAULTY)  # its record is gone: the gate learns it afresh

    # -- invariants ---------------------------------------------------------------------------
    @invariant()
    def nothing_the_gate_lent_runs_uncounted(self) -> None:
        """After a tick that ran clean for a service, every workflow the gate admitted against the Deployment it
        lends from, and that still runs (Argo has not ended it), is counted in the gate's record: it cannot lend the
        same GPUs twice. A tenant's rewrite of its own labels or status (none of which can lower a count) is judged
        against it too, except a rewrite that takes it out of the service's listing (its service label, or a
        finished phase): that one's GPUs are counted from its pods on the pool (policy/holding.py,
        tests/unit/test_pool_squatters.py), which this world, whose workflows run no pods, does not model."""
        if not self.ticked:
            return
        w = self.main
        for s in w.services:
            if not self.clean.get(s) or s in w.pending or s in w.unsure or w.removed:
                continue
            record = w.record(s)
            uid = w.dep(s).uid
            if record.admitted is None or record.deployment_uid != uid:
                continue
            for wf in w.workflows():
                meta = wf["metadata"]
                if (w.cluster.admitted_by_gate.get(meta["name"]) == uid and meta["uid"] not in w.cluster.ended
                        and not wf["spec"].get("shutdown") and not wf["spec"].get("suspend")
                        and not wf.get("status", {}).get("nodes") and run_of(wf) not in w.touched
                        and meta["labels"].get(LABEL_SERVICE) == s
                        and wf.get("status", {}).get("phase") not in FINISHED_PHASES):
                    assert meta["uid"] in record.admitted, (
                        f"{s}: {meta['name']} ({meta['labels'].get(LABEL_RUN_ID)}) runs on what the gate lent, "
                        f"uncounted: {wf.get('status')} {meta['labels']}\n{w.log.getvalue()[-1500:]}")


def _profile() -> settings:
    """CI: a fixed budget, derandomized (reproducible); `make campaign`: many more examples, randomized."""
    base: dict[str, Any] = {"deadline": None, "print_blob": True, "suppress_health_check": [HealthCheck.too_slow]}
    if os.environ.get("OFFHOURS_CAMPAIGN") == "long":
        return settings(max_examples=int(os.environ.get("OFFHOURS_CAMPAIGN_EXAMPLES", "2000")),
                        stateful_step_count=int(os.environ.get("OFFHOURS_CAMPAIGN_STEPS", "60")), **base)
    return settings(max_examples=60, stateful_step_count=40, derandomize=True, **base)


WholeCampaignInCI = WholeCampaign.TestCase
WholeCampaignInCI.settings = _profile()


# -- what the gate lowered is restored after a configuration edit that moves the service ------------------------
# A move to another Deployment is given back through the ledger of what the gate lowered, by object (gate/ledger.py).
# What the gate admitted is still found only in the configured workflow namespace: a move of that namespace leaves
# the job admitted under the old one running uncounted (a strict xfail: it turns red the day that is fixed).
RECORD_TIED_TO_CONFIG = ("issue 31 §5: the gate's admissions are read only in the configured workflow namespace; a job "
                         "admitted under the old one is neither counted nor stopped after the namespace changes")


def _lent_then_moved(move: str) -> World:
    """A world where the gate lent 3 of the faulty service's 8 replicas to a job, then the service moved."""
    w = World((CLEAN, FAULTY))
    w.cluster.add_workflow(NS, "code-job1", FAULTY, 3, created=0.0)
    w.submitted["code-job1"] = 3
    w.cluster.add_deployment(NS, "code-b", 6)
    w.source.demand = {CLEAN: 0.0, FAULTY: 0.0}
    for _ in range(6):
        w.tick()
    assert (w.lent(FAULTY), w.value(FAULTY)) == (3, 5), w.log.getvalue()
    if move == "to another Deployment":
        w.config = campaign_config((CLEAN, FAULTY), None, {FAULTY: {"deployment": "code-b"}})
    else:
        w.config = campaign_config((CLEAN, FAULTY), {"workflowNamespace": "elsewhere"})
    w.gate = w.new_gate()
    for _ in range(4):
        w.tick()
    return w


def test_a_service_moved_to_another_deployment_gives_the_old_one_back_what_it_lent() -> None:
    w = _lent_then_moved("to another Deployment")
    assert w.value(FAULTY) == 8, f"the old Deployment left at {w.value(FAULTY)} of its baseline 8"


@pytest.mark.xfail(strict=True, reason=RECORD_TIED_TO_CONFIG)
def test_a_service_given_another_workflow_namespace_still_counts_and_stops_what_it_admitted() -> None:
    w = _lent_then_moved("to another workflow namespace")
    wf = w.cluster.workflows[(NS, "code-job1")]
    assert w.value(FAULTY) + (3 if not wf["spec"].get("shutdown") else 0) <= 8, (
        f"serving back at {w.value(FAULTY)} while code-job1, admitted under the old namespace, still runs uncounted")


# -- named regressions: what the campaign's counterexamples were, one each ----------------------------------------

def _lent(replicas: int = 3) -> World:
    w = World((FAULTY,))
    w.cluster.add_workflow(NS, "code-job1", FAULTY, replicas, created=0.0)
    w.submitted["code-job1"] = replicas
    w.source.demand = {FAULTY: 0.0}
    for _ in range(6):
        w.tick()
    assert (w.lent(FAULTY), w.value(FAULTY)) == (replicas, 8 - replicas), w.log.getvalue()
    return w


def test_a_tenants_preempted_label_on_an_admitted_running_job_keeps_it_counted() -> None:
    # Found by the campaign (the model counted by the label): the gate's count is its record, so a tenant who labels
    # its admitted, running workflow `preempted` neither frees its replicas for another loan nor gets serving raised
    # over GPUs it still holds.
    w = _lent()
    uid = w.cluster.workflows[(NS, "code-job1")]["metadata"]["uid"]
    w.cluster.workflows[(NS, "code-job1")]["metadata"]["labels"]["offhours.io/state"] = "preempted"
    for _ in range(3):
        w.tick()
        assert (w.record(FAULTY).admitted or {}).get(uid) == 3 and w.value(FAULTY) == 5, w.log.getvalue()[-1200:]


def test_a_tenants_write_inside_a_tick_after_the_list_changes_nothing_the_tick_counted() -> None:
    # Found by the campaign: a tenant's `preempted` label written between the gate's list and its record write (the
    # tick judged the workflow as listed) left the admission recorded, and the next tick, which lists the label,
    # keeps it counted (the record, not the label, says what was lent).
    w = _lent()
    uid = w.cluster.workflows[(NS, "code-job1")]["metadata"]["uid"]
    listed = next(i for i, c in enumerate(w.cluster.calls) if c.startswith("list-workflows")) + 1

    def meddle() -> None:
        w.cluster.workflows[(NS, "code-job1")]["metadata"]["labels"]["offhours.io/state"] = "preempted"

    w.cluster.meddle_at = (listed, meddle)
    w.tick()
    w.tick()
    assert (w.record(FAULTY).admitted or {}).get(uid) == 3 and w.value(FAULTY) == 5, w.log.getvalue()[-1200:]
