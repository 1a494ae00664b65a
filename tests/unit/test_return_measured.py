"""The fleet file's grace and cold start from the gate's phase buckets (scripts/simulate/return_measured.py).

Invariants: a quantile lies inside the bucket that holds its rank (never below the previous edge nor above
its own), is non-decreasing in q, and one in the +Inf bucket is the last finite edge, said to be a lower
bound; too few reclaims or a phase never read is one error naming it (the fleet file is not written).
"""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offhours.scripts.simulate.gpu_times import GpuCheckError
from offhours.scripts.simulate.return_measured import measured_return, quantile

EDGES = (1.0, 5.0, 30.0, 120.0, math.inf)


@given(st.lists(st.integers(0, 20), min_size=5, max_size=5), st.floats(0.01, 0.99), st.floats(0.01, 0.99))
def test_a_quantile_lies_in_the_bucket_of_its_rank_and_grows_with_q(counts: list[int], q1: float, q2: float) -> None:
    cumulative = [float(sum(counts[:i + 1])) for i in range(5)]
    buckets = list(zip(EDGES, cumulative))
    low, high = sorted((q1, q2))
    a, b = quantile(buckets, low), quantile(buckets, high)
    if cumulative[-1] == 0:
        assert a is None and b is None
        return
    assert a is not None and b is not None and a[0] <= b[0] + 1e-9
    rank = high * cumulative[-1]
    index = next(i for i, c in enumerate(cumulative) if c >= rank)
    lower = 0.0 if index == 0 else EDGES[index - 1]
    assert b[1] == math.isinf(EDGES[index])
    assert lower - 1e-9 <= b[0] <= (EDGES[index] if not b[1] else lower) + 1e-9


def phases(exit_counts: list[float], served: float) -> dict[str, list[tuple[float, float]]]:
    even = [(1.0, 0.0), (5.0, served), (30.0, served), (120.0, served), (math.inf, served)]
    return {"decision": even, "victims_exit": list(zip(EDGES, exit_counts)), "scheduling": even, "start": even,
            "serving": even, "total": even}


def test_a_victim_exit_past_the_last_edge_is_written_as_that_edge_and_said_to_be_at_least() -> None:
    times = measured_return(phases([0, 0, 0, 0, 6], 6), q=0.95)
    assert times.grace_minutes == 2.0 and "at least this" in times.notes["graceMinutes"]
    assert times.cold_start_minutes == pytest.approx(3 * (1 + 4 * 0.95) / 60)
    assert times.wake_minutes is None


def test_too_few_reclaims_or_a_phase_never_read_is_one_error() -> None:
    with pytest.raises(GpuCheckError, match="not enough evidence: 3 served reclaim"):
        measured_return(phases([0, 3, 3, 3, 3], 3))
    missing = phases([0, 6, 6, 6, 6], 6)
    del missing["start"]
    with pytest.raises(GpuCheckError, match="no start phase"):
        measured_return(missing)
