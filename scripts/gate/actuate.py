"""Actuate: the gate's writes, each fenced by the Lease, each isolated to its object.

A tick writes in phases (scripts/gate/controller.py drives them, `PHASES`): every service's serving write
first (a reclaim's raise, which nothing delays), then each service's lower and record, then the research
side (stops, admissions, deletions) and advisory writes (waiting reasons, within a budget a tick). A write
that fails is that object's fault: it is reported, and the next object's write goes ahead.
"""

from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import replace
from functools import partial
from typing import Any

from offhours.scripts.cluster.base import Deployment, ParkedCopy
from offhours.scripts.cluster.scale_target import writer_of  # hook: scale target
from offhours.scripts.cluster.workflow import CancelledWorkflow
from offhours.scripts.gate import ledger  # hook: ledger
from offhours.scripts.gate.admissions import (
    copy_tokens,
)
from offhours.scripts.gate.observe import describe
from offhours.scripts.gate.placement import mark_removals, unmark_removals  # hook: placement
from offhours.scripts.gate.reconcile import changed_waiting, tick_event, waiting_annotations
from offhours.scripts.gate.snapshot import Observed
from offhours.scripts.gate.tick_state import GateParts, LeaseLost, ServiceOutcome, ServingChanged, TickState, after_serving
from offhours.scripts.names import (
    AGGREGATED_EVENT_REASONS,
    EVENT_RUN_ID_MISMATCH,
)
from offhours.scripts.policy.decide import Decision
from offhours.scripts.policy.plan import ADMITTED, Job, Plan, rotate_stops
from offhours.scripts.policy.record import (
    ServiceRecord,
    UnrecordedWrite,
    fingerprint,
    with_lineages,
)

# The phases of a tick's writes, in order: each phase runs for every service before the next begins.
PHASES = ("serving", "record", "research")


def run_phases(acting: dict[str, tuple[Observed, Iterator[None]]], turn: int, fault: Callable[[Observed, str], None],
               lost: Callable[[LeaseLost, Collection[str]], None], after: Callable[[str], None]) -> None:
    """Run each service's steps phase by phase: one phase of every service before the next phase of any.

    `acting`: each service's steps, one `yield` between two phases. A service's fault is that service's
    (`fault`), the others go on; a lost Lease stops every write (`lost` names those not acted on). `after`
    runs once a phase is done for all (the serving phase: the failed services' held records, the quota).
    The research phase starts at service `turn` (modulo their number): no service's advisory writes wait
    behind another's for ever.
    """
    for phase in PHASES:
        order = list(acting.items())
        if phase == "research" and order:
            start = turn % len(order)
            order = order[start:] + order[:start]
        for name, (obs, steps) in order:
            try:
                next(steps)
            except StopIteration:
                del acting[name]
            except LeaseLost as err:
                lost(err, list(acting))
                acting.clear()
                break
            except Exception as err:  # noqa: BLE001 - any fault of one service is that service's failed tick
                del acting[name]
                fault(obs, describe(err))
        after(phase)


def lease_note(gate: GateParts, t: TickState, service: str) -> UnrecordedWrite | None:
    """Return this service's note on the Lease (a raise another gate process wrote without its record), if any."""
    if t.lease_notes is None:
        try:
            t.lease_notes = gate.cluster.lease_notes(gate.config.namespace)
        except Exception as err:  # noqa: BLE001 - unreadable: the stored record alone (a raise then reads as an owner's: the safe side)
            gate.log.warning(f"the lease's notes are unreadable: {describe(err)}")
            t.lease_notes = {}
    return UnrecordedWrite.from_json(t.lease_notes.get(service))


def recorded(gate: GateParts, t: TickState, name: str) -> None:
    """Remove the note of an unrecorded raise once the record is written (best effort: a stale note is ignored)."""
    if gate.unrecorded.pop(name, None) is None and name not in (t.lease_notes or {}):
        return
    (t.lease_notes or {}).pop(name, None)
    try:
        gate.cluster.note_on_lease(gate.config.namespace, gate.holder, name, None)
    except Exception as err:  # noqa: BLE001 - a stale note is ignored anyway (it names the record it superseded)
        gate.log.warning(f"could not remove the lease's note for {name}: {describe(err)}", name)


def write_serving(gate: GateParts, t: TickState, obs: Observed, record: ServiceRecord, value: int) -> ServiceRecord:
    """Write replicas (or the autoscaler's maxReplicas) if they differ; record the intent first.

    Conditional on what this tick read (`obs.current`): a lower writes only if serving still holds it, else
    raises `ServingChanged` with nothing written; a raise makes serving max(what it holds, value) at once.
    """
    if value == obs.current:
        return record
    read = obs.current
    intent = replace(record, applied=value, applying_from=read)
    fence(gate, t)
    try:
        gate.cluster.write_state(gate.config.namespace, obs.policy.name, intent.to_json())
    except Exception:
        if value < obs.current:
            raise  # no lending without the record of it
        note_unrecorded(gate, obs, intent)  # a raise for serving goes ahead anyway, noted as the gate's own
    t.written[obs.policy.name] = intent  # what a failure later in this tick records (not the record as read)
    fence(gate, t)
    target = obs.scaler if obs.scaler is not None else obs.dep
    ledgered = obs.scaler is None and intent.baseline is not None  # hook: ledger (what is owed, by object)
    if ledgered and value < read:  # hook: ledger: written before the lower, as the record is
        assert intent.baseline is not None
        ledger.before_lower(gate, obs, intent.baseline, read, value)
        fence(gate, t)
    if value < read:
        marked = mark_removals(gate.cluster, obs.dep, read - value, gate.config.workflow_namespace)  # hook: placement
        if marked:  # hook: placement
            gate.log.info(marked, obs.policy.name)  # hook: placement
        try:
            answer = gate.cluster.lower_serving(target, read, value)  # leaves `target` (obs.current) at the answer
        except Exception:
            unmark(gate, obs, marked)  # hook: placement
            raise
        if answer.conflict:
            unmark(gate, obs, marked)  # hook: placement
            if ledgered:  # hook: ledger: nothing was lowered
                ledger.after_write(gate, obs, intent.baseline, read)
            found = t.written[obs.policy.name] = replace(intent, applied=read, applying_from=None)  # unwritten
            raise ServingChanged(f"{obs.writes_to} set to {answer.value} by {writer_of(obs.dep)} after the gate read "
                                 f"{read} (its lower to {value} not written)", found)
    elif (raised := gate.cluster.raise_serving(target, read, value).value) != value:
        # Another writer raised it past `value` meanwhile: the gate wrote nothing, and adopts that value as
        # theirs (measured from what it read) at its next read.
        if ledgered:  # hook: ledger: bookkeeping waits for every service's raise
            after_serving(t, partial(ledger.after_write, gate, obs, intent.baseline, raised))
        t.written[obs.policy.name] = replace(intent, applied=read, applying_from=None)
        return t.written[obs.policy.name]
    if ledgered:  # hook: ledger: at its baseline the entry goes; below it, the value applied (a raise's, after
        # every service's raise: bookkeeping never stands between one service's raise and another's)
        settle = partial(ledger.after_write, gate, obs, intent.baseline, value)
        if value < read:
            settle()
        else:
            after_serving(t, settle)
    t.written[obs.policy.name] = replace(intent, applying_from=None)
    return t.written[obs.policy.name]


def unmark(gate: GateParts, obs: Observed, marked: str) -> None:  # hook: placement
    """Take a lower's marks off serving's replicas when the lower did not land: no later scale-down follows them."""
    if marked.startswith("marked"):
        said = unmark_removals(gate.cluster, obs.dep)
        if said:
            gate.log.info(said, obs.policy.name)


def note_unrecorded(gate: GateParts, obs: Observed, intent: ServiceRecord) -> None:
    """Remember a raise written without its record, in this process and on the Lease (the next tick reads it as the gate's)."""
    assert intent.baseline is not None and intent.applied is not None and intent.applying_from is not None
    note = UnrecordedWrite(obs.dep.uid, obs.writes_to, intent.baseline, intent.applied, intent.applying_from,
                           fingerprint(obs.stored_text))
    gate.unrecorded[obs.policy.name] = note
    try:
        gate.cluster.note_on_lease(gate.config.namespace, gate.holder, obs.policy.name, note.to_json())
    except Exception as err:  # noqa: BLE001 - this process still knows; the next one reads the raise as an owner's (the safe side)
        gate.log.warning(f"could not note the unrecorded raise of {obs.policy.name} on the lease: {describe(err)}",
                         obs.policy.name)


def research_side(gate: GateParts, t: TickState, obs: Observed, decision: Decision, p: Plan, outcome: ServiceOutcome,
                   record: ServiceRecord | None = None) -> None:
    """Park, stop, admit, delete, annotate: each job on its own; one failure never undoes serving's writes.

    `record` is the one this tick wrote: a stop's copy carries the token recorded for it there, and a copy
    found already made is the gate's only if its UID is in the stopped run's lineage.
    """
    wf_ns, uid, errors = gate.config.workflow_namespace, obs.dep.uid, []
    lineages = dict(record.lineages or ()) if record is not None else {}
    tokens = copy_tokens(record.copies if record is not None else ())
    made: dict[str, ParkedCopy] = {}  # stopped job's name -> its copy
    steps: list[tuple[str, Callable[[], Any], Job | None]] = []
    # The stops of what the gate admitted are as many as its admissions: all of them, first. Any other stop (a
    # workflow running without admission, a duplicate of a run, a cancelled one) is a tenant's to multiply: at
    # most `research_writes_per_tick` of them a tick, all services together; the rest are stopped by later ticks
    # (the plan finds them again, their copies' tokens already recorded).
    own = [j for j in p.stop if j.state == ADMITTED]
    # Stops with a copy (turned each tick by the plan: `rotate_stops`) and without one (turned here) take turns
    # at the front, so neither kind's always-failing ones shield the other kind for ever.
    parks = [(j, True) for j in p.stop if j.state != ADMITTED]
    cancels = [(j, False) for j in rotate_stops(p.cancel, t.turn, gate.research_writes_per_tick)]
    others = parks + cancels if t.turn % 2 == 0 else cancels + parks
    budget = max(0, gate.research_writes_per_tick - t.research_writes)
    if len(others) > budget:
        gate.log.info(f"{len(others) - budget} stop(s) of workflows the gate did not admit left for a later tick "
                      f"(research writes: {gate.research_writes_per_tick} a tick)", obs.policy.name)
    t.research_writes += min(len(others), budget)
    stop_now = [*((j, True) for j in own), *others[:budget]]
    steps += [(f"stop {j.name}", partial(park_and_stop, gate, t, wf_ns, j, outcome,
                                         lineages.get(j.run_id or "", ()), tokens.get(j.uid, ""), made)
               if park else partial(gate.cluster.stop, wf_ns, j), j) for j, park in stop_now]
    if t.reclaim_only:
        p = replace(p, admit=(), adopt=(), delete=(), waiting=())  # only what frees GPUs: the rest waits for a tick
    # The grace cap goes into the admission itself: it bounds the pods, not only the plan.
    grace = obs.policy.max_grace_seconds
    steps += [(f"admit {j.name}", partial(gate.cluster.admit, wf_ns, j, uid, grace), None) for j in p.admit]
    steps += [(f"adopt {j.name}", partial(gate.cluster.adopt, wf_ns, j, uid, grace), None) for j in p.adopt]
    steps += [(f"delete {j.name}", partial(gate.cluster.delete_workflow, wf_ns, j.name), None) for j in p.delete]
    # The reason a job waits, on the job itself, written only when it changes and within the tick's budget
    # of advisory writes (what is left over is written by a later tick: it still differs then).
    changed = changed_waiting(p)
    budget = max(0, gate.advisory_writes_per_tick - t.advisory_writes)
    if len(changed) > budget:
        gate.log.info(f"{len(changed) - budget} waiting reason(s) left for a later tick (advisory writes: "
                      f"{gate.advisory_writes_per_tick} a tick)", obs.policy.name)
    t.advisory_writes += min(len(changed), budget)
    steps += [(f"annotate {j.name}", partial(gate.cluster.annotate_workflow, wf_ns, j.name,
                                             waiting_annotations(reason, position), {}), j)
              for j, position, reason in changed[:budget]]
    untrusted: list[tuple[str, Job]] = []  # (what was done, job) for each workflow whose run id is untrusted
    for what, step, about in steps:
        try:
            fence(gate, t)
            step()
        except LeaseLost:
            raise
        except Exception as err:  # noqa: BLE001 - one job's fault is that job's
            errors.append(f"{what}: {describe(err)}")
            continue
        if about is not None and about.run_problem:
            untrusted.append(("stopped" if what.startswith("stop ") else "not admitted while it is so", about))
    if record is not None and made:
        try:
            record_copies(gate, t, obs, record, [j for j in p.stop if j.name in made], made)
        except LeaseLost:
            raise
        except Exception as err:  # noqa: BLE001 - the next tick knows the copy by its token instead
            errors.append(f"record the parked copies: {describe(err)}")
    if errors:
        outcome.error = "; ".join(errors)
    record_tick_event(gate, obs, decision, p, outcome)
    for done, job in untrusted:  # once each: as its waiting reason is first written, or as it is stopped
        event(gate, obs.policy.name, obs.dep, EVENT_RUN_ID_MISMATCH,
                    f"workflow {wf_ns}/{job.name}: {job.run_problem}: {done}", warning=True)


def park_and_stop(gate: GateParts, t: TickState, namespace: str, job: Job, outcome: ServiceOutcome, lineage: Collection[str] = (),
                   token: str = "", made: dict[str, ParkedCopy] | None = None) -> None:
    """Park a copy of a job, then stop it: the copy first, so a stopped job always has one (unless its run was cancelled)."""
    # Park a copy first (idempotent: a copy the gate made before is known by its UID, in the run's `lineage`),
    # then stop: a stopped job always has its copy, unless its run was cancelled since the tick listed it.
    try:
        parked: ParkedCopy | None = gate.cluster.park_copy(namespace, job, lineage, token)
    except CancelledWorkflow as err:
        parked = None
        gate.log.info(str(err), job.service)
    if parked is not None:
        outcome.parked.append(parked.name)
    if made is not None and parked is not None:
        made[job.name] = parked
    fence(gate, t)
    gate.cluster.stop(namespace, job)


def record_copies(gate: GateParts, t: TickState, obs: Observed, record: ServiceRecord, stopped: list[Job],
                   made: Mapping[str, ParkedCopy]) -> None:
    """Write the copies just made into their runs' lineages: a stopped workflow of a lineage goes on in its copy."""
    lineages = dict(record.lineages or ())
    joined = [(j.run_id, made[j.name].uid) for j in stopped
              if j.run_id and made[j.name].uid and j.uid in lineages.get(j.run_id, ())
              and made[j.name].uid not in lineages[j.run_id]]
    if not joined:
        return
    kept = with_lineages(lineages, joined, [u for uids in lineages.values() for u in uids])
    fence(gate, t)
    gate.cluster.write_state(gate.config.namespace, obs.policy.name, replace(record, lineages=kept).to_json())


def fence(gate: GateParts, t: TickState) -> None:
    """Renew the Lease when a third of it has passed; raise `LeaseLost` if another actor has it."""
    if t.dry_run:
        return
    elapsed = gate.monotonic() - t.renewed
    if elapsed < gate.lease_seconds / 3:
        return
    try:
        held = gate.cluster.acquire_lease(gate.config.namespace, gate.holder, gate.lease_seconds)
    except Exception as err:  # noqa: BLE001 - an unreachable API: keep going only while the grant surely holds
        if elapsed < gate.lease_seconds * 2 / 3:
            return
        raise LeaseLost(f"the lease could not be renewed ({describe(err)})") from None
    if not held:
        raise LeaseLost("another actor took the offhours lease")
    t.renewed = gate.monotonic()


def record_tick_event(gate: GateParts, obs: Observed, decision: Decision, p: Plan, outcome: ServiceOutcome) -> None:
    """Record the tick's Event for a service (`reconcile.tick_event` says what)."""
    reason, message, warning = tick_event(obs, decision, p, outcome.baseline, outcome.parked, outcome.error)
    event(gate, obs.policy.name, obs.dep, reason, message, warning=warning)


def event(gate: GateParts, service: str, dep: Deployment, reason: str, message: str, warning: bool = False) -> None:
    """Record an Event on a service's Deployment (never raises: an Event is a record, not an action)."""
    event_on(gate, service, dep.namespace, dep.name, reason, message, warning)


def event_on(gate: GateParts, service: str, namespace: str, name: str, reason: str, message: str, warning: bool = False) -> None:
    """Record an Event on the named Deployment (never raises: an Event is a record, not an action)."""
    try:
        # A hold repeats every tick while nothing changes: one Event per Deployment, counted.
        kind = next((p.scale_target.kind for p in gate.config.services if p.name == service), "Deployment")
        gate.cluster.record_event(namespace, kind, name, reason, message, warning,
                                  aggregate=reason in AGGREGATED_EVENT_REASONS)
    except Exception as err:  # noqa: BLE001 - an event is a record, not an action: never let it undo a tick
        gate.log.warning(f"could not record event {reason}: {describe(err)}", service, reason=reason)
