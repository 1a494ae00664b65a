"""Lending is a lease: what the backstop may restore once no gate tick renewed it in time (pure: no I/O).

Every gate tick that acts on a service renews its lease in the service's record (`renewed_at`,
`lease_seconds`). A gate that is gone (its CronWorkflow suspended or deleted, the Argo controller
down, its image crash-looping) renews nothing; once the lease has run out, the backstop, a plain
Kubernetes CronJob, puts serving back at its baseline. It only ever raises serving, and only on the
incarnation and writer target the record was made for: a Deployment recreated since, or an
autoscaler that came or went, is a new owner's, with nothing of the gate's to restore on it.
"""

from dataclasses import dataclass, replace

from offhours.scripts.policy.record import ServiceRecord, own_baseline

DEFAULT_LEASE_TICKS = 3
"""Ticks without a renewal after which lending has expired (the config's `failSafe.leaseTicks`)."""


def lease_seconds(lease_ticks: int, tick_seconds: float, slack_seconds: float) -> float:
    """How long one renewal holds: `lease_ticks` ticks, plus the pause between two runs of the gate's CronWorkflow."""
    return lease_ticks * tick_seconds + slack_seconds


def renewed(record: ServiceRecord, now: float, seconds: float) -> ServiceRecord:
    """Return the record with its lease renewed at `now` for `seconds`."""
    return replace(record, renewed_at=now, lease_seconds=seconds)


def expired(record: ServiceRecord, now: float, leases: float = 1.0) -> bool:
    """Whether `leases` times the record's lease have run out; a record that never carried one has none to expire."""
    if record.renewed_at is None or record.lease_seconds is None or record.baseline is None:
        return False
    return now - record.renewed_at > leases * record.lease_seconds


@dataclass(frozen=True)
class Restore:
    """What the backstop writes for one service: the value, and the record that says it was the backstop's."""

    value: int
    record: ServiceRecord
    reason: str


def restore(record: ServiceRecord, now: float, uid: str, writes_to: str, current: int,
            leases: float = 1.0) -> Restore | None:
    """Return the restore an expired lease calls for, or None when there is nothing to raise.

    `uid`, `writes_to` and `current` are what is observed now (the Deployment's UID, "replicas" or
    the autoscaler, the replicas or maxReplicas). What someone else set since the gate's last write
    is theirs (the baseline moves by it, as a gate tick would adopt it). Never lower than `current`.
    """
    if not expired(record, now, leases) or record.deployment_uid != uid or record.writes_to != writes_to:
        return None
    owned = own_baseline(record, uid, writes_to, current, 0)
    if current >= owned.baseline:
        return None
    assert record.renewed_at is not None
    intent = replace(owned.record, applied=owned.baseline, applying_from=current)
    reason = (f"no gate tick renewed the lending for {now - record.renewed_at:.0f} s (lease {record.lease_seconds:.0f} s): "
              f"{writes_to} raised from {current} to the baseline {owned.baseline}")
    return Restore(owned.baseline, intent, reason)
