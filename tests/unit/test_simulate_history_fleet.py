"""`simulate --prometheus --config`: the replayed fleet's return path is the gate config's, not the simulator's default.

The fault played: a gate configured without reclaim checks (`reclaimCheckSeconds: 0`, a rise waits for
the next tick) or with slower ones. The fleet built from the gate config took the simulator's default
15 s check whatever the config said, so the replay of that gate saw every rise 15 s after it instead of
at the next tick: its delay-minutes were those of another gate. (The console's request estimate already
read the config's check period.) What must hold: the replayed fleet detects a rise as the configured gate does.
"""

import numpy as np
import pytest

from offhours.scripts.config.loader import parse_config
from offhours.scripts.history.read import History, ServiceHistory
from offhours.scripts.simulate.engine import detect_minutes
from offhours.scripts.simulate.history import fleet_from_history


@pytest.mark.parametrize(("check", "tick", "detect"), [(0, 60, 1.0), (30, 60, 0.5), (15, 120, 0.25), (60, 60, 1.0)])
def test_the_replayed_fleet_sees_a_rise_when_the_configured_gate_would(check: int, tick: int, detect: float) -> None:
    config = parse_config({"tickSeconds": tick, "reclaimCheckSeconds": check,
                           "services": {"chat": {"capacity": {"requestsPerSecond": 10}}}})
    steps = 60
    work = {c: np.full(steps, 60.0) for c in ("requests", "prompt_tokens", "generation_tokens")}
    history = History(0.0, 60.0, steps, {"chat": ServiceHistory("chat", work, pods=np.full(steps, 4),
                                                                complete=True)}, [])
    fleet, traces, notes = fleet_from_history(config, history)
    assert list(traces) == ["chat"] and not notes
    assert detect_minutes(fleet) == detect, (fleet.reclaim_check_seconds, fleet.tick_minutes)
