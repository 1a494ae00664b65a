"""The snapshot a tick decides on: frozen values, no I/O (observe.py reads them; reconcile.py decides on them).

A snapshot is frozen: nothing of the tick rewrites what it read (what the tick writes is its own value, kept
in the tick's state). The Deployment object inside is the cluster's: a conditional write leaves the value it
found there, which is what `current` answers after a write.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from offhours.scripts.cluster.base import Autoscaler, Deployment, Pod
from offhours.scripts.gate.admissions import first_scheduled_claims, lineage_carriers
from offhours.scripts.policy.config import ServicePolicy
from offhours.scripts.policy.plan import PARKED, Job
from offhours.scripts.policy.record import ServiceRecord

REPLICAS = "replicas"


@dataclass(frozen=True)
class Observed:
    """One service as observed at the start of a tick."""

    policy: ServicePolicy
    dep: Deployment
    scaler: Autoscaler | None
    record: ServiceRecord  # the stored record, with this gate's unrecorded raise (if any) applied to it
    jobs: list[Job]  # the listed workflows, less those the record says gave their GPUs back (`returned`)
    pods: list[Pod]
    stored_text: str | None = None  # the record as read, before any unrecorded write of the gate is applied to it
    lineages: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # the record's, as `lineages_of` reads them
    returned: tuple[str, ...] = ()  # UIDs of the listed workflows returned by the record (`returned_by_record`)

    @property
    def writes_to(self) -> str:
        """What the gate writes for this service: the replicas, or the autoscaler's maxReplicas."""
        return writes_to(self.scaler)

    @property
    def current(self) -> int:
        """The value the gate would write now (replicas, or maxReplicas)."""
        return self.scaler.max_replicas if self.scaler else self.dep.replicas


def writes_to(scaler: Autoscaler | None) -> str:
    """Name what the gate writes for a service: the replicas, or the autoscaler's maxReplicas."""
    return f"{scaler.kind}/{scaler.name}" if scaler else REPLICAS


@dataclass(frozen=True)
class TickView:
    """What one tick's snapshots say together: one research namespace may serve several services."""

    # Run id -> the UIDs of its lineage in any service's record (`lineages_of`): only those run it, whichever service.
    lineages: Mapping[str, frozenset[str]]
    carriers: Mapping[str, str]  # run id -> a listed workflow of its lineage (any service)
    # Run id -> the services a listed workflow of it runs for: one run never runs twice at once.
    runs_running: Mapping[str, frozenset[str]]
    # Scheduled run id without a lineage -> the first workflow created of it, of any service (`first_scheduled_claims`).
    first_claims: Mapping[str, str]


def tick_view(observed: Sequence[Observed]) -> TickView:
    """Join the services' snapshots: lineages, their carriers, the runs running, the scheduled runs' first claims."""
    lineages: dict[str, set[str]] = {}
    for obs in observed:
        for run, uids in obs.lineages.items():
            lineages.setdefault(run, set()).update(uids)
    carriers: dict[str, str] = {}
    running: dict[str, set[str]] = {}
    for obs in observed:
        for run, name in lineage_carriers(obs.jobs, obs.lineages).items():
            carriers.setdefault(run, name)
        for job in obs.jobs:
            if job.run_id and job.state != PARKED:
                running.setdefault(job.run_id, set()).add(obs.policy.name)
    return TickView({run: frozenset(u) for run, u in lineages.items()}, carriers,
                    {run: frozenset(s) for run, s in running.items()},
                    first_scheduled_claims([j for obs in observed for j in obs.jobs], lineages))
