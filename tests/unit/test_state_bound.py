"""The state record's size is bounded: at the largest settings the config accepts it stays under 1 MiB.

Fault played: `tickSeconds: 20` with `timeOfDayDays: 14` passed the schema and grew the record past
Kubernetes' 1 MiB object limit in about ten days; from then on every write of it failed, and with
them the reclaims recorded through it.
"""

import json
import math
import random
from dataclasses import replace

import pytest

from offhours.scripts.config.loader import parse_config
from offhours.scripts.policy import forecast
from offhours.scripts.policy.config import ConfigError
from offhours.scripts.policy.decide import ServiceState
from offhours.scripts.policy.record import MAX_EXACT_NEEDS, ServiceRecord, need_storage, with_need
from offhours.scripts.policy.samples import CounterSample

MIB = 1024 * 1024
TICK = 10  # the schema's shortest tick


def largest(lookback: float) -> dict:  # type: ignore[type-arg]
    svc = {"capacity": {"requestsPerSecond": 1}, "trend": True, "timeOfDayDays": 14, "volatilityHeadroomMax": 3,
           "volatilityLookbackSeconds": lookback, "coldStartSeconds": 3600, "maxGraceSeconds": 3600}
    return {"namespace": "serving", "workflowNamespace": "research", "tickSeconds": TICK,
            "metrics": {"source": "direct", "maxSampleAgeSeconds": 300}, "services": {"chat": svc}}


def largest_lookback() -> float:
    """The longest volatility lookback the loader accepts at the shortest tick, with the longest reaction time."""
    horizon = math.ceil((TICK + 3600 + 3600) / TICK)
    return float((MAX_EXACT_NEEDS - horizon - 1) * TICK)


def full_history(policy, jitter: float = 0.05):  # type: ignore[no-untyped-def]
    """A history as long as the gate keeps for `policy`, entries about a tick apart, needs up to 400 replicas."""
    keep = forecast.history_ticks(policy, TICK, forecast.reaction_seconds(policy, TICK))
    rng = random.Random(7)
    t, out = 1.8e9, []
    for i in range(keep):
        t += TICK * (1 + rng.uniform(-jitter, jitter))
        out.append((t, 200 + 200 * math.sin(i / 500) * rng.random()))
    return keep, tuple(out)


def stored(policy, needs):  # type: ignore[no-untyped-def]
    keep = forecast.history_ticks(policy, TICK, forecast.reaction_seconds(policy, TICK))
    exact, width = need_storage(keep, forecast.exact_ticks(policy, TICK, forecast.reaction_seconds(policy, TICK)), TICK)
    samples = {f"chat-{i}/{e}": CounterSample(1.8e9, (1e9, 1e12, 1e12)) for i in range(200) for e in range(2)}
    recs = tuple((1.8e9 - i * TICK, 400) for i in range(1000))
    return ServiceRecord("0" * 36, "replicas", 400, 390, None, ServiceState(recs, 0), samples,
                         {"at": 1.8e9, "action": "hold", "reason": "x" * 300}, needs, needs_exact=exact,
                         needs_width=width, deployment="chat" * 15, renewed_at=1.8e9, lease_seconds=3e4)


def test_the_record_stays_under_the_configmap_limit_at_the_largest_valid_settings() -> None:
    policy = parse_config(largest(largest_lookback())).services[0]
    keep, needs = full_history(policy)
    assert keep > 120_000  # 14 days of 10 s ticks
    text = stored(policy, needs).to_json()
    assert len(text.encode()) < 0.9 * MIB, len(text)


def test_the_stored_history_reads_back_as_long_with_never_less_need_and_the_same_exact_tail() -> None:
    policy = parse_config(largest(3600)).services[0]
    keep, needs = full_history(policy)
    rec = stored(policy, needs)
    back = ServiceRecord.from_json(rec.to_json())
    assert len(back.needs) == keep
    assert all(b[1] >= n[1] - 1e-4 for b, n in zip(back.needs, needs))
    assert [round(n, 4) for _, n in back.needs[-rec.needs_exact:]] == [round(n, 4) for _, n in needs[-rec.needs_exact:]]
    floor = forecast.forecast_required([n for _, n in back.needs], policy, TICK)
    assert floor is not None and floor >= forecast.forecast_required([n for _, n in needs], policy, TICK)  # type: ignore[operator]


def test_storing_the_same_history_again_changes_nothing_so_no_maximum_creeps_tick_by_tick() -> None:
    """Fault: buckets counted from the end would shift each tick and spread every peak a little further."""
    keep = 400
    rec = ServiceRecord(deployment_uid="u", writes_to="replicas", baseline=8, applied=8, needs_exact=40,
                        needs_width=600.0)
    rng = random.Random(3)
    t, spike_at = 1.8e9, 100
    for i in range(380):
        t += 60 * (1 + rng.uniform(-0.05, 0.05))
        need = 50.0 if i == spike_at else 1.0
        rec = ServiceRecord.from_json(replace(rec, needs=with_need(rec.needs, t, need, 60, keep)).to_json())
        assert ServiceRecord.from_json(rec.to_json()) == rec
    # The spike stands for at most its own bucket (10 minutes of 1-minute ticks, with jitter), however often re-stored.
    assert 1 <= sum(n == 50.0 for _, n in rec.needs) <= 12


def test_a_lookback_the_record_cannot_hold_is_refused_by_name() -> None:
    parse_config(largest(largest_lookback()))
    with pytest.raises(ConfigError, match=r"services\.chat\.volatilityLookbackSeconds: .* more than the 20000"):
        parse_config(largest(largest_lookback() + TICK))


def test_a_tampered_history_is_no_history() -> None:
    """Fault: someone writes a bucket standing for a billion entries into the ConfigMap (memory, not a record)."""
    policy = parse_config(largest(3600)).services[0]
    _, needs = full_history(policy)
    raw = json.loads(stored(policy, needs).to_json())
    for bad in ([[0, 10**9, 1.0]], [[True, 1, 1.0]], [[0, 1, "inf"]], [[0, 0, 1.0]]):
        assert ServiceRecord.from_json(json.dumps({**raw, "needBuckets": bad})) == ServiceRecord()
    assert ServiceRecord.from_json(json.dumps({**raw, "needsWidth": 0})) == ServiceRecord()


def test_a_huge_load_error_does_not_grow_the_record_past_the_configmap_limit() -> None:
    """Fault: a load source's error text (a proxy's 2 MB error body) was stored whole as the decision's reason."""
    from tests.unit.test_gate_controller import World

    w = World()
    w.lend(2)
    w.source.errors["chat"] = "Prometheus: bad_data: " + "x" * (2 * MIB)
    out = w.tick()["chat"]
    assert out.decision is not None and out.decision.action == "hold"
    text = w.cluster.states[("serving", "chat")]
    assert len(text.encode()) < 64 * 1024, len(text)
    assert w.record().renewed_at == w.now  # the tick still renewed the lending's lease
