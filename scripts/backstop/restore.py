"""The backstop's one pass: raise every service whose lending lease ran out back to its baseline.

It runs as a plain Kubernetes CronJob (batch/v1, scheduled by kube-controller-manager): nothing of
Argo, nothing of the gate's pod, so a suspended or deleted gate CronWorkflow, an Argo controller
that is down or a gate image that crash-loops cannot stop it. Its ServiceAccount reads the gate's
records and raises serving, nothing else (scripts/backstop/manifests.py). The research pods then
lose their GPUs to serving through their PriorityClass, which needs no Argo either.

- It reads only the records (one paginated list) and the Lease's notes of the gate's unrecorded raises;
  a Deployment is read only for an expired lease.
- It takes the gate's Lease first, so it never writes between a live gate's read and its write. A
  Lease it cannot take (held, unreadable) does not stop it for ever: a service no holder has renewed
  for twice its lease is not being ticked by anyone, and is restored anyway (serving first; this
  judges nothing by the Lease's clock).
- It only ever raises, and only the incarnation and writer target the record was made for
  (`policy.lease.restore`).
- Like the gate's raises, it records its intent before the write, and a raise goes ahead even when
  the record cannot be written (serving first). A fault stays with its service.
"""

import os
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TextIO

from offhours.scripts.cluster.base import Cluster
from offhours.scripts.gate.log import Logger
from offhours.scripts.names import EVENT_LENDING_EXPIRED
from offhours.scripts.policy.lease import expired, restore
from offhours.scripts.policy.record import ServiceRecord, UnrecordedWrite, fingerprint

REPLICAS = "replicas"
LEASE_SECONDS = 60  # the Lease held for one pass (a pass is a few API calls per expired service)
HELD_LEASES = 2.0  # with the Lease held by another: restore only lending unrenewed for this many leases


@dataclass(frozen=True)
class Restored:
    """One service the pass acted on (or failed to)."""

    service: str
    value: int | None
    message: str
    error: bool = False


def run_backstop(cluster: Cluster, namespace: str, clock: Callable[[], float] | None = None,
                 out: TextIO = sys.stdout, holder: str | None = None,
                 research_namespace: str | None = None) -> list[Restored]:
    """Restore every expired service of `namespace`; return what was done (nothing when the Lease is held).

    A lease is aged on the API server's clock only (`clock`, by default `Cluster.server_time`): the gate renews it
    in server time too, so no node's clock, the backstop's or the gate's, decides whether the gate is gone.
    With `research_namespace`, a pass that restored serving also sets the GPU quota there to zero: with no gate
    renewing the loan, no new research pod may take a GPU (the quota evicts none; their PriorityClass yields).
    """
    log = Logger(out)
    who = holder or f"backstop/{socket.gethostname()}/{os.getpid()}"
    try:
        held = cluster.acquire_lease(namespace, who, LEASE_SECONDS)
    except Exception as err:  # noqa: BLE001 - an unreadable Lease is one not held: the wider bound below applies
        log.warning(f"could not take the offhours lease: {type(err).__name__}: {err}")
        held = False
    leases = 1.0 if held else HELD_LEASES
    if not held:
        log.info(f"another holder has the offhours lease: only lending unrenewed for {HELD_LEASES:.0f} leases is restored")
    try:
        # The gate's raises it could not record are noted on its Lease: without them the gate's own raise
        # reads as someone else's, and the baseline would grow by what was lent.
        try:
            notes = cluster.lease_notes(namespace)
        except Exception as err:  # noqa: BLE001 - the records alone, as the gate reads them without the notes
            log.warning(f"the lease's notes are unreadable: {type(err).__name__}: {err}")
            notes = {}
        try:
            now = clock() if clock is not None else cluster.server_time()
        except Exception as err:  # noqa: BLE001 - named, never a traceback; and no lease is aged (see below)
            # Without the server's time a live gate's lease and a dead one's look alike: nothing is restored
            # blindly. A live gate with no clock fails every tick, and its own fail-safe restores serving.
            message = f"no server time to age the lending leases by: {type(err).__name__}: {err}: nothing restored"
            log.error(message)
            return [Restored("*", None, message, error=True)]
        done = []
        for service, text in sorted(cluster.state_records(namespace).items()):
            try:
                result = _restore_one(cluster, namespace, service, ServiceRecord.from_json(text), now, leases,
                                      text, UnrecordedWrite.from_json(notes.get(service)), who if held else None)
            except Exception as err:  # noqa: BLE001 - a fault stays with its service; the others are still restored
                result = Restored(service, None, f"could not restore: {type(err).__name__}: {err}", error=True)
            if result is not None:
                log.log("error" if result.error else "warning", result.message, service)
                done.append(result)
        if not done:
            log.info("every lending lease is current (or nothing is lent)")
        elif research_namespace and any(r.value is not None and not r.error for r in done):
            _zero_gpu_quota(cluster, research_namespace, log)
        return done
    finally:
        try:
            if held:
                cluster.release_lease(namespace, who)
        except Exception as err:  # noqa: BLE001 - an unreleased Lease expires by itself
            log.warning(f"could not release the lease: {err}")


def _zero_gpu_quota(cluster: Cluster, namespace: str, log: Logger) -> None:
    try:
        if cluster.gpu_quota(namespace) not in (None, 0):  # only the quota a gate keeps (research.gpuQuota)
            cluster.set_gpu_quota(namespace, 0)
            log.warning(f"GPU quota of {namespace} set to 0: no gate renews the loan")
    except Exception as err:  # noqa: BLE001 - serving is restored; the quota is the second lock
        log.error(f"could not set the GPU quota of {namespace} to 0: {type(err).__name__}: {err}")


def _restore_one(cluster: Cluster, namespace: str, service: str, record: ServiceRecord, now: float,
                 leases: float, text: str | None = None, note: UnrecordedWrite | None = None,
                 holder: str | None = None) -> Restored | None:
    # Cheap first: a lease that has not run out needs no read of the Deployment.
    if not expired(record, now, leases):
        return None
    dep = cluster.deployment(namespace, service, record.deployment or None)
    scaler = cluster.autoscaler(dep)
    writes_to = f"{scaler.kind}/{scaler.name}" if scaler else REPLICAS
    if note is not None:
        record = note.supersede(record, text, dep.uid, writes_to)
    current = scaler.max_replicas if scaler else dep.replicas
    action = restore(record, now, dep.uid, writes_to, current, leases)
    if action is None:
        return None
    message, intent_written = action.reason, True
    try:
        cluster.write_state(namespace, service, action.record.to_json())
    except Exception as err:  # noqa: BLE001 - serving first: the raise goes ahead without its record
        message += f" (its record could not be written first: {err})"
        intent_written = False
    # Only ever a raise, conditional on what was read: max(what serving holds now, the baseline).
    cluster.raise_serving(scaler if scaler is not None else dep, current, action.value)
    try:
        cluster.write_state(namespace, service, replace(action.record, applying_from=None).to_json())
    except Exception as err:  # noqa: BLE001 - serving is restored; the record is a record
        message += f" (the record after it failed: {err})"
        if not intent_written and holder is not None:
            message += _note_unrecorded(cluster, namespace, holder, service, action.record, dep.uid, writes_to, text)
    try:
        cluster.record_event(namespace, dep.kind, dep.name, EVENT_LENDING_EXPIRED, message, warning=True)
    except Exception as err:  # noqa: BLE001 - serving is restored; the Event is a record
        message += f" (its Event failed: {err})"
    return Restored(service, action.value, message)


def _note_unrecorded(cluster: Cluster, namespace: str, holder: str, service: str, record: ServiceRecord,
                     uid: str, writes_to: str, text: str | None) -> str:
    """Note a raise no record holds on the Lease, as the gate notes its own; return what to add to the message.

    Without it the next gate tick reads the raise as an owner's change and the baseline grows by what was lent.
    """
    assert record.baseline is not None and record.applied is not None
    note = UnrecordedWrite(uid, writes_to, record.baseline, record.applied,
                           record.applying_from if record.applying_from is not None else record.applied,
                           fingerprint(text))
    try:
        if cluster.note_on_lease(namespace, holder, service, note.to_json()):
            return " (noted on the lease instead)"
        return " (not noted on the lease either: another holder has it)"
    except Exception as err:  # noqa: BLE001 - the raise stands; only its note is lost
        return f" (nor noted on the lease: {err})"
