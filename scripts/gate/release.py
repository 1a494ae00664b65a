"""What the gate took under an earlier configuration comes back, whatever the configuration says now.

A removed service's lend and admissions; every object in the gate's ledger (`gate.ledger`) that no
configured service names any more.
"""

from dataclasses import replace

from offhours.scripts.cluster.base import ScaleTarget
from offhours.scripts.gate import actuate
from offhours.scripts.gate.admissions import (
    NO_RUN,
    copy_tokens,
    counted_jobs,
    lineages_of,
    linked_uids,
    returned_by_record,
)
from offhours.scripts.gate.ledger import owned_by_tick
from offhours.scripts.gate.observe import describe
from offhours.scripts.gate.snapshot import Observed, writes_to
from offhours.scripts.gate.tick_state import GateParts, LeaseLost, ServiceOutcome, TickState
from offhours.scripts.names import (
    EVENT_SERVICE_RELEASED,
    state_configmap_name,
)
from offhours.scripts.policy.config import Capacity, ServicePolicy
from offhours.scripts.policy.ownership import Lent, decode_ledger, owed
from offhours.scripts.policy.plan import ADMITTED, PARKED
from offhours.scripts.policy.record import (
    MAX_COPIES,
    ServiceRecord,
    own_baseline,
    with_copies,
    with_lineages,
)

MAX_RETURNS_PER_TICK = 64  # stranded objects one tick gives back (the rest the next): API calls bounded by a flood
MAX_REFUSALS_NAMED = 5  # refused ledger entries named in a tick's one log line


def release_removed(gate: GateParts, t: TickState) -> None:
    """Give back what the gate lent of services no longer configured, then forget them (one Event each).

    The record is the gate's own memory of what it lent: whatever the configuration says now, a
    service it lent from gets its baseline back. A failure leaves the record for the next tick.
    """
    if t.dry_run:
        return
    ns, configured = gate.config.namespace, {p.name for p in gate.config.services}
    try:
        removed = [s for s in gate.cluster.state_services(ns) if s not in configured]
    except Exception as err:  # noqa: BLE001 - advisory for this tick: the next one lists them again
        if not gate.unlisted:  # once per process: a Role without the right would say it every tick
            gate.log.warning(f"could not list the gate's records (a service removed from the configuration "
                             f"gets back what was lent only when it can): {describe(err)}")
        gate.unlisted = True
        return
    for service in removed:
        try:
            release(gate, t, service)
        except LeaseLost:
            raise
        except Exception as err:  # noqa: BLE001 - that record's fault: kept for the next tick
            gate.log.error(f"could not give back what was lent of {service} (no longer configured): "
                           f"{describe(err)}", service)


def release(gate: GateParts, t: TickState, service: str) -> None:
    """Give back what was lent of one removed service, stop what runs of it, then forget its record."""
    ns, wf_ns = gate.config.namespace, gate.config.workflow_namespace
    text = gate.cluster.read_state(ns, service)
    record = ServiceRecord.from_json(text)
    dep = gate.cluster.find_deployment(ns, record.deployment or service)
    listed, _ = returned_by_record(gate.cluster.jobs(wf_ns, service), record, dep.uid if dep is not None else "")
    what = "nothing to give back"
    if dep is not None:
        scaler = gate.cluster.autoscaler(dep)
        note = gate.note_of(t, service)
        if note is not None:
            record = note.supersede(record, text, dep.uid, writes_to(scaler))
        obs = Observed(ServicePolicy(name=service, capacity=Capacity(), deployment=dep.text), dep, scaler, record,
                       [], [], text)
        # What the gate lent of this incarnation (by its record; by the marks if the record is unreadable).
        lent = sum(j.replicas for j in counted_jobs(listed, record, dep.uid) if j.state == ADMITTED)
        owned = own_baseline(record, dep.uid, obs.writes_to, obs.current, lent)
        if (entry := _ledger_entry(gate, dep.uid)) is not None:
            # Given back here, by both memories (the ledger's debt, bounded by this record), before the record is
            # forgotten: left to a later stranded return, the entry would outlive the record that bounds it.
            return_one(gate, t, entry, dep)
            text = gate.cluster.read_state(ns, service)
            record = ServiceRecord.from_json(text)  # as `return_one` settled it: what the stops below build on
            what = f"{obs.writes_to} given back by the gate's ledger (what it took of {dep.ref})"
        elif obs.current < owned.baseline:
            what = f"{obs.writes_to} restored from {obs.current} to its baseline {owned.baseline}"
            record = actuate.write_serving(gate, t, obs, owned.record, owned.baseline)  # as applied: what later writes build on
        elif lent:
            what = f"{obs.writes_to} already at {obs.current} (baseline {owned.baseline})"
    # Then whatever of it runs gives its GPUs back, as in any reclaim (parked again; stopped without a copy if its
    # status says its work is done): what the gate lent, and what runs without admission, which no tick of this
    # service stops any more. Whatever waits parked waits on. A failure keeps the record for the next tick.
    outcome, stopped = ServiceOutcome(service), []
    running = [j for j in listed if j.state != PARKED]
    lineages = lineages_of(record, listed)
    # The gate's own admissions last: the newest stops, which the record keeps (at most MAX_COPIES).
    if to_park := sorted((j for j in running if not j.finishing), key=lambda j: j.state == ADMITTED):
        # As a tick's stops: the copies are recorded (each with its token) before they are made, so a release
        # tried again after a failure knows the copies an earlier try (or an earlier reclaim) made: none twice.
        # A workflow with no run id (one running without admission need carry none) is recorded under
        # NO_RUN, which no run id is (a run id is a DNS label): unrecorded, it got no token, and each try
        # made it another copy. No lineage is ever NO_RUN's, so its copy joins none.
        linked = linked_uids(listed)
        record = replace(record, lineages=with_lineages(lineages, (), linked), copies=with_copies(
            record.copies, [(j.uid, j.run_id or NO_RUN) for j in to_park], linked, gate.now(), (), gate.token))
        actuate.fence(gate, t)
        gate.cluster.write_state(ns, service, record.to_json())
    tokens = copy_tokens(record.copies)
    deferred = []
    for job in running:
        if not job.finishing and job.uid and job.uid not in tokens and len(to_park) > MAX_COPIES:
            # Its stop did not fit in the record (a tenant's flood of workflows running without admission):
            # parked without a token, a try after a failure would copy it again. A later try parks it. Any
            # other stop the record could not keep (a run id it does not store) is made at once: stopping
            # what holds serving's GPUs comes before a copy made only once.
            deferred.append(job.name)
            continue
        actuate.fence(gate, t)
        if job.finishing:
            gate.cluster.stop(wf_ns, job)
            stopped.append(job.name)
        else:
            actuate.park_and_stop(gate, t, wf_ns, job, outcome, lineages.get(job.run_id or "", ()), tokens.get(job.uid, ""))
    if outcome.parked:
        what += f"; stopped and parked again {', '.join(outcome.parked)}"
    if stopped:
        what += f"; stopped {', '.join(stopped)}"
    if deferred:
        raise RuntimeError(f"{what}; {len(deferred)} more workflows than the record keeps the stops of, "
                           f"stopped by a later try ({', '.join(deferred[:5])}...)")
    actuate.fence(gate, t)
    gate.cluster.delete_state(ns, service)
    actuate.recorded(gate, t, service)
    message = f"service {service} is no longer in the gate configuration: {what}; the gate's record of it removed"
    gate.log.warning(message, service)
    kind, name = (dep.kind, dep.name) if dep is not None else ("ConfigMap", state_configmap_name(service))
    try:
        gate.cluster.record_event(ns, kind, name, EVENT_SERVICE_RELEASED, message, True)
    except Exception as err:  # noqa: BLE001 - an event is a record, not an action
        gate.log.warning(f"could not record event {EVENT_SERVICE_RELEASED}: {describe(err)}", service)


def _ledger_entry(gate: GateParts, uid: str) -> Lent | None:
    """Return the ledger's entry of this incarnation if it can give it back (`return_one` raises by it), else None.

    An entry it refuses (unreadable, a newer gate's version, another object's) gives nothing back: the record
    then does, as before the ledger, before the release forgets it.
    """
    entries, _ = decode_ledger({k: v for k, v in gate.cluster.ledger(gate.config.namespace).items() if k == uid})
    return entries.get(uid)


def adopt_unledgered(gate: GateParts, t: TickState, observed: list[Observed]) -> None:
    """Write into the ledger a lend an older gate recorded only in a service's record, before the record forgets it.

    An older gate kept what it lowered in the state record alone. When the service now names another
    object (another Deployment, a new incarnation), the tick starts that record afresh: first the lend it
    holds goes into the ledger, and the stranded return gives it back (in this tick).
    """
    if t.dry_run or t.reclaim_only:
        return
    ns = gate.config.namespace
    for obs in observed:
        rec = obs.record
        if (not rec.deployment_uid or rec.deployment_uid == obs.dep.uid or rec.writes_to != "replicas"
                or rec.baseline is None or rec.applied is None or rec.applied >= rec.baseline):
            continue
        try:
            if _ledger_entry(gate, rec.deployment_uid) is not None:  # one it refuses is written over: it gives nothing back
                continue
            entry = Lent(ns, rec.deployment or obs.policy.name, rec.deployment_uid, obs.policy.name, rec.baseline,
                         rec.applied, rec.applying_from if rec.applying_from is not None and
                         rec.applying_from <= rec.baseline else None)
            actuate.fence(gate, t)
            gate.cluster.write_ledger_entry(ns, rec.deployment_uid, entry.to_json())
            gate.log.info(f"adopted into the ledger: {entry.target} (uid {entry.uid}) owes baseline {entry.baseline}, "
                          f"lent by an earlier version of the gate", obs.policy.name)
        except LeaseLost:
            raise
        except Exception as err:  # noqa: BLE001 - the record still holds it: tried again next tick
            gate.log.error(f"could not adopt the earlier lend of {rec.deployment}: {describe(err)}", obs.policy.name)


def return_stranded(gate: GateParts, t: TickState, observed: list[Observed]) -> None:
    """Give back what the gate lowered of every object no configured service owns any more (serving first: a raise).

    Only raises, to `ownership.owed` (never above the recorded baseline), only the incarnation recorded (its
    UID). An object gone, or replaced by a new incarnation, owes nothing: its entry goes. A refused entry is
    left, named once a tick in the log: nothing is raised on its word.
    """
    if t.dry_run or t.reclaim_only:
        return
    ns = gate.config.namespace
    try:
        entries, refused = decode_ledger(gate.cluster.ledger(ns))
    except Exception as err:  # noqa: BLE001 - the next tick reads it again
        gate.log.error(f"the gate's ledger of what it lowered is unreadable: {describe(err)}")
        return
    if refused:  # one line a tick, however many: a flood of junk is not a flood of the log
        named = "; ".join(list(refused.values())[:MAX_REFUSALS_NAMED])
        more = f" (and {len(refused) - MAX_REFUSALS_NAMED} more)" if len(refused) > MAX_REFUSALS_NAMED else ""
        gate.log.error(f"{len(refused)} ledger entries refused: {named}{more}: nothing raised on its word "
                       f"(an operator must check the object)")
    targets = {obs.policy.name: (obs.dep.text, obs.dep.uid) for obs in observed}
    # An object a configured service now reads (renamed onto it): raised through the tick's own copy, so that
    # service's tick decides from the value given back, not from the one read before.
    read = {obs.dep.uid: obs.dep for obs in observed}
    stranded = [(uid, e) for uid, e in entries.items() if not owned_by_tick(gate, e, targets)]
    # Bounded a tick (each return is a few API calls): what a configured service reads now first (its tick
    # decides from it), then by UID; an object gone drops its entry, so a flood is worked through, never grows.
    stranded.sort(key=lambda item: (item[0] not in read, item[0]))
    if len(stranded) > MAX_RETURNS_PER_TICK:
        gate.log.warning(f"{len(stranded)} ledger entries to give back: {MAX_RETURNS_PER_TICK} this tick, the "
                         f"rest by the next ticks")
    for uid, entry in stranded[:MAX_RETURNS_PER_TICK]:
        try:
            return_one(gate, t, entry, read.get(uid))
        except LeaseLost:
            raise
        except Exception as err:  # noqa: BLE001 - that object's fault: its entry stays for the next tick
            gate.log.error(f"could not give back what was lent of {entry.target} (uid {uid}, lent for "
                           f"{entry.service}): {describe(err)}", entry.service)


def return_one(gate: GateParts, t: TickState, entry: Lent, dep: ScaleTarget | None = None) -> None:
    """Raise one stranded object to what it is owed, settle the old service's record on it, then drop the entry.

    What is owed is the ledger's (`ownership.owed`), bounded by the record of the service it was lent for where
    that record names this object: the record hears of raises the ledger does not (the backstop's, the gate's
    own whose settling failed), so the smaller of the two is never a raise given back twice. Where no record
    names it any more, by the entry's own baseline (an owner's raise while lent is then not added to it).
    """
    ns = gate.config.namespace
    if dep is None or dep.text != entry.target:
        dep = gate.cluster.find_deployment(ns, entry.target)
    if dep is None or dep.uid != entry.uid:
        actuate.fence(gate, t)
        gate.cluster.write_ledger_entry(ns, entry.uid, None)
        gate.log.info(f"{entry.target} (uid {entry.uid}) is gone (deleted, or made again as a new incarnation): "
                      f"nothing to give back", entry.service)
        return
    current = dep.replicas
    text = gate.cluster.read_state(ns, entry.service)
    record = ServiceRecord.from_json(text)
    note = gate.note_of(t, entry.service)  # the gate's own raise its record could not keep: its, not an owner's
    if note is not None:
        record = note.supersede(record, text, dep.uid, "replicas")
    value = owed(entry, current)
    if record.deployment_uid == dep.uid and record.writes_to == "replicas" and record.baseline is not None:
        value = min(value, max(current, own_baseline(record, dep.uid, "replicas", current, 0).baseline))
    else:
        # No record of it left (removed, or started afresh on another object) to tell the gate's own raise the
        # entry never heard of (its settling is best effort) from an owner's: never past the baseline it records.
        value = min(value, max(current, entry.baseline))
    if value > current:
        # The give-back written first, as the value applied (from `current`): a fault after the raise (the
        # record's write, the entry's removal) leaves an entry that owes nothing more, never the raise again.
        actuate.fence(gate, t)
        try:
            gate.cluster.write_ledger_entry(ns, entry.uid, replace(entry, baseline=value, applied=value,
                                                                   applying_from=current).to_json())
        except Exception as err:  # noqa: BLE001 - serving first: the raise goes ahead
            gate.log.warning(f"could not write the give-back of {dep.ref} into the ledger first: {describe(err)}",
                             entry.service)
        actuate.fence(gate, t)
        value = gate.cluster.raise_serving(dep, current, value).value
    if text is not None and record.deployment_uid in (dep.uid, ""):
        # Marked in the old service's record (no second raise from its release). An unreadable record (read as
        # none) would have the release measure a baseline from the marks on top: written as this object's.
        actuate.fence(gate, t)
        gate.cluster.write_state(ns, entry.service, replace(
            record, deployment_uid=dep.uid, writes_to="replicas", deployment=record.deployment or entry.target,
            baseline=value, applied=value, applying_from=None).to_json())
    actuate.fence(gate, t)
    gate.cluster.write_ledger_entry(ns, entry.uid, None)
    message = (f"{dep.ref} was lowered for service {entry.service}, which no longer names it: "
               f"given back from {current} to {value} (its baseline {entry.baseline})")
    gate.log.warning(message, entry.service)
    try:
        gate.cluster.record_event(ns, dep.kind, dep.name, EVENT_SERVICE_RELEASED, message, True)
    except Exception as err:  # noqa: BLE001 - an event is a record, not an action
        gate.log.warning(f"could not record event {EVENT_SERVICE_RELEASED}: {describe(err)}", entry.service)
