"""The dashboard's reclaim-to-ready panel shows the measured return against the bound the gate plans with."""

import ast
import json
import math
import operator
import re
from pathlib import Path

from offhours.scripts.config.loader import parse_config
from offhours.scripts.policy.forecast import reaction_seconds
from offhours.scripts.pool.operator_metrics import Histogram

DASHBOARD = Path(__file__).resolve().parents[2] / "monitoring" / "offhours-dashboard.json"
BOUND_PARTS = ("check_seconds", "victim_grace_seconds", "cold_start_seconds", "slack_seconds")
_OPS = {ast.Add: operator.add, ast.Mult: operator.mul}


def _panel(dashboard: dict) -> dict:
    [panel] = [p for p in dashboard["panels"]
               if any("offhours_reclaim_ready_seconds_bucket" in t["expr"] for t in p["targets"])]
    return panel


def _arithmetic(text: str) -> float:
    """Evaluate sums and products of numbers, nothing else (the bound's expression with its variables filled in)."""
    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](value(node.left), value(node.right))
        raise ValueError(f"not plain arithmetic: {ast.dump(node)}")
    return value(ast.parse(text, mode="eval").body)


def _bound_expr(panel: dict) -> str:
    [target] = [t for t in panel["targets"] if "offhours_reclaim" not in t["expr"]]
    match = re.fullmatch(r"vector\((.*)\)", target["expr"])
    assert match, target["expr"]
    return match.group(1)


def test_the_bound_is_drawn_beside_the_measured_p90_from_its_four_parts() -> None:
    """Invariant: the bound line is 2 checks + grace + cold start + slack, each part a variable an operator sets."""
    panel = _panel(json.loads(DASHBOARD.read_text()))
    expr = _bound_expr(panel)
    assert sorted(re.findall(r"\$(\w+)", expr)) == sorted(BOUND_PARTS)
    probe = {name: 10.0 ** i for i, name in enumerate(BOUND_PARTS)}  # each part distinguishable in the sum
    filled = re.sub(r"\$(\w+)", lambda m: repr(probe[m.group(1)]), expr)
    assert _arithmetic(filled) == 2 * 1 + 10 + 100 + 1000
    assert "bound" in panel["title"].lower() and panel["fieldConfig"]["defaults"]["unit"] == "s"


def test_the_variables_default_to_the_gate_configs_defaults() -> None:
    """With its defaults, the line is the gate's own reaction time (check period twice, grace cap, cold start) + slack."""
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    defaults = {name: float(variables[name]["query"]) for name in BOUND_PARTS}
    assert all(variables[name]["type"] == "textbox" and variables[name]["current"]["value"] == variables[name]["query"]
               for name in BOUND_PARTS)
    config = parse_config({"services": {"chat": {"capacity": {"requestsPerSecond": 10}}}})
    policy = config.service("chat")
    assert defaults["check_seconds"] == config.reclaim_check_seconds
    assert defaults["victim_grace_seconds"] == policy.max_grace_seconds
    assert defaults["slack_seconds"] > 0
    filled = re.sub(r"\$(\w+)", lambda m: repr(defaults[m.group(1)]), _bound_expr(_panel(dashboard)))
    planned = reaction_seconds(policy, config.tick_seconds, detect_seconds=2 * config.reclaim_check_seconds)
    assert _arithmetic(filled) == planned + defaults["slack_seconds"]


def _histogram_quantile(q: float, cumulative: list[tuple[float, int]]) -> float:
    """Prometheus' histogram_quantile over one series' cumulative buckets (le, count), +Inf last."""
    total = cumulative[-1][1]
    rank = q * total
    lower, below = 0.0, 0
    for le, count in cumulative:
        if count >= rank:
            if math.isinf(le):
                return lower  # the quantile lies in the +Inf bucket: Prometheus answers the highest finite bound
            return lower + (le - lower) * (rank - below) / (count - below)
        lower, below = le, count
    return lower


def test_returns_just_inside_the_default_bound_read_inside_it_and_just_past_it_read_past_it() -> None:
    """The fault: the bucket straddling the default bound (300-420 s around 400 s) drew every return in it as
    408 s, so returns of 395 s read as over the bound and returns of 405 s as anywhere inside that bucket.
    What must hold: on the default bound, the panel's p90 is on the side of the bound the returns are."""
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    defaults = {name: float(variables[name]["query"]) for name in BOUND_PARTS}
    bound = _arithmetic(re.sub(r"\$(\w+)", lambda m: repr(defaults[m.group(1)]), _bound_expr(_panel(dashboard))))
    for seconds, inside in ((bound - 5.0, True), (bound, True), (bound + 5.0, False)):
        hist = Histogram()
        for _ in range(20):
            hist.observe(seconds)
        cumulative = [*zip(hist.buckets, hist.counts), (math.inf, hist.count)]
        p90 = _histogram_quantile(0.9, cumulative)
        assert (p90 <= bound) == inside, (seconds, p90, bound)
