"""The estimate of a requested job's start, against the simulator, and its invariants.

The offline check: a job submitted at minute t of the bundled trace is replayed with the trace's own
future (what the simulator says happened to it, the same engine and policy) and estimated from the
days before t only (what the console would have said). The predicted median start must fall in the
simulated start's 10-minute bucket in most cases: at least THRESHOLD of them.
"""

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offhours.scripts.policy.estimate import (
    EstimateError,
    JobAhead,
    JobRequest,
    estimate_record,
    parse_estimate_record,
)
from offhours.scripts.policy.partial import Missing
from offhours.scripts.simulate.estimate import DAY, estimate, replay_day
from offhours.scripts.simulate.fleet import default_fleet
from offhours.scripts.simulate.trace import Trace, load_trace

THRESHOLD = 0.8  # the share measured at the committed policy: 0.91 at a 53-minute stride (bench/bench_estimate.py)
P90_THRESHOLD = 0.75  # embed behind 2 jobs, the hardest case of the bench: 0.85 at a 53-minute stride


def chat(index: int = 0) -> tuple[Trace, object, int, object]:
    trace = load_trace()
    fleet = default_fleet(trace)
    spec = fleet.services[index]
    own = Trace(trace.requests * spec.share, trace.input_tokens * spec.share, trace.output_tokens * spec.share, "chat")
    return own, spec.policy, spec.baseline, fleet


def bucket(minutes: float) -> float:
    return math.inf if math.isinf(minutes) else minutes // 10


def test_predicted_median_start_falls_in_the_simulated_start_bucket_in_most_cases() -> None:
    trace, policy, baseline, fleet = chat()
    request, ahead = JobRequest(2, 4.0, 30.0), [JobAhead(2), JobAhead(2)]
    hits = cases = 0
    starts = set()
    for now in range(7 * DAY, 12 * DAY, 97):
        predicted = estimate(trace, now, policy, baseline, fleet, request, ahead, days=7)
        simulated = replay_day(trace, now, 0, policy, baseline, fleet, request, ahead).start_minutes
        hits += bucket(predicted.start_median_minutes) == bucket(simulated)
        cases += 1
        starts.add(bucket(simulated))
    assert len(starts) > 3, "the check must cover waits of several lengths, not only immediate starts"
    assert hits / cases >= THRESHOLD, f"{hits} of {cases} within the simulated start's 10-minute bucket"


def test_where_waits_are_long_the_90th_percentile_still_covers_the_simulated_start() -> None:
    """The median misses the 10-minute bucket where the queue makes waits of hours (embed, 2 jobs ahead: 25%, said in
    README); the 90th percentile it shows is still at or after what happened in most cases."""
    trace, policy, baseline, fleet = chat(3)
    request, ahead = JobRequest(2, 4.0, 30.0), [JobAhead(2), JobAhead(2)]
    covered = cases = 0
    for now in range(7 * DAY, 12 * DAY, 97):
        predicted = estimate(trace, now, policy, baseline, fleet, request, ahead, days=7)
        covered += replay_day(trace, now, 0, policy, baseline, fleet, request, ahead).start_minutes <= \
            predicted.start_p90_minutes
        cases += 1
    assert covered / cases >= P90_THRESHOLD, f"{covered} of {cases} at or below the predicted 90th percentile"


def test_an_estimate_needs_a_whole_replay_before_now() -> None:
    trace, policy, baseline, fleet = chat()
    with pytest.raises(EstimateError, match="an estimate needs"):
        estimate(trace, DAY, policy, baseline, fleet, JobRequest(1, 2.0, 30.0))
    with pytest.raises(EstimateError, match="replicas 99"):
        estimate(trace, 10 * DAY, policy, baseline, fleet, JobRequest(99, 2.0, 30.0))


@settings(max_examples=15, deadline=None)
@given(minute=st.integers(7 * DAY, 13 * DAY), replicas=st.integers(1, 8), hours=st.floats(0.5, 12.0),
       checkpoint=st.sampled_from([5.0, 30.0, 120.0]), depth=st.integers(0, 4))
def test_estimate_invariants(minute: int, replicas: int, hours: float, checkpoint: float, depth: int) -> None:
    """The median never after the 90th percentile; a chance is a share; a preemption loses at most one checkpoint
    interval of work at the request's size, so the mean loss is bounded by that times the mean preemptions."""
    trace, policy, baseline, fleet = chat()
    e = estimate(trace, minute, policy, baseline, fleet, JobRequest(replicas, hours, checkpoint),
                 [JobAhead(2)] * depth, days=4)
    assert e.start_median_minutes <= e.start_p90_minutes
    assert 0.0 <= e.preemption_chance <= 1.0 and e.lost_gpu_hours >= 0.0
    gpus = replicas * policy.gpus_per_replica
    mean_preemptions = sum(o.preemptions for o in e.outcomes) / len(e.outcomes)
    assert e.lost_gpu_hours <= mean_preemptions * checkpoint / 60.0 * gpus + 1e-9
    assert all(o.start_minutes >= 0 for o in e.outcomes)


def test_a_kept_estimate_reads_back_and_a_tampered_one_is_no_estimate() -> None:
    trace, policy, baseline, fleet = chat()
    request = JobRequest(2, 4.0, 30.0)
    e = estimate(trace, 10 * DAY + 600, policy, baseline, fleet, request, days=3)
    kept = parse_estimate_record(estimate_record(e, request, "2026-12-01T10:00:00Z"))
    assert kept is not None and kept["days"] == 3 and kept["hours"] == 4.0
    assert kept["partial"] is False  # the 3 days asked for: whole
    short = dataclasses.replace(e, missing=(Missing("2 of the 3 days an estimate replays", lower_bound=False),))
    assert parse_estimate_record(estimate_record(short, request, "2026-12-01T10:00:00Z"))["partial"] is True  # type: ignore[index]
    for hostile in ('{"madeAt": 1}', "[]", "x" * 5000, '{"madeAt":"t","days":-1}', "[" * 10000, None, 7,
                    '{"madeAt":"t","days":1,"horizonMinutes":1,"preemptionChance":2,"lostGpuHours":0,"hours":1,'
                    '"checkpointMinutes":1}'):
        assert parse_estimate_record(hostile) is None


@given(st.text(max_size=300))
def test_any_annotation_text_is_an_estimate_or_none(text: str) -> None:
    kept = parse_estimate_record(text)
    assert kept is None or all(isinstance(v, (str, int, float)) or v is None for v in kept.values())
