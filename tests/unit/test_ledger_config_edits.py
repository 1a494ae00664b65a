"""What the gate took, it gives back, whatever the configuration says now (issue 31 §5).

Class: state tied to today's configuration. The gate's record of a lend is keyed by the service's name in
the current configuration, so a service renamed, moved to another scale target or removed stranded what was
lowered under the old one. Mechanism: the ledger (`policy.ownership`, `gate.ledger`): every lower is written
there first, keyed by the object's UID and naming the object; once a tick, before any other write, every
entry no configured service owns any more is raised back to its recorded baseline and dropped.

Invariants, checked after every configuration edit of a generated sequence (at any tick, while lent):
- no object is below its baseline without a ledger entry naming it (the ledger is complete);
- after the edit and one tick, every object the gate had lowered that no configured service names under the
  name it was lent for is back at exactly its baseline (never left low);
- no object is ever above its baseline (never more than was taken is given back);
- an object the gate never lowered and no service names is never written.
"""

from collections import defaultdict
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from offhours.scripts.cluster.base import ClusterError
from offhours.scripts.config.loader import parse_config
from offhours.scripts.gate.controller import Gate
from offhours.scripts.gate.release import MAX_RETURNS_PER_TICK
from offhours.scripts.policy.ownership import MAX_ENTRY_CHARS, Lent, decode_ledger

from .test_gate_controller import World

BASELINE = 8
TARGETS = ("chat", "chat-b")  # the Deployments the service chat may name; "decoy" is never named
EDITS = ("rename", "move", "workflow-namespace", "remove", "rename-and-move")


def gate_config(services: dict[str, str], workflow_namespace: str) -> Any:
    svc = {"capacity": {"requestsPerSecond": 10}, "headroom": 0.25, "stabilizationSeconds": 300, "maxLendStep": 8,
           "trend": False, "volatilityHeadroomMax": 0.0, "lendHysteresis": 0}
    return parse_config({
        "namespace": "serving", "workflowNamespace": workflow_namespace, "tickSeconds": 60,
        "metrics": {"source": "direct", "maxAgeSeconds": 180}, "failSafe": {"failedTicksBeforeReclaim": 3},
        "services": {name: {**svc, "deployment": target} for name, target in services.items()},
    })


class Edited(World):
    """The controller's world, with a second Deployment chat-b the service may move to and one it never names."""

    def __init__(self) -> None:
        super().__init__()
        for name in ("chat-b", "decoy"):
            self.cluster.add_deployment("serving", name, BASELINE, name=name)
        self.source.rps = defaultdict(lambda: 10.0, self.source.rps)
        self.services = {"chat": "chat", "code": "code"}
        self.workflow_namespace = "research"
        self.renames = 0

    def configure(self) -> None:
        self.gate = Gate(gate_config(self.services, self.workflow_namespace), self.cluster, self.source,
                         clock=lambda: self.now, out=self.log, monotonic=lambda: self.now)

    def edit(self, kind: str) -> None:
        """Edit every field that names chat's target: its name, its Deployment, the workflow namespace, or remove it."""
        name = next((n for n in self.services if n != "code"), None)
        if name is None:  # removed: it comes back under a new name, on chat
            self.renames += 1
            self.services[f"chat-{self.renames}"] = "chat"
        elif kind == "workflow-namespace":
            self.workflow_namespace = "research-2" if self.workflow_namespace == "research" else "research"
        elif kind == "remove":
            del self.services[name]
        else:
            target = self.services.pop(name)
            if kind in ("rename", "rename-and-move"):
                self.renames += 1
                name = f"chat-{self.renames}"
            if kind in ("move", "rename-and-move"):
                target = TARGETS[1 - TARGETS.index(target)]
            self.services[name] = target
        self.configure()

    def at(self, name: str) -> int:
        return self.cluster.deployments[("serving", name)].replicas

    def ledger(self) -> dict[str, tuple[str, str]]:
        good, bad = decode_ledger(self.cluster.ledgers.get("serving"))
        assert not bad, bad
        return {uid: (e.service, e.target) for uid, e in good.items()}

    def name_of(self, uid: str) -> str:
        return next(n for (_, n), d in self.cluster.deployments.items() if d.uid == uid)


def check_ledger_complete(w: Edited) -> None:
    lowered = {d.uid for d in w.cluster.deployments.values() if d.replicas < BASELINE}
    assert lowered <= set(w.ledger()), (lowered, w.ledger(), w.log.getvalue()[-3000:])


def check_never_above(w: Edited) -> None:
    assert all(d.replicas <= BASELINE for d in w.cluster.deployments.values()), w.cluster.deployments


@settings(derandomize=True, max_examples=12, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from(EDITS)), min_size=1, max_size=3))
def test_after_any_configuration_edit_what_was_lowered_comes_back_within_a_tick(plan: list[tuple[int, str]]) -> None:
    w = Edited()
    w.lend(2)  # chat at 4 of 8
    for ticks, kind in plan:
        for _ in range(ticks):
            w.tick()
            check_ledger_complete(w)
            check_never_above(w)
        before = w.ledger()
        w.edit(kind)
        w.tick()
        check_never_above(w)
        check_ledger_complete(w)
        for uid, (service, target) in before.items():
            if w.services.get(service) != target:  # no configured service owns it any more: given back, exactly
                assert w.at(w.name_of(uid)) == BASELINE, (kind, service, target, w.services, w.log.getvalue()[-3000:])
        assert w.at("decoy") == BASELINE and not any(c.startswith("scale decoy") for c in w.cluster.calls)


def test_a_lend_an_older_gate_recorded_only_in_its_record_comes_back_when_the_service_moves() -> None:
    """Upgrade mid-lend: the previous version kept the lend in the state ConfigMap alone (no ledger). The new gate
    finds the service moved to another Deployment, adopts the old record's lend into the ledger and gives it back."""
    w = Edited()
    w.lend(2)
    old_form = w.cluster.states[("serving", "chat")]
    w.cluster.ledgers.clear()  # as the previous version left it: the record alone
    assert '"baseline":8' in old_form and '"applied":4' in old_form
    w.services["chat"] = "chat-b"
    w.configure()
    w.tick()
    assert w.at("chat") == BASELINE, w.log.getvalue()[-3000:]
    assert "adopted into the ledger" in w.log.getvalue() and not w.ledger().get(w.cluster.deployments[("serving", "chat")].uid)


def test_a_lend_an_older_gate_recorded_only_in_its_record_comes_back_when_the_service_is_renamed() -> None:
    """Upgrade mid-lend, then a rename: the old name's record is read in its old form and the Deployment comes back."""
    w = Edited()
    w.lend(2)
    w.cluster.ledgers.clear()
    w.services = {"chat-renamed": "chat", "code": "code"}
    w.configure()
    w.tick()
    assert w.at("chat") == BASELINE, w.log.getvalue()[-3000:]
    check_never_above(w)


def test_an_entry_claiming_an_absurd_baseline_raises_nothing() -> None:
    """A tampered ledger (whoever may edit ConfigMaps in serving): refused with its reason, nothing raised on its word."""
    w = Edited()
    uid = w.cluster.deployments[("serving", "decoy")].uid
    w.cluster.ledgers["serving"] = {uid: '{"v":1,"namespace":"serving","target":"decoy","uid":"%s","service":"x",'
                                          '"baseline":1000000,"applied":0}' % uid}
    w.tick()
    assert w.at("decoy") == BASELINE and "baseline is 1000000" in w.log.getvalue()


def test_a_lower_whose_ledger_entry_was_never_settled_is_still_given_back_exactly() -> None:
    """Fault: every write that settles the ledger after a lower fails (the gate died between the lower and the
    settling). The entry written before the lower (with the value it lowered from) still names the object, and
    after a rename it comes back to exactly its baseline, not one replica more or less."""
    w = Edited()
    real = w.cluster.write_ledger_entry

    def settle_fails(namespace: str, uid: str, text: str | None) -> None:
        if text is None or "applyingFrom" not in text:
            raise RuntimeError("the gate died before this write")
        real(namespace, uid, text)

    w.cluster.write_ledger_entry = settle_fails  # type: ignore[method-assign]
    w.lend(2)
    check_ledger_complete(w)
    w.cluster.write_ledger_entry = real  # type: ignore[method-assign]
    w.services = {"chat-renamed": "chat", "code": "code"}
    w.configure()
    w.tick()
    assert w.at("chat") == BASELINE and not w.ledger(), w.log.getvalue()[-3000:]


def test_a_raise_the_ledger_did_not_hear_of_is_not_given_back_twice() -> None:
    """The gate stops ticking while lent; the backstop restores chat by its record (the ledger still says 4 of 8
    applied). Then chat is renamed: the ledger alone would read the backstop's raise as an owner's change and give
    back 4 more (12); bounded by the record, which heard of the raise, it stays at exactly 8."""
    from offhours.scripts.backstop.restore import run_backstop

    w = Edited()
    w.lend(2)
    w.now += 3600.0  # the lending lease long run out
    w.cluster.clock = w.now
    run_backstop(w.cluster, "serving", clock=lambda: w.now, out=w.log)
    assert w.at("chat") == BASELINE and w.ledger(), w.log.getvalue()[-3000:]
    w.services = {"chat-renamed": "chat", "code": "code"}
    w.configure()
    w.tick()
    assert w.at("chat") == BASELINE and not w.ledger(), w.log.getvalue()[-3000:]
    check_never_above(w)


def test_an_owners_scale_while_lent_is_kept_when_the_object_is_given_back() -> None:
    """Own only your delta: on-call adds one replica to chat while 4 are lent; chat is moved: 5 + the 4 taken = 9."""
    w = Edited()
    w.lend(2)
    w.cluster.deployments[("serving", "chat")].replicas = 5
    w.services["chat"] = "chat-b"
    w.configure()
    w.tick()
    assert w.at("chat") == BASELINE + 1 and not w.ledger().get(w.cluster.deployments[("serving", "chat")].uid)


@settings(derandomize=True, max_examples=6, deadline=None)
@given(st.integers(0, 6000), st.sampled_from(("malformed", "stranded-gone", "oversized")))
def test_a_flooded_ledger_never_hides_a_real_entry_and_the_work_per_tick_stays_bounded(junk: int, kind: str) -> None:
    """Class: one bad part of a shared record stops the whole. A ledger flooded with junk entries (past the 2048
    an earlier decoder refused the ledger whole for, or not) must not stop what a renamed service lent from coming
    back, and the API calls a tick makes for the ledger, and its log lines, stay bounded whatever the flood."""
    w = Edited()
    w.lend(2)
    flood = {
        "malformed": lambda i: "{}",
        "stranded-gone": lambda i: Lent("serving", f"gone-{i}", f"junk-{i}", "x", 8, 4).to_json(),
        "oversized": lambda i: "x" * (MAX_ENTRY_CHARS + 1),
    }[kind]
    w.cluster.ledgers["serving"].update({f"junk-{i}": flood(i) for i in range(junk)})
    w.services = {"chat-renamed": "chat", "code": "code"}
    w.configure()
    for _ in range(1 + junk // MAX_RETURNS_PER_TICK):
        before = len(w.cluster.calls)
        w.tick()
        assert len(w.cluster.calls) - before <= 4 * MAX_RETURNS_PER_TICK + 200, len(w.cluster.calls) - before
    assert w.at("chat") == BASELINE, w.log.getvalue()[-3000:]
    assert w.log.getvalue().count("nothing raised on its word") <= 1 + junk // MAX_RETURNS_PER_TICK


def test_a_ledger_past_2048_entries_still_gives_back_a_renamed_services_lend() -> None:
    """Counterexample kept: 2049 malformed entries made the decoder refuse the ledger whole, and chat stayed at 4."""
    w = Edited()
    w.lend(2)
    w.cluster.ledgers["serving"].update({f"junk-{i}": "{}" for i in range(2049)})
    w.services = {"chat-renamed": "chat", "code": "code"}
    w.configure()
    w.tick()
    assert w.at("chat") == BASELINE, w.log.getvalue()[-3000:]


@pytest.mark.xfail(strict=True, reason="a workflow namespace changed while lent: the service's tick reads its admissions "
                   "in the new namespace only; the record does not name the namespace it admitted into, so the old "
                   "namespace's admitted workflows are never stopped and its GPU quota never lowered (see the report)")
def test_a_workflow_namespace_changed_while_lent_stops_what_was_admitted_before_serving_counts_it_back() -> None:
    """Class: state tied to today's configuration (the lend's admissions, by the configured workflow namespace).
    chat lends 4 of 8 to two workflows in research; the configuration moves research to research-2. The next tick
    raises chat to 8, and the two admitted workflows run on in research, holding the GPUs chat's 4 replicas need
    (serving short on a full pool), with research's GPU quota still 16: nothing of the gate ever stops them."""
    w = Edited()
    w.lend(2)
    w.workflow_namespace = "research-2"
    w.configure()
    for _ in range(3):
        w.tick()
        running = sum(2 for (ns, _), wf in w.cluster.workflows.items()
                      if ns == "research" and wf["metadata"]["labels"].get("offhours.io/state") == "admitted")
        assert w.at("chat") + running <= BASELINE, (w.at("chat"), running, w.log.getvalue()[-2000:])
    assert not w.cluster.gpu_quotas.get("research"), w.cluster.gpu_quotas


@settings(derandomize=True, max_examples=8, deadline=None)
@given(st.sampled_from(("{", '{"v":2}', "x" * (MAX_ENTRY_CHARS + 1), '{"v":1,"uid":"other"}')),
       st.sampled_from(("remove", "move", "rename")))
@example("{", "move")
def test_a_services_lend_comes_back_when_its_ledger_entry_is_unreadable(text: str, edit: str) -> None:
    """Class: two memories of one debt, each deferring to the other. A removed service's release left the raise to
    the ledger whenever the object's UID was a key there, readable or not; the stranded return refuses an entry it
    cannot read. An entry a newer gate wrote (a rollback), or a hand edit: neither gave chat back, and the release
    then removed the record, the debt's last memory. Only an entry the ledger can give back defers the release.
    So too a move: the adoption of the record's lend into the ledger was skipped for an unreadable entry, and the
    service's tick started its record afresh on the new Deployment."""
    w = Edited()
    w.lend(2)
    uid = w.cluster.deployments[("serving", "chat")].uid
    w.cluster.ledgers["serving"][uid] = text
    w.edit(edit)
    w.tick()
    assert w.at("chat") == BASELINE, w.log.getvalue()[-3000:]
    check_never_above(w)


@settings(derandomize=True, max_examples=6, deadline=None)
@given(st.sampled_from(("rename", "remove", "move")))
def test_a_raise_neither_the_record_nor_the_ledger_heard_of_is_not_given_back_twice(edit: str) -> None:
    """Class: a bound read from one memory while the gate's own memory of its last write lives in a third.
    A reclaim raises chat 4 -> 8, and every write after it fails (the record's, the ledger's settling): the gate
    keeps that raise as an unrecorded write (in the process, noted on the Lease), which each service's tick reads.
    The stranded return bounded the ledger only by the stored record (applied 4): both read 8 as an owner's raise
    of 4, and gave 4 more: 12 of a baseline of 8."""
    w = Edited()
    w.lend(2)
    w.cluster.fail_next["write-state"] = [ClusterError("HTTP 500")] * 50
    w.cluster.fail_next["write-ledger"] = [ClusterError("HTTP 500")] * 50
    w.tick(chat=1000.0)
    assert w.at("chat") == BASELINE, w.log.getvalue()[-2000:]
    w.cluster.fail_next.clear()
    w.edit(edit)
    w.tick(chat=10.0)
    assert w.at("chat") == BASELINE, w.log.getvalue()[-3000:]
    check_never_above(w)


def test_a_stale_entry_outliving_the_record_that_bounds_it_gives_back_nothing_twice() -> None:
    """Class: a debt kept in one memory while the memory that bounds it is forgotten. A reclaim raises chat to 8 and
    the ledger's settling fails (best effort): its entry still says 4 applied, the record 8. chat is removed; the
    stranded return's read of the record fails once, so the entry stays; the release left the raise to the ledger
    and removed the record. The next tick's stranded return, with no record to bound it, read 8 as an owner's raise
    and gave 4 more (12 of 8). The release now gives back by both memories itself before it forgets the record."""
    w = Edited()
    w.lend(2)
    w.cluster.fail_next["write-ledger"] = [ClusterError("HTTP 500")] * 50
    w.tick(chat=1000.0)
    w.cluster.fail_next.clear()
    assert w.at("chat") == BASELINE and '"applied":4' in next(iter(w.cluster.ledgers["serving"].values()))
    del w.services["chat"]
    w.configure()
    w.cluster.fail_next["read-state chat"] = [ClusterError("HTTP 500")]
    for _ in range(3):
        w.tick(chat=10.0)
        check_never_above(w)
    assert w.at("chat") == BASELINE and not w.ledger(), w.log.getvalue()[-3000:]


@settings(derandomize=True, max_examples=8, deadline=None)
@given(st.sampled_from(("move", "rename-and-move", "remove", "rename")), st.integers(1, 2))
def test_a_stale_entry_whose_record_is_gone_never_gives_back_past_its_baseline(edit: str, failures: int) -> None:
    """Class: a debt kept in one memory while the memory that bounds it is forgotten. A reclaim raises chat to 8
    and the ledger's settling fails (best effort): the entry still says 4 applied. chat is moved; the stranded
    return fails (its read of the object), and the service's own tick starts its record afresh on chat-b: the next
    return has no record of chat to tell the gate's own raise from an owner's, read 8 as an owner's raise of 4 and
    gave 4 more (12 of 8). With no record naming the object, the ledger never gives back past its baseline."""
    w = Edited()
    w.lend(2)
    w.cluster.fail_next["write-ledger"] = [ClusterError("HTTP 500")] * 50
    w.tick(chat=1000.0)
    w.cluster.fail_next.clear()
    w.edit(edit)
    w.cluster.fail_next["find-deployment chat"] = [ClusterError("HTTP 500")] * failures
    w.cluster.fail_next["read-state chat"] = [ClusterError("HTTP 500")] * failures
    for _ in range(2 + failures):
        w.tick(chat=10.0)
        check_never_above(w)
    assert w.at("chat") == BASELINE, w.log.getvalue()[-3000:]
