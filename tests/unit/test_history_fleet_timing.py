"""A history replay runs as the gate config's gate does: its reclaim check (or its tick), its replicas as counted.

`simulate --prometheus` and `tune --prometheus` replayed every gate as if it checked for a reclaim
every 15 s (the default), so a gate configured to check every 60 s, or not at all, was replayed
reacting up to 45 s sooner than it does; tune then chose on rises its gate would be slower to meet.
"""

import numpy as np
import pytest

from offhours.scripts.config.loader import parse_config
from offhours.scripts.history.read import COLUMNS, NO_POD, History, ServiceHistory
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


def test_replicas_of_series_without_a_pod_label_are_not_counted_as_one() -> None:
    """All of a service's unlabelled series read as one pod: its replicas are not known unless given."""
    config = parse_config({"services": {"chat": {"capacity": {"requestsPerSecond": 5.0}}}})
    history = _history()
    service = history.services["chat"]
    service.pod_work = {NO_POD: service.pod_work["p"]}
    service.pod_covered = {NO_POD: service.pod_covered["p"]}
    fleet, _, notes = fleet_from_history(config, history)
    assert fleet.services == () and any("--replicas chat=" in n for n in notes), notes
    fleet, _, _ = fleet_from_history(config, history, {"chat": 6})
    assert fleet.services[0].baseline == 6
