"""Counter maths of the direct path: per-series rates with Prometheus reset semantics, then sums."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offhours.scripts.metrics.load import (
    MAX_PLAUSIBLE,
    CounterSample,
    carried_samples,
    implausible,
    increase,
    load_from_pods,
    pod_of,
    series_rate,
)
from offhours.scripts.metrics.vllm import PodMetrics
from offhours.scripts.policy.capacity import Load


def pod(engines: dict[str | None, tuple[float, float, float]], running: float = 1.0) -> PodMetrics:
    return PodMetrics(
        requests_total=sum(c[0] for c in engines.values()),
        prompt_tokens_total=sum(c[1] for c in engines.values()),
        generation_tokens_total=sum(c[2] for c in engines.values()),
        running=running, waiting=0.0, kv_cache_usage=0.5, engines=len(engines), engine_counters=engines,
    )


def test_a_reset_counts_the_current_value_never_a_negative_increase() -> None:
    assert increase(130.0, 100.0) == 30.0
    assert increase(100.0, 100.0) == 0.0
    assert increase(5.0, 100.0) == 5.0  # restarted: all 5 since the restart are new
    assert increase(0.0, 100.0) == 0.0
    rates = series_rate(CounterSample(60.0, (5.0, 50.0, 0.0)), CounterSample(0.0, (100.0, 40.0, 7.0)), 300)
    assert rates == (5.0 / 60, 10.0 / 60, 0.0)


def test_one_engines_restart_is_not_read_as_load() -> None:
    # Engine 0 restarted (1000 -> 10), engine 1 went on (5000 -> 5100). Summed first, the pod would
    # drop from 6000 to 5110 and read as a reset worth 5110 requests: 85 per second instead of 1.83.
    before = {"chat-0/0": CounterSample(0.0, (1000.0, 9000.0, 900.0)),
              "chat-0/1": CounterSample(0.0, (5000.0, 8000.0, 800.0))}
    now = {"0": (10.0, 20.0, 30.0), "1": (5100.0, 8600.0, 860.0)}
    load, samples = load_from_pods({"chat-0": pod(now)}, before, 60.0, 1)
    assert load is not None and load.pods_read == 1
    assert load.request_rate == 10.0 / 60 + 100.0 / 60
    assert load.prompt_token_rate == 20.0 / 60 + 600.0 / 60
    assert load.generation_token_rate == 30.0 / 60 + 60.0 / 60
    assert samples == {"chat-0/0": CounterSample(60.0, (10.0, 20.0, 30.0)),
                       "chat-0/1": CounterSample(60.0, (5100.0, 8600.0, 860.0))}


@pytest.mark.parametrize("previous_at", [100.0, 100.5], ids=["same-clock", "clock-went-back"])
def test_a_clock_that_did_not_advance_gives_no_rate(previous_at: float) -> None:
    before = {"chat-0": CounterSample(previous_at, (10.0, 10.0, 10.0))}
    assert series_rate(CounterSample(100.0, (20.0, 20.0, 20.0)), before["chat-0"], 300) is None
    load, samples = load_from_pods({"chat-0": pod({None: (20.0, 20.0, 20.0)})}, before, 100.0, 1)
    assert load is not None and load.pods_read == 0 and load.request_rate == 0.0
    assert samples == {"chat-0": CounterSample(100.0, (20.0, 20.0, 20.0))}


def test_a_sample_older_than_the_bound_gives_no_rate() -> None:
    old = CounterSample(0.0, (10.0, 10.0, 10.0))
    assert series_rate(CounterSample(300.0, (40.0, 40.0, 40.0)), old, 300) == (0.1, 0.1, 0.1)
    assert series_rate(CounterSample(300.5, (40.0, 40.0, 40.0)), old, 300) is None
    load, _ = load_from_pods({"chat-0": pod({None: (40.0, 40.0, 40.0)})}, {"chat-0": old}, 301.0, 1, 300)
    assert load is not None and load.pods_read == 0 and not load.complete


def test_a_pod_counts_as_read_only_when_every_engine_has_a_rate() -> None:
    before = {"chat-0/0": CounterSample(0.0, (1.0, 1.0, 1.0))}  # engine 1 is new: no earlier sample
    load, samples = load_from_pods({"chat-0": pod({"0": (7.0, 7.0, 7.0), "1": (3.0, 3.0, 3.0)})}, before, 60.0, 1)
    assert load is not None and load.pods_read == 0 and load.request_rate == 0.0
    assert set(samples) == {"chat-0/0", "chat-0/1"}


@pytest.mark.parametrize("corrupt", [CounterSample(math.nan, (1.0, 1.0, 1.0)), CounterSample(0.0, (math.inf, 1.0, 1.0)),
                                     CounterSample(0.0, (-1.0, 1.0, 1.0)), CounterSample(0.0, (math.nan, 1.0, 1.0))])
def test_a_corrupt_stored_sample_gives_no_rate(corrupt: CounterSample) -> None:
    assert series_rate(CounterSample(60.0, (5.0, 5.0, 5.0)), corrupt, 300) is None
    assert carried_samples({"chat-0": corrupt}, {"chat-0"}, 60.0, 300) == {}


def test_carried_samples_keep_only_unread_expected_pods_and_young_samples() -> None:
    previous = {"a-0/0": CounterSample(100.0, (1.0, 1.0, 1.0)), "a-0/1": CounterSample(100.0, (2.0, 2.0, 2.0)),
                "a-1": CounterSample(100.0, (3.0, 3.0, 3.0)), "gone-0": CounterSample(100.0, (4.0, 4.0, 4.0)),
                "a-2": CounterSample(-250.0, (5.0, 5.0, 5.0))}
    kept = carried_samples(previous, {"a-0", "a-2"}, 160.0, 300)
    assert kept == {"a-0/0": previous["a-0/0"], "a-0/1": previous["a-0/1"]}  # a-2's sample is 410 s old


def test_a_sample_exactly_max_age_old_is_not_carried() -> None:
    # Carried only if it can still give a rate: at exactly max_age the next tick would find it too old.
    previous = {"a-0": CounterSample(0.0, (1.0, 1.0, 1.0))}
    assert carried_samples(previous, {"a-0"}, 299.5, 300) == previous
    assert carried_samples(previous, {"a-0"}, 300.0, 300) == {}


def test_an_engine_label_with_a_slash_belongs_to_its_pod() -> None:
    # The engine is a label value, free text: only the first '/' separates the pod.
    assert pod_of("chat-0/dp/1") == "chat-0"
    assert pod_of("chat-0") == "chat-0"
    previous = {"chat-0/dp/1": CounterSample(100.0, (1.0, 1.0, 1.0))}
    assert carried_samples(previous, {"chat-0"}, 160.0, 300) == previous


def test_the_default_sample_age_bound_is_300_seconds() -> None:
    old = {"chat-0": CounterSample(0.0, (10.0, 10.0, 10.0))}
    reading = {"chat-0": pod({None: (40.0, 40.0, 40.0)})}
    load, _ = load_from_pods(reading, old, 300.0, 1)
    assert load is not None and load.pods_read == 1 and load.request_rate == 0.1
    load, _ = load_from_pods(reading, old, 300.5, 1)
    assert load is not None and load.pods_read == 0 and load.request_rate == 0.0


def _load(**values: float) -> Load:
    base = {"request_rate": 1.0, "prompt_token_rate": 1.0, "generation_token_rate": 1.0, "running": 1.0,
            "waiting": 0.0, "kv_cache_usage": 0.5}
    return Load(**{**base, **values}, pods_read=1, pods_expected=1)


@pytest.mark.parametrize("values, problem", [
    ({"running": math.inf}, "running is inf"),
    ({"request_rate": math.nan}, "request_rate is nan"),
    ({"waiting": -1.0}, "waiting is negative (-1.0)"),
    ({"generation_token_rate": 1e300}, "generation_token_rate is 1e+300, beyond any real fleet (1e+12)"),
    ({"kv_cache_usage": 1.5}, "kv_cache_usage is 1.5, above 1 (100 %)"),
    ({"kv_cache_usage": math.nan}, "kv_cache_usage is nan"),
    ({"prompt_token_rate": -2.0}, "prompt_token_rate is negative (-2.0)"),
    ({"age_seconds": math.nan}, "the data's age is NaN"),
])
def test_implausible_loads_are_named(values: dict[str, float], problem: str) -> None:
    assert implausible(_load(**values)) == problem


def test_plausible_load_passes() -> None:
    assert implausible(_load(request_rate=MAX_PLAUSIBLE, kv_cache_usage=1.0)) is None


# The property: random series (engines of one pod), each a monotone counter of the work really done,
# exposed as the count since the engine's last restart. A restart happens right after a tick, so all
# work of the next interval is after it. Invariants, per series and interval:
# - the computed increase equals the true work done when there was no restart, or when the restart is
#   visible (the exposed count went down); it is never negative;
# - a restart that already passed the old count is invisible (to Prometheus too): the increase is then
#   the work minus the old count, still >= 0;
# - the service's rate is the sum of the series' rates, so one series' restart changes its own share only.
_series = st.lists(
    st.lists(st.tuples(st.integers(0, 1000), st.booleans()), min_size=1, max_size=8),
    min_size=1, max_size=4,
).filter(lambda s: len({len(x) for x in s}) == 1)


@settings(max_examples=300, deadline=None)
@given(_series, st.lists(st.integers(1, 300), min_size=8, max_size=8))
def test_property_increase_per_series_equals_the_work_done(series: list[list[tuple[int, bool]]],
                                                           gaps: list[int]) -> None:
    ticks = len(series[0])
    exposed = [0.0] * len(series)
    now, previous = 0.0, {}
    # A first sample of every series, with nothing done yet.
    _, previous = load_from_pods({"p": pod({str(i): (0.0, 0.0, 0.0) for i in range(len(series))})}, {}, now, 1)
    for t in range(ticks):
        dt = float(gaps[t])
        now += dt
        wanted, old = [], list(exposed)
        for i, steps in enumerate(series):
            work, restarted = steps[t]
            exposed[i] = float(work) if restarted else exposed[i] + work
            visible = not restarted or exposed[i] < old[i]
            wanted.append(float(work) if visible else float(work) - old[i])
        counters = {str(i): (v, 2 * v, 3 * v) for i, v in enumerate(exposed)}
        rates = [series_rate(CounterSample(now, counters[str(i)]), previous[f"p/{i}"], 300) for i in range(len(series))]
        load, previous = load_from_pods({"p": pod(counters)}, previous, now, 1)
        assert load is not None and load.pods_read == 1
        for i, rate in enumerate(rates):
            assert rate == (wanted[i] / dt, 2 * wanted[i] / dt, 3 * wanted[i] / dt)
            assert wanted[i] >= 0
        assert load.request_rate == pytest.approx(sum(w / dt for w in wanted), rel=1e-12, abs=1e-12)
        assert load.prompt_token_rate == pytest.approx(sum(2 * w / dt for w in wanted), rel=1e-12, abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 10**9), st.integers(0, 10**6)), min_size=2, max_size=5),
       st.integers(0, 4), st.integers(0, 10**6), st.integers(1, 300))
def test_property_a_reset_changes_only_its_own_series_rate(engines: list[tuple[int, int]], which: int,
                                                             after_restart: int, dt: int) -> None:
    which %= len(engines)
    before = {f"p/{i}": CounterSample(0.0, (float(v), float(v), float(v))) for i, (v, _) in enumerate(engines)}
    grown = {str(i): (float(v + d),) * 3 for i, (v, d) in enumerate(engines)}
    restarted = {**grown, str(which): (float(after_restart),) * 3}
    calm, _ = load_from_pods({"p": pod(grown)}, before, float(dt), 1)
    reset, _ = load_from_pods({"p": pod(restarted)}, before, float(dt), 1)
    assert calm is not None and reset is not None
    own_before = engines[which][1] / dt
    own_after = increase(float(after_restart), float(engines[which][0])) / dt
    assert own_after >= 0
    assert reset.request_rate - calm.request_rate == pytest.approx(own_after - own_before, rel=1e-9, abs=1e-9)
    for i in range(len(engines)):
        if i != which:
            got = series_rate(CounterSample(float(dt), restarted[str(i)]), before[f"p/{i}"], 300)
            assert got == (engines[i][1] / dt,) * 3
