"""The capacity model, dimension by dimension: every modelled rate can set the need, none is ignored."""

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from offhours.scripts.policy.capacity import Load, replicas_needed, replicas_with_headroom, required_replicas
from offhours.scripts.policy.config import Capacity, ServicePolicy

ALL = Capacity(requests_per_second=10, prompt_tokens_per_second=1000, generation_tokens_per_second=500)
POLICY = ServicePolicy("chat", ALL, headroom=0.25, min_replicas=1, max_waiting_per_replica=5)


def load(rps: float = 0.0, prompt: float = 0.0, gen: float = 0.0, waiting: float = 0.0, read: int = 4,
         expected: int = 4) -> Load:
    return Load(rps, prompt, gen, running=0.0, waiting=waiting, kv_cache_usage=0.0, pods_read=read,
                pods_expected=expected)


@pytest.mark.parametrize(
    "rps, prompt, gen, need",
    [
        (20.0, 1000.0, 500.0, 2.0),   # requests: 20 / 10
        (10.0, 6000.0, 500.0, 6.0),   # prompt tokens: 6000 / 1000
        (10.0, 1000.0, 2500.0, 5.0),  # generation tokens: 2500 / 500
        (0.0, 0.0, 0.0, 0.0),
    ],
)
def test_the_largest_dimension_sets_the_need(rps: float, prompt: float, gen: float, need: float) -> None:
    assert replicas_needed(rps, prompt, gen, ALL) == need


def test_prompt_tokens_alone_can_set_the_need() -> None:
    prompt_only = Capacity(prompt_tokens_per_second=2000)
    assert replicas_needed(0.0, 7000.0, 10**6, prompt_only) == 3.5  # unmodelled dimensions do not count
    # 6000 prompt tokens/s at 1000 per replica: 6 x 1.25 headroom = 7.5 -> 8, whatever requests say.
    assert required_replicas(load(rps=10, prompt=6000), POLICY, in_service=8) == 8


def test_needs_for_a_whole_trace_at_once() -> None:
    need = replicas_needed(np.array([10.0, 0.0, 40.0]), np.array([3000.0, 0.0, 1000.0]), np.array([0.0, 0.0, 500.0]), ALL)
    assert need.tolist() == [3.0, 0.0, 4.0]


def test_no_modelled_dimension_needs_nothing() -> None:
    assert replicas_needed(100.0, 10**5, 10**5, Capacity()) == 0.0


@given(rps=st.floats(0, 1e4), prompt=st.floats(0, 1e7), gen=st.floats(0, 1e7))
def test_need_is_the_maximum_over_the_modelled_dimensions(rps: float, prompt: float, gen: float) -> None:
    # Invariant: the need is exactly the most demanding dimension, never a mix or a sum of them.
    assert replicas_needed(rps, prompt, gen, ALL) == max(rps / 10, prompt / 1000, gen / 500)


@pytest.mark.parametrize(
    "read, expected, complete",
    [(4, 4, True), (5, 4, True), (3, 4, False), (0, 0, False), (2, 0, False)],
)
def test_complete_only_when_every_expected_pod_was_read_and_some_were_expected(read: int, expected: int,
                                                                            complete: bool) -> None:
    assert load(read=read, expected=expected).complete is complete


@pytest.mark.parametrize(
    "waiting, in_service, expected",
    [
        (6.0, 1, 2),    # 6 waiting > 5 per replica x 1: one more than the one in service
        (5.0, 1, 1),    # exactly 5 per replica is not a shortage
        (16.0, 3, 4),
        (15.0, 3, 1),
    ],
)
def test_queue_guard_adds_one_replica_to_those_in_service(waiting: float, in_service: int, expected: int) -> None:
    assert required_replicas(load(waiting=waiting), POLICY, in_service) == expected


def test_queue_guard_needs_a_replica_in_service_to_measure_against() -> None:
    no_minimum = replace(POLICY, min_replicas=0)
    assert required_replicas(load(waiting=3), no_minimum, in_service=0) == 0
    assert required_replicas(load(waiting=3), no_minimum, in_service=1) == 0
    assert required_replicas(load(waiting=6), no_minimum, in_service=1) == 2


_RATE = st.one_of(st.floats(min_value=0.0, max_value=1e12), st.sampled_from([math.nan, math.inf, 0.0]))


@given(rates=st.lists(st.tuples(_RATE, _RATE, _RATE), min_size=1, max_size=8),
       headroom=st.floats(min_value=0.0, max_value=3.0), min_replicas=st.integers(0, 4),
       dims=st.tuples(st.booleans(), st.booleans(), st.booleans()))
def test_one_tick_and_a_whole_trace_take_the_same_replicas(rates: list[tuple[float, float, float]], headroom: float,
                                                         min_replicas: int, dims: tuple[bool, bool, bool]) -> None:
    """The gate computes one tick's need from floats, the simulator a whole trace's from arrays: the
    same numbers, NaN included (a NaN need is never a number of replicas), whichever dimensions are modelled."""
    cap = Capacity(*(value if on else None for value, on in zip((10.0, 1000.0, 500.0), dims)))
    policy = replace(POLICY, capacity=cap, headroom=headroom, min_replicas=min_replicas)
    columns = [np.array(column) for column in zip(*rates)]
    with np.errstate(invalid="ignore"):  # an infinite rate times 0 is NaN, as intended
        need_array = replicas_needed(*columns, cap)
        whole_array = replicas_with_headroom(need_array, policy)
    for k, (rps, prompt, gen) in enumerate(rates):
        need = replicas_needed(rps, prompt, gen, cap)
        assert need == need_array[k] or (math.isnan(need) and math.isnan(need_array[k]))
        if math.isfinite(need_array[k]):
            assert replicas_with_headroom(need, policy) == whole_array[k]
        else:
            with pytest.raises((ValueError, OverflowError)):
                int(replicas_with_headroom(need, policy))
