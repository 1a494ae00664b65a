"""The fail-safe: a service whose tick failed counts it; after enough in a row its whole baseline comes back."""

from dataclasses import replace
from functools import partial

from offhours.scripts.gate import actuate
from offhours.scripts.gate.admissions import (
    counted_jobs,
)
from offhours.scripts.gate.observe import describe
from offhours.scripts.gate.reconcile import REASON_CHARS
from offhours.scripts.gate.snapshot import Observed, writes_to
from offhours.scripts.gate.tick_state import GateParts, LeaseLost, ServiceOutcome, TickState, after_serving
from offhours.scripts.names import (
    EVENT_GATE_TICK_FAILED,
)
from offhours.scripts.policy.config import ServicePolicy
from offhours.scripts.policy.decide import ServiceState
from offhours.scripts.policy.plan import ADMITTED
from offhours.scripts.policy.record import (
    ServiceRecord,
    own_baseline,
)


def fail(gate: GateParts, t: TickState, policy: ServicePolicy, outcome: ServiceOutcome, error: str, now: float | None,
          obs: Observed | None = None, restore: bool = True) -> None:
    """Count a failed tick for one service; after enough in a row, restore its whole baseline (unless not `restore`).

    `now` None: no server time; the last decision keeps the time it was dated by.
    """
    outcome.error = error
    if t.dry_run or t.reclaim_only:  # a check is not a tick: the fail-safe counts the ticks' failures only
        return
    ns, name = gate.config.namespace, policy.scale_target.name  # hook: scale target
    record: ServiceRecord | None = None
    try:
        actuate.fence(gate, t)
        text = obs.stored_text if obs is not None else gate.cluster.read_state(ns, policy.name)
        record = t.written.get(policy.name, obs.record) if obs is not None else ServiceRecord.from_json(text)
        failed = record.decision.failed_ticks + 1
        record = replace(record, decision=ServiceState((), failed),
                         last_decision={"at": now if now is not None else record.last_decision.get("at"),
                                        "action": "failed", "reason": error[:REASON_CHARS]})
        if failed >= gate.config.failed_ticks_before_reclaim and record.baseline is not None and restore:
            # The fail-safe's raise is a serving write: now. Its record and Event wait like any other's.
            record, done = restore_baseline(gate, t, policy, record, obs, text)
            error += f"; {failed} failed ticks in a row: {done}"
            outcome.error = error
    except LeaseLost:
        raise
    except Exception as err:  # noqa: BLE001 - the record is best effort; the Event below still says why
        outcome.error = f"{error}; could not record the failed tick: {describe(err)}"
        record = None
    after_serving(t, partial(record_failure, gate, t, policy.name, name, record, outcome, error))


def record_failure(gate: GateParts, t: TickState, service: str, deployment: str, record: ServiceRecord | None,
                    outcome: ServiceOutcome, error: str) -> None:
    """Write a failed tick's record (if it was read) and its Event."""
    ns = gate.config.namespace
    if record is not None:
        try:
            actuate.fence(gate, t)
            gate.cluster.write_state(ns, service, record.to_json())
            actuate.recorded(gate, t, service)
        except LeaseLost:
            raise
        except Exception as err:  # noqa: BLE001 - the record is best effort; the Event below still says why
            outcome.error = f"{error}; could not record the failed tick: {describe(err)}"
    actuate.event_on(gate, service, ns, deployment, EVENT_GATE_TICK_FAILED, outcome.error or error, warning=True)


def restore_baseline(gate: GateParts, t: TickState, policy: ServicePolicy, record: ServiceRecord, obs: Observed | None,
                      stored_text: str | None) -> tuple[ServiceRecord, str]:
    """Put serving back at its whole baseline (the fail-safe), whatever else cannot be read; say what was done.

    Only ever a raise, and only to the current incarnation's baseline: the Deployment is read again
    right before the write (what the tick observed at its start may be stale: another service's
    fail-safe, an owner's change), and only the gate's own admissions of this incarnation count as lent.
    """
    assert record.baseline is not None
    dep = gate.cluster.deployment(gate.config.namespace, policy.name, policy.deployment)
    if record.deployment_uid and dep.uid and dep.uid != record.deployment_uid:
        return record, "the Deployment is a new one: nothing the gate lent is on it, nothing to restore"
    scaler = gate.cluster.autoscaler(dep)
    if record.writes_to and writes_to(scaler) != record.writes_to:
        # A new writer target (an HPA came or went): its baseline is learned by a tick that can
        # count the lent jobs, not by a fail-safe that could not read them.
        return record, f"the gate now writes {writes_to(scaler)}: nothing to restore until a tick learns its baseline"
    if obs is None:
        note = gate.note_of(t, policy.name)
        if note is not None:
            record = note.supersede(record, stored_text, dep.uid, writes_to(scaler))
    fresh = Observed(policy, dep, scaler, record, obs.jobs if obs is not None else [], [], stored_text)
    # What someone else set during the failed ticks is theirs: restore the adopted baseline, not the stored one.
    lent = sum(j.replicas for j in counted_jobs(fresh.jobs, record, dep.uid) if j.state == ADMITTED)
    owned = own_baseline(record, dep.uid, fresh.writes_to, fresh.current, lent)
    record = owned.record
    if fresh.current < owned.baseline:
        record = actuate.write_serving(gate, t, fresh, record, owned.baseline)
        return record, f"serving restored to its baseline {owned.baseline}"
    return record, f"serving already at {fresh.current} (its baseline is {owned.baseline})"
