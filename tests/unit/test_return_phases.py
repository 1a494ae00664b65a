"""The reclaim phase tracker, driven by generated runs of reclaims, reads, cancels and gate restarts.

Invariants, in words:
- every reclaim begun ends at most once, with one named outcome; a served one has every phase;
- phases are >= 0 and sum exactly to the total; the milestones they come from are in order;
- a phase is never dated by anything but the times the runs fed in (the gate's monotonic reads);
- a second reclaim of a service closes the first as superseded; a cancel closes it as cancelled;
- a restart (a new tracker) loses only the reclaims open then: reads after it close nothing, and the
  next reclaim is timed whole;
- the metrics page has no label value outside the configured services, PHASE_LABELS and OUTCOMES;
- bad input raises one PhaseError and leaves the tracker as it was.
"""

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from offhours.scripts.gate.return_metrics import ReturnMetrics
from offhours.scripts.metrics.exposition import parse
from offhours.scripts.policy.return_phases import (
    ABANDONED,
    CANCELLED,
    MAX_OPEN_SECONDS,
    OUTCOMES,
    PHASE_LABELS,
    PHASES,
    SERVED,
    SUPERSEDED,
    TOTAL,
    Observation,
    PhaseError,
    Tracker,
    begin,
    cancel,
    observe,
)

SERVICES = ("chat", "code")
flags = st.builds(Observation, st.booleans(), st.booleans(), st.booleans(), st.booleans())


class PhaseRuns(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tracker = Tracker()
        self.now = 0.0
        self.fed: list[float] = []  # every time given to the tracker
        self.open: dict[str, float] = {}  # service -> seen time of the reclaim the model thinks open
        self.closed: list = []
        self.metrics = ReturnMetrics(SERVICES)

    def _close(self, closed: list, expect: dict[str, str]) -> None:
        for c in closed:
            assert c.outcome in OUTCOMES
            if c.outcome == SERVED:
                assert set(c.phases) == set(PHASE_LABELS)
                assert all(v >= 0 for v in c.phases.values())
                assert c.phases[TOTAL] == sum(c.phases[p] for p in PHASES)
                assert c.phases[TOTAL] <= self.now - self.open[c.service] + 1e-9
            else:
                assert c.phases == {}
            assert expect.get(c.service) in (c.outcome, "any"), (c, expect)
            self.metrics.record(c)
            self.open.pop(c.service, None)
        self.closed += closed

    @rule(service=st.sampled_from(SERVICES), dt=st.floats(0, 30), delay=st.floats(0, 5))
    def reclaim(self, service: str, dt: float, delay: float) -> None:
        self.now += dt
        seen = self.now
        self.now += delay
        was_open = service in self.open
        self.tracker, closed = begin(self.tracker, service, seen, self.now)
        assert [c.outcome for c in closed] == ([SUPERSEDED] if was_open else [])
        self._close(closed, {service: SUPERSEDED})
        self.open[service] = seen

    @rule(service=st.sampled_from(SERVICES), seen=flags, dt=st.floats(0, 600))
    def read(self, service: str, seen: Observation, dt: float) -> None:
        self.now += dt
        before = self.tracker.get(service)
        self.tracker, closed = observe(self.tracker, service, seen, self.now)
        if before is None:
            assert closed == []
            return
        self._close(closed, {service: SERVED if all(seen.reached()) else "any"})
        if closed and closed[0].outcome == ABANDONED:
            assert self.now - before.times[0] > MAX_OPEN_SECONDS
        if not closed:
            after = self.tracker.get(service)
            assert after is not None and list(after.times) == sorted(after.times)
            assert set(after.times) <= set(before.times) | {self.now}

    @rule(service=st.sampled_from(SERVICES))
    def cancel_it(self, service: str) -> None:
        was_open = service in self.open
        self.tracker, closed = cancel(self.tracker, service)
        assert [c.outcome for c in closed] == ([CANCELLED] if was_open else [])
        self._close(closed, {service: CANCELLED})

    @precondition(lambda self: bool(self.open))
    @rule()
    def restart(self) -> None:
        self.tracker = Tracker()  # the gate's process starts again: what was open is lost, nothing is closed
        self.open.clear()

    @rule(bad=st.sampled_from([math.nan, math.inf, -math.inf, "1", None, True]))
    def bad_time(self, bad: object) -> None:
        before = self.tracker
        with pytest.raises(PhaseError):
            observe(self.tracker, "chat", Observation(True, True, True, True), bad)  # type: ignore[arg-type]
        with pytest.raises(PhaseError):
            begin(self.tracker, "chat", bad, 0.0)  # type: ignore[arg-type]
        assert self.tracker == before

    @invariant()
    def one_open_per_service(self) -> None:
        services = [r.service for r in self.tracker.open]
        assert len(services) == len(set(services)) and set(services) == set(self.open)
        for r in self.tracker.open:
            assert list(r.times) == sorted(r.times) and 2 <= len(r.times) < 6

    @invariant()
    def bounded_labels(self) -> None:
        page = parse(self.metrics.render())
        for sample in page.samples:
            labels = dict(sample.labels)
            assert labels["service"] in SERVICES
            assert labels.get("phase", TOTAL) in PHASE_LABELS and labels.get("outcome", SERVED) in OUTCOMES
        served = sum(1 for c in self.closed if c.outcome == SERVED)
        counts = [s.value for s in page.samples if s.name.endswith("_count") and s.label("phase") == TOTAL]
        assert sum(counts) == served


TestPhaseRuns = PhaseRuns.TestCase
TestPhaseRuns.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)


@given(st.lists(st.floats(0, 100), min_size=6, max_size=6))
def test_served_phases_are_the_gaps_between_the_reads_that_reached_each_milestone(gaps: list[float]) -> None:
    times = [sum(gaps[:i + 1]) for i in range(6)]
    tracker, _ = begin(Tracker(), "chat", times[0], times[1])
    closed: list = []
    for i in range(4):
        tracker, closed = observe(tracker, "chat", Observation(*(j <= i for j in range(4))), times[i + 2])
    assert [c.outcome for c in closed] == [SERVED]
    assert [closed[0].phases[p] for p in PHASES] == pytest.approx([times[i + 1] - times[i] for i in range(5)])


def test_a_milestone_found_before_the_one_before_it_is_reached_with_it() -> None:
    tracker, _ = begin(Tracker(), "chat", 10.0, 11.0)
    tracker, closed = observe(tracker, "chat", Observation(False, True, True, False), 14.0)  # scheduled early
    assert closed == [] and tracker.get("chat").times == (10.0, 11.0)
    tracker, closed = observe(tracker, "chat", Observation(True, True, True, True), 20.0)
    assert closed[0].phases == {"decision": 1.0, "victims_exit": 9.0, "scheduling": 0.0, "start": 0.0,
                                "serving": 0.0, "total": 10.0}


def test_a_clock_read_earlier_than_a_reached_milestone_dates_nothing_before_it() -> None:
    tracker, _ = begin(Tracker(), "chat", 10.0, 12.0)
    tracker, closed = observe(tracker, "chat", Observation(True, True, True, True), 11.0)
    assert closed[0].phases[TOTAL] == 2.0 and min(closed[0].phases.values()) == 0.0


def test_an_unknown_service_gets_no_series() -> None:
    metrics = ReturnMetrics(["chat"])
    tracker, _ = begin(Tracker(), "tenant-made", 0.0, 1.0)
    tracker, closed = observe(tracker, "tenant-made", Observation(True, True, True, True), 2.0)
    with pytest.raises(ValueError, match="tenant-made"):
        metrics.record(closed[0])
    assert "tenant-made" not in metrics.render()
    assert not re.search(r'service="(?!chat")', metrics.render())
