"""The shipped policy defaults are the point bench/bench_frontier.py's rule chose, and that point holds the rule.

The defaults live in one place (scripts/policy/config.py's ServicePolicy). The benchmark's result file keeps
the whole figures table of its sweep; this test applies the rule (scripts/simulate/frontier.py) to it again, so a
default changed by hand, a rule changed without a new sweep, or a sweep not written back all fail here.
"""

import json
from pathlib import Path

from offhours.scripts.policy.config import Capacity, ServicePolicy
from offhours.scripts.simulate.frontier import Figures, choose_default, dominated_on
from offhours.scripts.simulate.tune import Knobs

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results" / "frontier.json"


def _table() -> tuple[dict, list[Knobs], dict[str, dict[Knobs, Figures]]]:
    doc = json.loads(RESULTS.read_text())
    points = [Knobs(**p) for p in doc["table"]["points"]]
    results = {t: {p: Figures(*row) for p, row in zip(points, doc["table"]["figures"][t])}
               for t in doc["table"]["traces"]}
    return doc, points, results


def test_the_shipped_defaults_are_the_point_the_rule_chooses_from_the_sweep() -> None:
    doc, points, results = _table()
    shipped = Knobs.of(ServicePolicy("any", Capacity(requests_per_second=1.0)))
    choice = choose_default(points, results, {p: p.headroom for p in points}, doc["shippedTraces"],
                            doc["stressBounds"])
    assert choice.point == shipped == Knobs(**doc["chosen"])
    assert choice.fallback == ()  # the rule held as written, no step fell back


def test_the_defaults_are_undominated_and_free_of_precedented_delay_on_every_shipped_trace() -> None:
    doc, points, results = _table()
    shipped = Knobs.of(ServicePolicy("any", Capacity(requests_per_second=1.0)))
    assert set(doc["shippedTraces"]) == {"m-small", "m-mid"}
    assert dominated_on(shipped, {t: results[t] for t in doc["shippedTraces"]}) == []
    for trace in doc["shippedTraces"]:
        assert results[trace][shipped].delay_with_precedent == 0, trace
    for trace, bound in doc["stressBounds"].items():  # no worse under stress than the defaults it replaced
        assert results[trace][shipped].delay_with_precedent <= bound, trace


def test_the_example_gate_config_spells_the_defaults_it_shows() -> None:
    """The example config (what operators copy) sets the swept knobs to the defaults, never to an older point."""
    import yaml

    from offhours.scripts.config.loader import service_policy

    example = Path(__file__).resolve().parents[2] / "cronworkflows" / "gate-config.example.yaml"
    raw = yaml.safe_load(example.read_text())["defaults"]
    spelt = {k: raw[k] for k in ("headroom", "trend", "lendHysteresis", "stabilizationSeconds",
                                 "volatilityHeadroomMax", "volatilityLookbackSeconds") if k in raw}
    read = service_policy("any", {"capacity": {"requestsPerSecond": 1.0}, **spelt})
    assert Knobs.of(read) == Knobs.of(ServicePolicy("any", Capacity(requests_per_second=1.0)))
    assert read.volatility_lookback_seconds == ServicePolicy("any", Capacity(1.0)).volatility_lookback_seconds
