"""The simulated nodes: what lent GPUs are worth to jobs of each shape, under the ReplicaSet's choice and the gate's.

Invariants, in words: whatever the lending series, a chooser never lends GPUs it does not follow (lent GPU-hours
are the series' replicas times their GPUs), no shape can use more than was lent, usable plus unused is what was
lent, and the gate's choice never leaves fewer whole free nodes' GPU-hours than the ReplicaSet's on nodes that
carry one service each (where whole nodes are the gate's only goal).
"""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from offhours.scripts.policy.config import Capacity, ServicePolicy
from offhours.scripts.simulate.fleet import Fleet, ServiceSpec
from offhours.scripts.simulate.nodes import SHAPES, pack, replay


def _fleet(baselines):  # type: ignore[no-untyped-def]
    return Fleet(services=tuple(ServiceSpec(ServicePolicy(name=f"s{i}", capacity=Capacity(1.0), gpus_per_replica=4), b, 1.0)
                                for i, b in enumerate(baselines)))


def test_two_replicas_per_node_lent_one_by_one_free_whole_nodes_only_under_the_gate():
    fleet = _fleet([8])
    layout = pack(fleet)
    lent = {"s0": np.array([0, 1, 2, 3, 4, 4])}
    rs, gate = replay(layout, lent, "replicaset"), replay(layout, lent, "gate")
    assert rs.gpu_hours_lent == gate.gpu_hours_lent == (4 + 8 + 12 + 16 + 16) / 60
    assert rs.whole_node_gpu_hours == 0.0  # one pod per node first: the set spreads its deletions
    assert gate.whole_node_gpu_hours == (8 + 8 + 16 + 16) / 60
    assert rs.shapes["1x8"].usable_gpu_hours == 0.0
    assert rs.shapes["1x4"].unused_gpu_minutes == 0.0


def test_a_half_filled_node_is_emptied_by_lowering_its_one_replica():
    # 3 replicas on two 8-GPU nodes: the second holds one replica and 4 unallocated GPUs, free as the gate reads it.
    layout = pack(_fleet([3]))
    lent = {"s0": np.array([1, 2])}
    gate, rs = replay(layout, lent, "gate"), replay(layout, lent, "replicaset")
    assert gate.whole_node_gpu_hours == 2 * 8 / 60  # the lone replica first: a whole node from the first minute
    assert gate.whole_node_gpu_hours >= rs.whole_node_gpu_hours
    assert gate.shapes["1x8"].usable_gpu_hours <= gate.gpu_hours_lent  # worth only what was lent


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=3), st.data())
def test_lent_is_usable_plus_unused_and_the_gate_frees_at_least_as_many_whole_nodes(baselines, data):  # type: ignore[no-untyped-def]
    fleet = _fleet(baselines)
    layout = pack(fleet)
    lent = {s.name: np.array(data.draw(st.lists(st.integers(0, s.baseline), min_size=1, max_size=12)))
            for s in fleet.services}
    expected = sum(float(v.sum()) * 4 for v in lent.values()) / 60
    reports = {c: replay(layout, lent, c) for c in ("replicaset", "gate")}
    for r in reports.values():
        assert abs(r.gpu_hours_lent - expected) < 1e-9
        for name in SHAPES:
            usable, unused = r.shapes[name].usable_gpu_hours, r.shapes[name].unused_gpu_minutes / 60
            assert usable <= r.gpu_hours_lent + 1e-9
            assert abs(usable + unused - r.gpu_hours_lent) < 1e-9
    if len(baselines) == 1:
        assert reports["gate"].whole_node_gpu_hours >= reports["replicaset"].whole_node_gpu_hours - 1e-9
