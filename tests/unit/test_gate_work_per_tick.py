"""The work of one tick, however many services and jobs: serving's writes first, advisory writes bounded.

Each test plays a fleet shape that made one tick's work grow with the number of parked jobs (each
a research-side write before another service's reclaim), on the in-memory cluster.
"""

from offhours.scripts.names import ANNOTATION_PARKED_FROM

from .test_gate_controller import World

WRITES = ("scale", "set-max", "write-state", "admit", "adopt", "stop", "park-copy", "delete", "annotate", "record-event",
          "note-lease")


def writes(calls: list[str]) -> list[str]:
    return [c for c in calls if c.split(" ")[0].split("-workflow")[0] in WRITES or c.startswith(WRITES)]


def crowded_world(parked: int = 200) -> World:
    """code has 4 replicas lent; chat has `parked` parked jobs too big to ever fit (they only wait)."""
    w = World()
    for i in range(2):
        w.park(f"c-{i}", svc="code", replicas=2)
    for _ in range(7):
        w.tick()
    assert w.replicas("code") == 4, w.log.getvalue()
    for i in range(parked):
        w.park(f"p-{i:03d}", svc="chat", replicas=9)
    return w


def test_another_services_reclaim_is_the_first_write_however_many_waiting_reasons_change() -> None:
    """Fault: 200 parked jobs of chat get a new waiting reason in the very tick code's load rises."""
    w = crowded_world(200)
    w.cluster.calls.clear()
    w.tick(code=150.0)
    done = writes(w.cluster.calls)
    assert done[:2] == ["write-state code", "scale code 8"], done[:5]  # the raise, after only its own intent record
    first_research = next(i for i, c in enumerate(done) if c.startswith(("annotate", "stop", "park-copy")))
    assert all(c.startswith(("scale", "set-max", "write-state")) for c in done[:first_research]), done[:first_research]
    assert w.replicas("code") == 8


def test_waiting_reasons_are_written_within_a_budget_and_the_rest_on_later_ticks() -> None:
    """Fault: hundreds of advisory writes in one tick: each tick writes at most its budget, the rest follow."""
    w = crowded_world(200)
    w.gate.advisory_writes_per_tick = 80
    written = []
    for _ in range(4):
        w.cluster.calls.clear()
        w.tick()
        written.append(sum(c.startswith("annotate") for c in w.cluster.calls))
    assert written == [80, 80, 40, 0]
    assert all("offhours.io/waiting-reason" in w.wf(f"p-{i:03d}")["metadata"]["annotations"] for i in range(200))
    assert "waiting reason(s) left for a later tick" in w.log.getvalue()


def test_a_load_change_rewrites_no_waiting_reason() -> None:
    """Fault: the reason quoted the load, so every load change rewrote every parked job."""
    w = crowded_world(30)
    w.tick()
    w.tick()
    for rps in (20.0, 30.0, 5.0):
        w.cluster.calls.clear()
        w.tick(chat=rps)
        assert not [c for c in w.cluster.calls if c.startswith("annotate")], (rps, w.log.getvalue()[-300:])
    assert "load" not in w.wf("p-000")["metadata"]["annotations"]["offhours.io/waiting-reason"]


def test_a_parked_copys_original_is_read_only_when_an_admission_may_need_it() -> None:
    """Fault: every tick fetched the original of every parked copy, even when nothing could be admitted."""
    w = World()
    w.cluster.add_workflow("research", "orig", "chat", 2, phase="Failed")
    for i in range(50):
        w.park(f"copy-{i}", replicas=2)
        w.wf(f"copy-{i}")["metadata"]["annotations"][ANNOTATION_PARKED_FROM] = "orig"
    w.cluster.calls.clear()
    w.tick()  # the load has not been low for the window yet: nothing can be admitted
    assert not [c for c in w.cluster.calls if c.startswith("get-workflow")]
    for _ in range(6):
        w.tick()
    assert w.replicas() < 8 and any(w.state(f"copy-{i}") == "admitted" for i in range(50)), w.log.getvalue()


def test_the_advisory_budget_goes_round_the_services_so_none_waits_behind_another() -> None:
    """Fault: the budget spent in config order let the first service's hundreds of reasons starve the next one's."""
    w = World()
    for svc in ("chat", "code"):
        for i in range(300):
            w.park(f"{svc}-{i:03d}", svc=svc, replicas=9)
    w.gate.advisory_writes_per_tick = 100
    for _ in range(2):
        w.tick()
    written = {svc: sum("offhours.io/waiting-reason" in w.wf(f"{svc}-{i:03d}")["metadata"]["annotations"]
                        for i in range(300)) for svc in ("chat", "code")}
    assert written == {"chat": 100, "code": 100}
