"""The loop's exit code says whether the last tick failed for any service (scripts/gate/loop.py).

A reclaim check's pass acts on the services that need a reclaim only; its outcomes replaced the last
tick's in the exit code, so a tick that failed for one service followed by a good check of another
ended the run 0.
"""

import io

from offhours.scripts.gate.log import Logger
from offhours.scripts.gate.loop import TickLoop

from .test_gate_controller import World


def test_a_good_reclaim_check_of_one_service_does_not_hide_the_last_ticks_failure_of_another() -> None:
    w = World()
    w.lend(2)
    del w.cluster.deployments[("serving", "code")]  # code's every tick fails from now on
    start = w.now

    def wait(_namespace: str, timeout: float) -> bool:
        w.now += max(0.0, timeout)
        w.cluster.clock = w.now
        if w.now - start >= 20.0:
            w.source.rps["chat"] = 60.0  # chat needs its replicas back: the check at +30 s reclaims
        return False

    def sleep(seconds: float) -> None:
        w.now += seconds
        w.cluster.clock = w.now

    w.cluster.wait_for_workflow_change = wait  # type: ignore[method-assign]
    loop = TickLoop(w.gate, seconds=50, log=Logger(io.StringIO()), monotonic=lambda: w.now, sleep=sleep)
    assert loop.run() == 1, w.log.getvalue()
    assert w.state("job-0") == "preempted"  # the check did act
