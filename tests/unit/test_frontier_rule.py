"""The rule that picks the policy defaults from a sweep (scripts/simulate/frontier.py)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from offhours.scripts.simulate.frontier import Figures, choose_default, dominated_on, dominates, frontier_of


def test_domination_needs_no_worse_in_all_four_and_better_in_one() -> None:
    a = Figures(0.8, 0, 10, 100)
    assert dominates(a, Figures(0.7, 0, 10, 100))
    assert not dominates(a, a)
    assert not dominates(a, Figures(0.9, 0, 10, 100))
    assert not dominates(a, Figures(0.7, 0, 5, 100))  # fewer SLO-minutes: a trade, not dominated


def test_a_point_dominated_on_one_trace_is_never_chosen_even_with_the_best_share_elsewhere() -> None:
    results = {"t1": {"lean": Figures(0.9, 0, 0, 20), "safe": Figures(0.8, 0, 0, 10)},
               "t2": {"lean": Figures(0.7, 0, 5, 20), "safe": Figures(0.75, 0, 0, 10)}}
    choice = choose_default(["lean", "safe"], results, {"lean": 0.3, "safe": 0.6}, ["t1", "t2"])
    assert dominated_on("lean", results) == ["t2"]
    assert choice.point == "safe" and choice.fallback == ()


def test_delay_outside_unprecedented_rises_disqualifies_and_delay_they_explain_does_not() -> None:
    results = {"t": {"a": Figures(0.9, 5, 0, 10, delay_without_precedent=0),
                     "b": Figures(0.8, 5, 0, 5, delay_without_precedent=5),
                     "c": Figures(0.7, 0, 0, 1)}}
    choice = choose_default(["a", "b", "c"], results, {"a": 0.3, "b": 0.4, "c": 0.9}, ["t"])
    assert choice.safe == ("b", "c") and choice.point == "b"


def test_a_stress_trace_bounds_the_delay_and_its_domination_does_not_count() -> None:
    results = {"calm": {"a": Figures(0.9, 0, 0, 10), "b": Figures(0.8, 0, 0, 5), "c": Figures(0.95, 0, 0, 20)},
               "storm": {"a": Figures(0.9, 30, 10, 10), "b": Figures(0.95, 20, 10, 5), "c": Figures(0.99, 60, 0, 0)}}
    choice = choose_default(["a", "b", "c"], results, {"a": 0.3, "b": 0.6, "c": 0.2}, ["calm"], {"storm": 30})
    assert dominated_on("a", {"storm": results["storm"]}) == ["storm"]  # by b, on a stress trace only
    assert choice.safe == ("a", "b")  # c is over the storm's bound (60 > 30)
    assert choice.point == "a"  # worst-trace share 0.9 against b's 0.8


def test_when_nothing_is_safe_the_least_delayed_on_the_shipped_traces_is_kept_and_said() -> None:
    results = {"t": {"a": Figures(0.9, 5, 0, 10), "b": Figures(0.8, 2, 0, 20)}}
    choice = choose_default(["a", "b"], results, {"a": 0.3, "b": 0.6}, ["t"])
    assert choice.point == "b" and choice.fallback and "fewest" in choice.fallback[0]


_fig = st.builds(Figures, st.floats(0, 1), st.integers(0, 3), st.integers(0, 3), st.integers(0, 3))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(_fig, min_size=4, max_size=4), min_size=1, max_size=3))
def test_the_chosen_point_is_undominated_everywhere_whenever_some_point_is(table: list[list[Figures]]) -> None:
    """Invariants: the choice is undominated on every trace if any point is; it lends at least as much on its
    worst trace as every other point the rule kept; the frontier of a trace holds every undominated point."""
    points = list(range(4))
    results = {f"t{i}": dict(zip(points, row)) for i, row in enumerate(table)}
    choice = choose_default(points, results, {p: p / 10 for p in points}, list(results))
    if any(not dominated_on(p, results) for p in points):
        assert dominated_on(choice.point, results) == []
    worst = {p: min(row[p].share for row in results.values()) for p in choice.safe}
    assert worst[choice.point] == max(worst.values())
    for row in results.values():
        front = frontier_of(row)
        assert all(not any(dominates(row[q], row[p]) for q in points) for p in front)
