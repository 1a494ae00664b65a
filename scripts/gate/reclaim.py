"""The reclaim check between two full ticks: see a rise within seconds, give back at once.

A full tick (scripts/gate/controller.py) reads everything, lends, admits and writes the state of
every service; at `tickSeconds` of 60 that alone would leave a rise unseen for up to a minute.
Between ticks, every `reclaimCheckSeconds`, the loop runs this check:

- one read of the load source for every service (the cheap part: one PromQL query, or one scrape
  per pod), against what the last tick left: its baseline, what stayed lent, its ready pods;
- the tick's own decision (`reconcile.reclaim_due`, the same look-ahead floor), restricted to giving back: the check
  lends, admits and writes nothing, and a reading that fails is not a failed tick (the fail-safe
  counts ticks only);
- for the services whose decision is a reclaim, a reclaim-only pass of the gate: it takes and
  fences the Lease as a full tick does, reads those services' objects afresh (Deployment, record,
  jobs) and decides again on them with the load the check read, then gives serving its replicas
  first and stops the victims; nothing else.

Counter rates are taken over one check period: each check keeps its counter samples for the next
(the direct source), so a step shows whole at the first check after it, not spread over the time
since the last tick. The check keeps nothing else the cluster does not have: its basis is what the
last pass returned, and a process that starts again has none until its first full tick.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from offhours.scripts.gate.controller import Gate
from offhours.scripts.gate.reconcile import reclaim_due
from offhours.scripts.gate.tick_state import Basis, ServiceOutcome
from offhours.scripts.metrics.sources import Reading, ServiceTarget
from offhours.scripts.policy.samples import CounterSample


@dataclass
class ReclaimCheck:
    """Checks between ticks whether a service needs its lent replicas back; runs the reclaim if so."""

    gate: Gate
    basis: dict[str, Basis] = field(default_factory=dict)
    samples: dict[str, dict[str, CounterSample]] = field(default_factory=dict)  # each check's, for the next one

    def remember(self, outcomes: Iterable[ServiceOutcome]) -> None:
        """Take the basis of the next checks from a pass's outcomes (a service without one is not checked)."""
        for outcome in outcomes:
            if outcome.basis is not None:
                self.basis[outcome.service] = outcome.basis
                self.samples.pop(outcome.service, None)  # the pass's own samples are in its record
            elif outcome.failed:
                self.basis.pop(outcome.service, None)  # unknown now: the next full tick decides
                self.samples.pop(outcome.service, None)

    def due(self) -> list[str]:
        """Return the services whose load, read now, needs lent replicas back (no writes to the cluster)."""
        return list(self._due())

    def run(self) -> list[ServiceOutcome]:
        """Check; for the services that need a reclaim, run the gate's reclaim-only pass and return its outcomes."""
        due = self._due()
        if not due:
            return []
        outcomes = self.gate.tick(only=list(due), reclaim_only=True, readings=due)
        # A pass that could not read a service keeps its basis: the next check tries the pass again (it reads
        # everything afresh), rather than leaving the rise to the next full tick.
        self.remember(o for o in outcomes if not o.failed)
        return outcomes

    def _due(self) -> dict[str, Reading]:
        lending = {name: b for name, b in self.basis.items() if b.lent > 0}
        if not lending:
            return {}  # nothing lent, nothing to give back: not even a read
        try:
            now = self.gate.now()
        except Exception as err:  # noqa: BLE001 - the loop goes on: its ticks count the missing clock as failed
            self.gate.log.warning(f"reclaim check skipped: no server time to date it by: {type(err).__name__}: {err}")
            return {}
        readings = self._read(lending, now)
        for name, reading in readings.items():
            if reading.samples:
                self.samples[name] = reading.samples
        return {name: readings[name] for name, b in lending.items()
                if self._needs_reclaim(b, readings.get(name), now) and name in readings}

    def _read(self, lending: dict[str, Basis], now: float) -> dict[str, Reading]:
        targets: Sequence[ServiceTarget] = [ServiceTarget(name, b.pods, self.samples.get(name, b.record.samples))
                                            for name, b in lending.items()]
        try:
            return self.gate.source.read(targets, now)
        except Exception as err:  # noqa: BLE001 - a broken source is no reading; the next tick counts it
            return {t.service: Reading(None, f"load source failed: {err}") for t in targets}

    def _needs_reclaim(self, b: Basis, reading: Reading | None, now: float) -> bool:
        # The tick's own decision (reconcile), on the basis the last tick left; a check never fires the fail-safe.
        return reclaim_due(self.gate.config, b.policy, b.baseline, b.lent, b.record,
                           reading or Reading(None, "no reading"), now)
