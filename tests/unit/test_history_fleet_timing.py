"""A history replay reacts as the gate config's gate does: its reclaim check's period, or its tick without one.

`simulate --prometheus` and `tune --prometheus` replayed every gate as if it checked for a reclaim
every 15 s (the default), so a gate configured to check every 60 s, or not at all, was replayed
reacting up to 45 s sooner than it does; tune then chose on rises its gate would be slower to meet.
"""

import numpy as np
import pytest

from offhours.scripts.config.loader import parse_config
from offhours.scripts.history.read import COLUMNS, History, ServiceHistory
from offhours.scripts.simulate.engine import detect_minutes
from offhours.scripts.simulate.history import fleet_from_history

STEPS = 1440


def _history() -> History:
    service = ServiceHistory("chat", work={c: np.ones(STEPS) for c in COLUMNS},
                             pod_work={"p": {c: np.ones(STEPS) for c in COLUMNS}},
                             pod_covered={"p": np.ones(STEPS, dtype=np.bool_)}, pods=np.ones(STEPS, dtype=np.int64),
                             complete=True)
    return History(1_767_225_600.0, 60.0, STEPS, {"chat": service}, [])


@pytest.mark.parametrize("tick, check, seen_within", [(60, 0, 1.0), (60, 30, 0.5), (120, 60, 1.0), (300, 0, 5.0)])
def test_a_rise_is_seen_as_the_configured_gate_sees_it(tick: int, check: int, seen_within: float) -> None:
    config = parse_config({"tickSeconds": tick, "reclaimCheckSeconds": check,
                           "services": {"chat": {"capacity": {"requestsPerSecond": 5.0}}}})
    fleet, _, _ = fleet_from_history(config, _history())
    assert detect_minutes(fleet) == pytest.approx(seen_within)
