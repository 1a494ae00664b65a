"""Lending is a lease: when no gate tick renews it, the backstop gives serving its baseline back without the gate.

Each test plays a way the gate can be gone (ticks stop: a suspended CronWorkflow, Argo down, a
crash-looping image) or a way the backstop could do harm (a recreated Deployment, a human's change,
a live gate, a broken record), on the in-memory cluster with the real gate and the real backstop pass.
"""

import io

import pytest

from offhours.scripts.backstop.manifests import backstop_manifests, backstop_rules
from offhours.scripts.backstop.restore import run_backstop
from offhours.scripts.cluster.base import Autoscaler, ClusterError
from offhours.scripts.config.loader import parse_config
from offhours.scripts.policy.config import ConfigError
from offhours.scripts.policy.lease import expired, restore
from offhours.scripts.policy.record import ServiceRecord

from .test_gate_controller import TICK, World, config

LEASE = 3 * TICK + 120.0  # the default: 3 ticks, plus the pause between two gate runs


def backstop(w: World, after: float) -> list:  # type: ignore[type-arg]
    """Run one backstop pass `after` seconds past the world's last tick, the gate silent meanwhile."""
    w.cluster.clock = w.now + after
    out = io.StringIO()
    done = run_backstop(w.cluster, "serving", clock=lambda: w.now + after, out=out, holder="backstop/test")
    w.backstop_log = out.getvalue()  # type: ignore[attr-defined]
    return done


def test_every_tick_renews_the_lease_in_the_record_with_the_deployment_name() -> None:
    w = World()
    w.lend(2)
    rec = w.record()
    assert rec.renewed_at == w.now and rec.lease_seconds == LEASE and rec.deployment == "chat"
    assert ServiceRecord.from_json(rec.to_json()) == rec


def test_the_gate_gone_for_the_lease_bound_serving_gets_its_baseline_back() -> None:
    """Fault: the gate stops ticking while 4 of 8 replicas are lent (its CronWorkflow suspended, Argo down)."""
    w = World()
    w.lend(2)
    assert w.replicas() == 4
    assert backstop(w, LEASE - 1) == [] and w.replicas() == 4  # still within the lease: nothing is touched
    done = backstop(w, LEASE + 1)
    assert [(d.service, d.value) for d in done] == [("chat", 8)] and w.replicas() == 8
    assert w.replicas("code") == 8
    rec = w.record()
    assert rec.baseline == 8 and rec.applied == 8 and rec.applying_from is None
    events = [e for e in w.cluster.events if e.reason == "LendingExpired"]
    assert len(events) == 1 and events[0].warning and "raised from 4 to the baseline 8" in events[0].message
    assert w.cluster.lease_holder is None  # the pass gave the Lease back
    assert backstop(w, LEASE + 61) == []  # the next pass finds nothing to raise


def test_the_gate_coming_back_does_not_take_the_backstops_raise_for_someone_elses() -> None:
    """Fault: the gate returns after the backstop restored: the baseline must not grow by what had been lent."""
    w = World()
    w.lend(2)
    backstop(w, LEASE + 1)
    w.now += LEASE + 1
    out = w.tick(chat=150.0)["chat"]  # load needs every replica: the jobs still marked admitted are stopped
    assert out.baseline == 8 and w.replicas() == 8 and w.record().baseline == 8, w.log.getvalue()
    assert out.adopted is None


def test_a_deployment_recreated_since_lending_is_not_restored_to_a_stale_baseline() -> None:
    """Fault: chat is deleted and created again at 3 replicas while the gate is gone; its old record says baseline 8."""
    w = World()
    w.lend(2)
    del w.cluster.deployments[("serving", "chat")]
    w.cluster.add_deployment("serving", "chat", 3)
    assert backstop(w, LEASE + 1) == [] and w.replicas() == 3


def test_a_human_change_while_the_gate_is_gone_is_kept_and_serving_never_lowered() -> None:
    """Fault: on-call scales chat by hand while the gate is gone (up by 6, or down by 2): their delta is kept."""
    w = World()
    w.lend(2)
    w.cluster.deployments[("serving", "chat")].replicas = 10  # 6 more than the gate applied: on top of the baseline
    assert [(d.service, d.value) for d in backstop(w, LEASE + 1)] == [("chat", 14)] and w.replicas() == 14
    w2 = World()
    w2.lend(2)
    w2.cluster.deployments[("serving", "chat")].replicas = 2  # 2 fewer than the gate applied: theirs to keep
    assert [(d.service, d.value) for d in backstop(w2, LEASE + 1)] == [("chat", 6)] and w2.replicas() == 6
    # A value above what the baseline comes to is never lowered (here: the gate's own raise to 12 in flight).
    rec = ServiceRecord(deployment_uid="u", writes_to="replicas", baseline=8, applied=4, applying_from=12,
                        renewed_at=0.0, lease_seconds=10)
    assert restore(rec, 11.0, "u", "replicas", 12) is None


def test_with_an_autoscaler_the_backstop_raises_its_max_replicas() -> None:
    w = World()
    scaler = Autoscaler("HorizontalPodAutoscaler", "serving", "chat", 1, 8)
    w.cluster.autoscalers[("serving", "chat")] = scaler
    for i in range(2):
        w.park(f"job-{i}", replicas=2)
    for _ in range(7):
        w.tick()
    assert scaler.max_replicas == 4, w.log.getvalue()  # the gate lends by capping maxReplicas
    backstop(w, LEASE + 1)
    assert scaler.max_replicas == 8


def test_a_live_gate_holding_the_lease_is_not_raced_but_cannot_block_the_backstop_for_ever() -> None:
    """Fault: the Lease is held (a gate mid-tick, or one killed holding it): wait one more lease, then restore anyway."""
    w = World()
    w.lend(2)
    w.cluster.lease_holder, w.cluster.lease_until = "gate/other", w.now + 10 * LEASE
    assert backstop(w, LEASE + 1) == [] and w.replicas() == 4  # a holder may be ticking: leave it its lease
    assert "another holder has the offhours lease" in w.backstop_log  # type: ignore[attr-defined]
    assert backstop(w, 2 * LEASE + 1)[0].value == 8 and w.replicas() == 8  # no one has renewed it for two leases
    assert w.cluster.lease_holder == "gate/other"  # a Lease it never held is not released


def test_an_unreadable_lease_is_one_not_held() -> None:
    """Fault: reading the Lease fails (an API error): the pass still runs, with the wider bound."""
    w = World()
    w.lend(2)
    w.cluster.fail_next["acquire-lease"] = [ClusterError("read lease: HTTP 500"), ClusterError("read lease: HTTP 500")]
    assert backstop(w, LEASE + 1) == []
    assert backstop(w, 2 * LEASE + 1)[0].value == 8


def test_one_services_fault_never_stops_anothers_restore() -> None:
    """Fault: chat's Deployment cannot be read; code's expired lending is restored anyway, chat's failure is named."""
    w = World()
    w.park("c-0", svc="code", replicas=2)
    w.lend(2)
    assert w.replicas("code") == 6
    w.cluster.fail_next["get-deployment chat"] = [ClusterError("get deployment serving/chat: HTTP 500")]
    done = {d.service: d for d in backstop(w, LEASE + 1)}
    assert done["chat"].error and "HTTP 500" in done["chat"].message
    assert done["code"].value == 8 and w.replicas("code") == 8 and w.replicas("chat") == 4
    assert "level=error service=chat" in w.backstop_log  # type: ignore[attr-defined]


def test_an_unwritable_record_does_not_hold_back_the_raise() -> None:
    """Fault: the state ConfigMap rejects the backstop's intent (serving first: the raise goes ahead)."""
    w = World()
    w.lend(2)
    w.cluster.fail_next["write-state"] = [ClusterError("write configmap: HTTP 500")]
    done = backstop(w, LEASE + 1)
    assert w.replicas() == 8 and "could not be written first" in done[0].message


def test_a_tampered_lease_in_the_record_is_no_lease() -> None:
    """Fault: someone writes renewedAt as text or infinity: the record is refused whole (never steers a write)."""
    rec = ServiceRecord(deployment_uid="u", writes_to="replicas", baseline=8, applied=4, renewed_at=0.0, lease_seconds=10)
    for bad in ('"renewedAt":"0"', '"renewedAt":true', '"leaseSeconds":Infinity'):
        text = rec.to_json().replace('"renewedAt":0.0', bad).replace('"leaseSeconds":10', bad)
        assert ServiceRecord.from_json(text) == ServiceRecord()
    assert not expired(ServiceRecord(baseline=8, applied=4), 1e12)  # an old record without a lease: nothing to expire
    assert restore(rec, 11.0, "u", "replicas", 4) is not None and restore(rec, 9.0, "u", "replicas", 4) is None
    assert restore(rec, 11.0, "u", "HorizontalPodAutoscaler/chat", 4) is None  # another writer target


def test_the_lease_bound_is_configurable_and_validated() -> None:
    raw = {"namespace": "serving", "workflowNamespace": "research", "tickSeconds": 60,
           "metrics": {"source": "direct"}, "services": {"chat": {"capacity": {"requestsPerSecond": 1}}}}
    assert parse_config(raw).lease_ticks == 3
    assert parse_config({**raw, "failSafe": {"leaseTicks": 5}}).lease_ticks == 5
    for bad in (0, 101, "3", 2.5):
        with pytest.raises(ConfigError, match="failSafe.leaseTicks"):
            parse_config({**raw, "failSafe": {"leaseTicks": bad}})


def test_the_backstop_account_can_only_read_records_and_raise_serving() -> None:
    cfg = config()
    rules = backstop_rules(cfg)
    writes = {(g, r) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]
              if set(rule["verbs"]) & {"create", "update", "patch", "delete"}}
    assert writes == {("", "configmaps"), ("apps", "deployments/scale"), ("autoscaling", "horizontalpodautoscalers"),
                      ("keda.sh", "scaledobjects"), ("coordination.k8s.io", "leases"), ("", "events")}
    scale = next(r for r in rules if r["resources"] == ["deployments/scale"])
    assert scale["resourceNames"] == ["chat", "code"]
    assert not any("delete" in r["verbs"] or "*" in r["verbs"] for r in rules)
    docs = backstop_manifests(cfg)
    job = docs["cronjob-offhours-backstop.yaml"]
    assert job["apiVersion"] == "batch/v1" and job["spec"]["concurrencyPolicy"] == "Forbid"
    pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "offhours-backstop" and pod["containers"][0]["command"] == ["offhours", "backstop"]


def test_the_gates_unrecorded_raise_is_not_taken_for_someone_elses_by_the_backstop() -> None:
    """Fault: the backstop ignored the gate's note of a raise it could not record, and added the lent replicas again."""
    w = World()
    w.lend(2)  # baseline 8, 4 lent, chat at 4
    w.cluster.fail_next["write-state chat"] = [ClusterError("write configmap: HTTP 500") for _ in range(10)]
    w.tick(chat=150.0)  # a reclaim: serving first, chat raised to 8 though no record of it could be written
    assert w.replicas() == 8 and w.record().applied == 4  # the stored record still says the gate applied 4
    assert any(k.endswith("chat") for k in w.cluster.lease_annotations), w.log.getvalue()
    w.cluster.fail_next.clear()
    backstop(w, LEASE + 1)  # the gate is gone now: its lease on the lending runs out
    assert w.replicas() == 8, "the baseline is 8: 8 is the gate's own raise, not someone else's scale-up"
    w.now += LEASE + 1
    out = w.tick(chat=150.0)["chat"]
    assert out.baseline == 8 and w.replicas() == 8, w.log.getvalue()
