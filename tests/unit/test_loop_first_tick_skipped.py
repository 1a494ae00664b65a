"""A gate run whose first tick finds the Lease held elsewhere (the previous run's last tick, the backstop's pass).

The reclaim checks start from what a tick left: a run whose first tick was skipped has nothing to
check from, and waiting a whole `tickSeconds` for the next tick left serving unwatched for that
long at every such hand-over. The fault played: the Lease held for the first seconds of a new run,
then a rise; what must survive: the rise is given back within a check period or two, not a tick.
"""

import io

from offhours.scripts.gate.controller import Gate
from offhours.scripts.gate.log import Logger
from offhours.scripts.gate.loop import TickLoop

from .test_gate_controller import World


def test_a_first_tick_skipped_for_the_lease_is_tried_again_at_the_next_check_not_a_tick_later() -> None:
    w = World()
    w.lend(2)  # the previous run lent 4 of chat's 8 replicas
    start = w.now
    # The new run's gate: another process (another holder); the Lease is still another's for 10 s.
    gate = Gate(w.gate.config, w.cluster, w.source, clock=lambda: w.now, out=io.StringIO(),
                monotonic=lambda: w.now)
    w.cluster.lease_holder, w.cluster.lease_until = "backstop/restore", start + 10.0
    reclaimed_at: list[float] = []

    def wait(namespace: str, timeout: float) -> bool:
        w.now += max(0.0, timeout)
        w.cluster.clock = w.now
        if w.now >= start + 20.0:
            w.source.rps["chat"] = 60.0  # needs all 8, 20 s into the run
        return False

    def sleep(seconds: float) -> None:
        w.now += seconds
        w.cluster.clock = w.now

    def raise_serving(dep, observed, at_least):  # type: ignore[no-untyped-def]
        if at_least == 8 and not reclaimed_at:
            reclaimed_at.append(w.now)
        return original(dep, observed, at_least)

    original = w.cluster.raise_serving
    w.cluster.raise_serving = raise_serving  # type: ignore[method-assign]
    w.cluster.wait_for_workflow_change = wait  # type: ignore[method-assign]
    period = gate.config.reclaim_check_seconds
    loop = TickLoop(gate, seconds=gate.config.tick_seconds - 1, log=Logger(io.StringIO()),
                    monotonic=lambda: w.now, sleep=sleep)
    loop.run()
    assert w.replicas() == 8 and reclaimed_at, "the rise 20 s into the run was given back within the run"
    assert reclaimed_at[0] <= start + 20.0 + 2 * period, (
        f"reclaimed {reclaimed_at[0] - start:.0f} s into the run: the checks waited for a whole tick")
