"""A tenant's many workflows annotated `parked-from` (anyone may write it) cost a tick one read each, unbounded.

Whether a parked copy may run depends on its original, read once per copy when something may be admitted. The
reads were not advisory: thousands of decoys made a lending tick as long as their reads took, and the next tick,
the one that gives serving its replicas back when load rises, came that much later.
"""

import time

import pytest

from offhours.scripts.names import ANNOTATION_PARKED_FROM
from tests.unit.test_gate_controller import World

DECOYS = 200
READ_SECONDS = 0.005


def slow_reads(w: World, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every get of a workflow takes READ_SECONDS (a busy API server); return the names read."""
    read: list[str] = []
    get = w.cluster.workflow

    def slow(namespace: str, name: str):  # type: ignore[no-untyped-def]
        read.append(name)
        time.sleep(READ_SECONDS)
        return get(namespace, name)

    monkeypatch.setattr(w.cluster, "workflow", slow)
    return read


def test_decoys_annotated_parked_from_do_not_lengthen_a_lending_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault: 200 parked workflows each naming an original made a lending tick read 200 workflows, one after another."""
    w = World()
    w.gate.advisory_budget = 0.1
    for i in range(DECOYS):
        w.park(f"decoy-{i:03d}", replicas=9)  # never fits: it only waits, and costs a read
        w.wf(f"decoy-{i:03d}")["metadata"]["annotations"][ANNOTATION_PARKED_FROM] = f"gone-{i}"
    for _ in range(5):
        w.tick()
    read = slow_reads(w, monkeypatch)
    w.tick()
    assert 0 < len(read) < DECOYS // 2, len(read)


def test_the_gates_own_copy_is_read_before_any_decoy(monkeypatch: pytest.MonkeyPatch) -> None:
    """What survives: a preempted run's copy still runs when load falls, whatever the decoys around it."""
    w = World()
    w.lend(1)
    w.tick(chat=100.0)  # a reclaim: job-0 stopped, parked again as job-0-p1
    w.wf("job-0")["status"]["phase"] = "Failed"
    w.gate.advisory_budget = 0.05
    for i in range(DECOYS):
        w.park(f"a-decoy-{i:03d}", replicas=9, priority=1000)  # first by name and by priority
        w.wf(f"a-decoy-{i:03d}")["metadata"]["annotations"][ANNOTATION_PARKED_FROM] = f"gone-{i}"
    read = slow_reads(w, monkeypatch)
    for _ in range(7):
        w.tick(chat=10.0)
    assert w.state("job-0-p1") == "admitted", w.log.getvalue()[-2000:]
    assert read.count("job-0") >= 1 and len(read) < 7 * DECOYS // 2
