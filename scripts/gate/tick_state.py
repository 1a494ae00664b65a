"""What one tick knows of itself and returns: its state, each service's outcome, the faults that end a write."""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from offhours.scripts.cluster.base import Cluster, Pod
from offhours.scripts.gate.log import Logger
from offhours.scripts.gate.snapshot import TickView
from offhours.scripts.metrics.sources import Reading
from offhours.scripts.policy.config import GateConfig, ServicePolicy
from offhours.scripts.policy.decide import Decision
from offhours.scripts.policy.plan import Job, Plan
from offhours.scripts.policy.record import ServiceRecord, UnrecordedWrite


class ServingChanged(RuntimeError):
    """A lower found serving changed by another writer since the tick read it: nothing was written."""

    def __init__(self, message: str, record: ServiceRecord) -> None:
        super().__init__(message)
        self.record = record  # the record as it stands after the unwritten lower (measured from the read)


class LeaseLost(RuntimeError):
    """Another actor holds the Lease now: this gate must not write anything more this tick."""


@dataclass(frozen=True)
class Basis:
    """What a reclaim check between ticks starts from: the service as the last tick left it."""

    policy: ServicePolicy
    baseline: int
    lent: int
    pods: list[Pod]
    record: ServiceRecord


@dataclass
class ServiceOutcome:
    """What one tick decided and did for one service."""

    service: str
    baseline: int | None = None
    decision: Decision | None = None
    plan: Plan | None = None
    parked: list[str] = field(default_factory=list)
    error: str | None = None
    adopted: str | None = None
    applied: int | None = None  # the replicas (or maxReplicas) the service was left at
    basis: Basis | None = None  # for the reclaim checks until the next tick

    @property
    def failed(self) -> bool:
        """Whether the service's tick failed before it was decided and planned."""
        return self.decision is None or self.plan is None

    def detail(self) -> str:
        """Return what was decided and done, without the service's name (the log line names it in its own field)."""
        if self.decision is None or self.plan is None:  # `failed`, spelled out for the type checker
            return f"failed tick: {self.error}"
        d, p = self.decision, self.plan
        parts = [f"{d.action} lent {d.lent} -> {p.lent_after} of baseline {self.baseline}",
                 f"({d.reason})", f"at {self.applied if self.applied is not None else p.scale_to}"]
        if self.adopted:
            parts.append(self.adopted)
        if p.admit:
            parts.append("admit " + ",".join(j.name for j in p.admit))
        if p.adopt:
            parts.append("adopt " + ",".join(j.name for j in p.adopt))
        if p.stop:
            parts.append("stop " + ",".join(j.name for j in p.stop))
        if self.parked:
            parts.append("park " + ",".join(self.parked))
        if self.error:
            parts.append(f"error: {self.error}")
        return "; ".join(parts)


@dataclass
class TickState:
    """What one tick knows of itself: made new by each `Gate.tick`, so nothing of one tick leaks into the next."""

    dry_run: bool = False
    renewed: float = 0.0  # when the Lease was last taken or renewed (Gate.monotonic)
    advisory_spent: float = 0.0  # seconds of advisory reads so far, against Gate.advisory_budget
    advisory_writes: int = 0  # waiting-reason writes so far, against Gate.advisory_writes_per_tick
    advisory_reads: int = 0  # parked copies' originals read so far, against Gate.advisory_reads_per_tick
    research_writes: int = 0  # stops of workflows the gate did not admit so far, against Gate.research_writes_per_tick
    lease_notes: dict[str, str] | None = None  # the Lease's notes, read once, when first needed
    # A reclaim between ticks (scripts/gate/reclaim.py): it gives back and stops victims, never lends,
    # admits or counts a failed tick; for a service that turns out not to need a reclaim it writes nothing.
    reclaim_only: bool = False
    only: frozenset[str] | None = None  # the services of this pass; None: every service
    readings: Mapping[str, Reading] | None = None  # the load the reclaim check read; None: read it now
    # Record and advisory writes of failed services, held while serving writes of the tick are still to come
    # (observing and the serving phase); None once they are all written: then at once.
    deferred: list[Callable[[], None]] | None = None
    # The research namespace's WorkflowTemplates by name: read once, when a job that may be admitted refers to
    # one; None: not read (yet), or unreadable (then a job that refers to one is not admitted this tick).
    templates: dict[str, dict[str, Any]] | None = None
    templates_read: bool = False
    template_too_large: dict[str, bool] = field(default_factory=dict)  # of `templates`, each measured once a tick
    view: TickView = field(default_factory=lambda: TickView({}, {}, {}, {}))  # the snapshots joined (`tick_view`)
    # Run id -> the services a workflow of it runs for (listed, or admitted this tick): services may share one
    # research namespace, and one run never runs twice at once (its checkpoints are one), whichever service lends.
    runs_running: dict[str, set[str]] = field(default_factory=dict)
    # Service -> the record as this tick last wrote (or meant to write) it: what a failure later in the tick records.
    written: dict[str, ServiceRecord] = field(default_factory=dict)
    turn: int = 0  # the tick's number on the server's clock (now // tickSeconds): where each budget starts this tick
    pool: Any = None  # hook: pool holding (gate/pool.py's PoolRead: the pods on serving's nodes, read once a tick)


class GateParts(Protocol):
    """What the gate's steps (actuate, advisory, failsafe, release) use of the `Gate`: its settings and collaborators."""

    config: GateConfig
    cluster: Cluster
    holder: str
    progress: Callable[[Job], float | None] | None
    advisory_timeout: float
    advisory_budget: float
    advisory_writes_per_tick: int
    advisory_reads_per_tick: int
    research_writes_per_tick: int
    unrecorded: dict[str, UnrecordedWrite]
    unlisted: bool

    def now(self) -> float:
        """Return the time decisions and the record are dated by."""

    @property
    def monotonic(self) -> Callable[[], float]:
        """The gate's own clock, for the Lease's renewals."""

    @property
    def token(self) -> Callable[[], str]:
        """Make the token a stop's parked copy carries."""

    @property
    def lease_seconds(self) -> int:
        """How long one Lease grant lasts."""

    @property
    def log(self) -> Logger:
        """The gate's log."""

    def note_of(self, t: "TickState", service: str) -> UnrecordedWrite | None:
        """Return the gate's unrecorded raise of a service: this process's, or one noted on the Lease."""


def after_serving(t: TickState, write: Callable[[], None]) -> None:
    """Run a record or bookkeeping write now, or, while the tick's serving writes are still to come, after them."""
    if t.deferred is None:
        write()
    else:
        t.deferred.append(write)
