"""The return path's table decodes histogram buckets one way for the report, the console and calibrate.

The defect class: two readers of the same histogram that disagree (a quantile decoded twice, differently).
The mechanism: `policy/return_table.py` is the only decoding; report, console and calibrate call it.
Invariants, over generated observations bucketed as the gate buckets them: every service has a row for
every phase in order; `served` is the +Inf count; no quantile without a served reclaim; p50 <= p95; a
quantile lies inside the bucket that holds the true quantile of the observations (or is the highest
finite edge, marked capped, when that bucket is +Inf).
"""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offhours.scripts.policy.return_phases import PHASE_LABELS
from offhours.scripts.policy.return_table import HistogramError, phase_rows, quantile, seconds_text

EDGES = (1.0, 5.0, 15.0, 60.0, 300.0, math.inf)


def bucketed(observations: list[float]) -> list[tuple[float, float]]:
    return [(edge, float(sum(1 for o in observations if o <= edge))) for edge in EDGES]


seconds = st.floats(min_value=0.0, max_value=1000.0, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(observations=st.lists(seconds, min_size=1, max_size=40), q=st.sampled_from([0.5, 0.9, 0.95]))
def test_a_quantile_lies_in_the_bucket_of_the_true_one(observations: list[float], q: float) -> None:
    value = quantile(bucketed(observations), q)
    assert value is not None
    got, capped = value
    truth = sorted(observations)[max(0, math.ceil(q * len(observations)) - 1)]
    upper = next(e for e in EDGES if truth <= e)
    lower = max((e for e in EDGES if e < upper), default=0.0)
    if math.isinf(upper):
        assert capped and got == EDGES[-2]
    else:
        assert not capped and lower <= got <= upper, (got, truth)


@settings(max_examples=100, deadline=None)
@given(by_service=st.dictionaries(st.sampled_from(["chat", "code", "embed"]),
                                  st.dictionaries(st.sampled_from(PHASE_LABELS), st.lists(seconds, max_size=20)),
                                  max_size=3))
def test_every_service_has_every_phase_and_quantiles_only_where_served(
        by_service: dict[str, dict[str, list[float]]]) -> None:
    rows = phase_rows({s: {p: bucketed(o) for p, o in phases.items()} for s, phases in by_service.items()})
    assert [(r.service, r.phase) for r in rows] == [(s, p) for s in by_service for p in PHASE_LABELS]
    for row in rows:
        observations = by_service[row.service].get(row.phase, [])
        assert row.served == len(observations)
        assert (row.p50 is None) == (row.p95 is None) == (row.served == 0)
        if row.p50 is not None and row.p95 is not None:
            assert row.p50[0] <= row.p95[0]


def test_buckets_without_inf_are_refused_and_the_text_marks_a_lower_bound() -> None:
    with pytest.raises(HistogramError, match=r"\+Inf"):
        quantile([(1.0, 2.0)], 0.5)
    assert seconds_text(None) == "-" and seconds_text((300.0, True)) == ">300.0" and seconds_text((2.25, False)) == "2.2"
