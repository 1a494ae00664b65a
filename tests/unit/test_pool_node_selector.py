"""A configured pool node selector: the pool's nodes by label, besides the nodes serving's pods run on.

Invariants: the selector is validated at load (one clear error naming the field, nothing rendered); the gate may
list nodes only when one is configured (a ClusterRole rendered with it, never without); the selected nodes are
read node by node when the research namespace's read is cut short, so a squatter on a node serving gave up is
still stopped; a selector the gate cannot read leaves the view partial, and nothing more is lent.
"""

from dataclasses import replace

import pytest

from offhours.cronworkflows.rbac import POOL_NODES_ROLE
from offhours.scripts.cluster.base import MAX_POOL_PODS, ClusterError
from offhours.scripts.config.loader import parse_config
from offhours.scripts.policy.config import ConfigError
from offhours.workflows.render import example_gate_config_text, manifests

from .test_gate_controller import World, config
from .test_pool_squatters import seat, serving_seats

SELECTOR = (("offhours.io/pool", "inference"),)


def selecting_world() -> World:
    w = World(replace(config(), pool_node_selector=SELECTOR))
    w.cluster.node_labels = {f"node-{i}": {"offhours.io/pool": "inference"} for i in range(8)}
    w.cluster.node_labels["gpu-spare"] = {"offhours.io/pool": "inference"}
    w.cluster.node_labels["cpu-0"] = {"offhours.io/pool": "batch"}
    return w


def test_the_selector_is_loaded_sorted_and_a_bad_one_is_refused_naming_the_field() -> None:
    raw = {"namespace": "serving", "workflowNamespace": "research",
           "services": {"chat": {"capacity": {"requestsPerSecond": 10}}}}
    assert parse_config(raw).pool_node_selector == ()
    picked = parse_config({**raw, "pool": {"nodeSelector": {"b.io/x": "1", "a": ""}}}).pool_node_selector
    assert picked == (("a", ""), ("b.io/x", "1"))
    for bad in ({}, {"a b": "x"}, {"a": "x" * 64}, {"a": 3}):
        with pytest.raises(ConfigError, match=r"pool\.nodeSelector"):
            parse_config({**raw, "pool": {"nodeSelector": bad}})


def test_the_gate_may_list_nodes_only_with_a_selector() -> None:
    plain = manifests()
    assert not any(m["kind"].startswith("Cluster") for m in plain.values())
    selecting = manifests(example_gate_config_text() + "\npool:\n  nodeSelector:\n    offhours.io/pool: inference\n")
    roles = {m["kind"]: m for m in selecting.values() if m["kind"].startswith("Cluster")}
    assert roles["ClusterRole"]["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]
    assert roles["ClusterRoleBinding"]["roleRef"]["name"] == POOL_NODES_ROLE
    assert roles["ClusterRoleBinding"]["subjects"][0]["name"] == "offhours-gate"


def test_a_cut_short_read_still_reads_the_selected_nodes_and_stops_a_squatter_where_serving_runs_no_pod() -> None:
    ghosts = [seat(f"ghost-{i}", "research", f"no-such-node-{i % 5}", 0) for i in range(MAX_POOL_PODS + 1)]
    for w, stopped in ((selecting_world(), True), (World(), False)):
        w.tick()
        w.cluster.seats = [*serving_seats(w), *ghosts, seat("bare", "research", "gpu-spare", 4)]
        w.tick()
        assert ("delete-pod research/bare 30" in w.cluster.calls) is stopped, w.log.getvalue()
        assert ("list-node-pods research cpu-0" in w.cluster.calls) is False  # only the pool's nodes are read


def test_a_selector_the_gate_cannot_read_lends_nothing_more() -> None:
    w = selecting_world()
    w.park("job-0", replicas=2)
    w.cluster.fail_next["list-nodes"] = [ClusterError("HTTP 403 Forbidden: nodes is forbidden")] * 100
    for _ in range(8):
        w.cluster.seats = serving_seats(w)
        w.tick()
    assert w.replicas() == 8 and w.state("job-0") != "admitted"
    assert "could not list the pool's nodes (pool.nodeSelector)" in w.log.getvalue()
    w.cluster.fail_next.clear()
    for _ in range(3):
        w.cluster.seats = serving_seats(w)
        w.tick()
    assert w.state("job-0") == "admitted", w.log.getvalue()
