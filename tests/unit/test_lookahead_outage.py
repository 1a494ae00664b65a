"""The look-ahead's history survives a gate outage of minutes to hours: the gap is marked, what came before is kept.

Class: state lost with the process (a gap taken as a reason to forget: the time-of-day term then read
nothing for a day after every outage, the trend and volatility terms nothing for their reaction time).
Mechanism: `record.with_need` marks each tick missed as None (a gap, stored as null), keeping the entries
before it in place; the look-ahead (`forecast`) reads a gap as no evidence, never as zero need.

Invariants, over ticks at any jitter, outages of 0 s to 12 h and gate restarts (the record through its
JSON): the history's real samples are the model's (those of the last `keep` ticks, none dropped for a
gap); the gap is recorded, one None per tick missed within that reach; the look-ahead after the outage
gives what it gives on the model's history with the gap marked.
"""

import json
import math
from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from offhours.scripts.config.loader import parse_config
from offhours.scripts.gate.reconcile import look_ahead
from offhours.scripts.policy import forecast
from offhours.scripts.policy.capacity import Load
from offhours.scripts.policy.record import (
    MAX_BUCKET_COUNT,
    MAX_HISTORY_ENTRIES,
    MAX_NEED_BUCKETS,
    ServiceRecord,
    with_need,
)

RPS_PER_REPLICA = 8.0


class Reading:
    """A load reading as observe returns one: the rates of `need` replicas."""

    def __init__(self, need: float) -> None:
        self.load = Load(need * RPS_PER_REPLICA, 0.0, 0.0, running=0.0, waiting=0.0, kv_cache_usage=0.0, pods_read=4,
                         pods_expected=4)
        self.error: str | None = None
        self.samples: dict[str, Any] = {}


def config(tick: int, time_of_day: int = 0) -> Any:
    return parse_config({"tickSeconds": tick, "reclaimCheckSeconds": tick, "metrics": {"source": "direct",
                                                                                       "maxSampleAgeSeconds": 3600},
                         "services": {"chat": {"capacity": {"requestsPerSecond": RPS_PER_REPLICA},
                                               "trend": True, "volatilityHeadroomMax": 1.0,
                                               "volatilityLookbackSeconds": 1800, "timeOfDayDays": time_of_day}}})


class OutageMachine(RuleBasedStateMachine):
    """The gate's look-ahead, tick by tick, beside a model of its history as ticks: a need, or a gap (None)."""

    @initialize(tick=st.sampled_from([15, 30, 60, 300]), first=st.integers(0, 40))
    def start(self, tick: int, first: int) -> None:
        self.config = config(tick)
        self.policy = self.config.services[0]
        self.tick = float(tick)
        reaction = forecast.reaction_seconds(self.policy, self.tick, self.tick)
        self.keep = forecast.history_ticks(self.policy, self.tick, reaction)
        self.record = ServiceRecord()
        self.now = 1.8e9
        self.model: list[tuple[float, float | None]] = []  # (time, need or None), one per tick, the last `keep`
        self.floor: int | None = None
        self.step(first / 4)

    def step(self, need: float) -> None:
        """One tick: the gate's look-ahead, and the model's history updated by its rules in ticks."""
        self.record, self.floor = look_ahead(self.config, self.policy, self.record, Reading(need), self.now)
        if self.model:
            since = self.now - self.model[-1][0]
            if since > 2 * self.tick:
                self.model += [(math.nan, None)] * (math.floor(since / self.tick) - 1)  # each tick missed: a gap
            elif since < 0.9 * self.tick:
                self.model.pop()  # an early tick stands for the one before it
        self.model = [*self.model, (self.now, need)][-self.keep:]

    # Times move in twentieths of a tick (quarter seconds): exact in binary and in the record's JSON.
    @rule(jitter=st.integers(18, 40), need=st.integers(0, 40))
    def tick_on(self, jitter: int, need: int) -> None:
        """A tick 0.9 to 2 ticks after the last (a late one, a loaded machine)."""
        self.now += self.tick * jitter / 20
        self.step(need / 4)

    @rule(early=st.integers(1, 17), need=st.integers(0, 40))
    def tick_early(self, early: int, need: int) -> None:
        """A tick woken early (a returned job): it replaces the last entry."""
        self.now += self.tick * early / 20
        self.step(need / 4)

    @rule(seconds=st.one_of(st.integers(0, 600), st.integers(600, 12 * 3600)), need=st.integers(0, 40))
    def outage(self, seconds: int, need: int) -> None:
        """The gate is down for `seconds` (0 s to 12 h), then ticks."""
        self.now += self.tick + seconds
        self.step(need / 4)

    @rule()
    def restart(self) -> None:
        """A new gate process: the record is all that is left, read back from its JSON."""
        self.record = ServiceRecord.from_json(self.record.to_json())

    @invariant()
    def samples_kept_and_gaps_marked(self) -> None:
        if not self.model:
            return
        history = [n for _, n in self.record.needs]
        assert history == [n for _, n in self.model], "the history lost samples from before a gap, or its gaps"
        times = [t for t, n in self.record.needs]
        assert times == sorted(times)
        assert [t for t, n in self.record.needs if n is not None] == [t for t, n in self.model if n is not None]

    @invariant()
    def look_ahead_reads_the_history_with_its_gap(self) -> None:
        if not self.model:
            return
        expected = forecast.forecast_required([n for _, n in self.model], self.policy, self.tick,
                                              forecast.reaction_seconds(self.policy, self.tick, self.tick))
        assert self.floor == expected


OutageMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=30, derandomize=True, deadline=None,
                                           suppress_health_check=[HealthCheck.too_slow])
test_outages_and_restarts = OutageMachine.TestCase


def test_the_time_of_day_term_after_a_twelve_hour_outage_reads_the_day_before() -> None:
    """A daily ramp at 09:00 is met ahead of time after the gate was down from 20:00 to 08:00, through a restart.

    Before, the gap emptied the history: the morning after an outage had no day before to look at.
    """
    tick = 300
    cfg = config(tick, time_of_day=1)
    policy = cfg.services[0]
    record, now = ServiceRecord(), 0.0
    for i in range(int(20 * 3600 / tick)):  # 00:00 to 20:00 on day one: 30 replicas from 09:00 to 12:00
        now = i * tick
        record, _ = look_ahead(cfg, policy, record, Reading(30.0 if 9 * 3600 <= now % 86400 < 12 * 3600 else 2.0),
                               now)
    record = ServiceRecord.from_json(record.to_json())  # the gate restarts after its outage
    after = 86400 + 8.9 * 3600  # 08:54 on day two, the first tick after the outage
    record, floor = look_ahead(cfg, policy, record, Reading(2.0), after)
    gaps = sum(1 for _, n in record.needs if n is None)
    assert gaps == math.floor((after - (now)) / tick) - 1  # the outage is there, as ticks missed
    empty, fresh = look_ahead(cfg, policy, ServiceRecord(), Reading(2.0), after)
    assert fresh is not None and floor is not None and floor > fresh  # the ramp of the day before is seen ahead
    assert floor == forecast.forecast_required([n for _, n in record.needs], policy, float(tick),
                                               forecast.reaction_seconds(policy, float(tick), float(tick)))
    stored = json.loads(record.to_json())
    assert any(n is None for _, n in stored["needs"]) or any(p is None for _, _, p in stored.get("needBuckets", []))


def test_with_need_marks_a_gap_longer_than_the_history_as_its_whole_reach() -> None:
    """A gap longer than the history's reach leaves only gap and now: nothing older is read, nothing is made up."""
    needs = with_need((), 0.0, 1.0, 60.0, 5)
    needs = with_need(needs, 60.0, 2.0, 60.0, 5)
    assert with_need(needs, 3600.0, 3.0, 60.0, 5) == (*((3600.0 - k * 60.0, None) for k in (4, 3, 2, 1)), (3600.0, 3.0))
    assert replace(ServiceRecord(), needs=needs).needs == needs


def test_a_gap_is_no_evidence_never_zero_need() -> None:
    """A steady need with a gap anywhere in its history looks ahead as the steady need does: no rise out of a gap."""
    policy = config(60).services[0]
    reaction = forecast.reaction_seconds(policy, 60.0, 60.0)
    steady = forecast.forecast_required([5.0] * 40, policy, 60.0, reaction)
    for start in range(0, 39, 3):
        for length in (1, 2, 5, 20):
            history: list[float | None] = [5.0] * 40
            history[start:min(39, start + length)] = [None] * len(history[start:min(39, start + length)])
            assert forecast.forecast_required(history, policy, 60.0, reaction) == steady, (start, length)


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 2 * MAX_NEED_BUCKETS), st.integers(1, MAX_BUCKET_COUNT))
def test_a_stored_history_never_expands_past_the_longest_one_the_gate_keeps(buckets: int, count: int) -> None:
    """Class: a stored value's size bounded, its meaning not. Each bucket of the stored history stands for `count`
    entries: within each field's bound, 8192 buckets of 10,000 (a 130 KB ConfigMap) expanded to 82 million entries
    on every read of the record, gate's and backstop's alike (minutes and gigabytes: a gate killed for memory).
    Read back, a history is never longer than the longest the gate keeps; past it the record is refused."""
    if buckets * count > MAX_HISTORY_ENTRIES:
        buckets = min(buckets, 64)  # the oversized case, kept cheap should the bound not hold
        count = max(count, MAX_HISTORY_ENTRIES // buckets + 1)
    raw = json.loads(ServiceRecord(deployment_uid="u", writes_to="replicas", baseline=8, applied=8).to_json())
    raw.update({"needBuckets": [[b, count, 1.0] for b in range(buckets)], "needsWidth": 60.0, "needsExact": 0})
    record = ServiceRecord.from_json(json.dumps(raw))
    assert len(record.needs) <= MAX_HISTORY_ENTRIES
    assert record.baseline == (8 if buckets * count <= MAX_HISTORY_ENTRIES else None)


def test_the_longest_history_a_configuration_keeps_is_read_back() -> None:
    """The bound is above the schema's longest history (timeOfDayDays 14 at tickSeconds 10): never a real one refused."""
    cfg = parse_config({"namespace": "serving", "workflowNamespace": "research", "tickSeconds": 10,
                        "metrics": {"source": "direct", "maxAgeSeconds": 180},
                        "services": {"chat": {"capacity": {"requestsPerSecond": 10}, "timeOfDayDays": 14}}})
    policy = cfg.services[0]
    keep = forecast.history_ticks(policy, 10.0, forecast.reaction_seconds(policy, 10.0))
    assert keep <= MAX_HISTORY_ENTRIES
