"""A history replay puts each service's lending window at the hours it had: the history's start is a moment.

The simulator lent around the clock whatever a service's schedule said, so `simulate --prometheus`
(and `tune`) reported lending the gate would never do for a service that lends only at night.
"""

from datetime import datetime, timezone

import numpy as np

from offhours.scripts.config.loader import parse_config
from offhours.scripts.history.read import COLUMNS, History, ServiceHistory
from offhours.scripts.simulate.engine import lending_minutes
from offhours.scripts.simulate.history import fleet_from_history

START = datetime(2026, 7, 1, tzinfo=timezone.utc).timestamp()  # a UTC midnight; 02:00 in Berlin (summer time)


def test_the_window_falls_at_its_own_hours_in_its_time_zone() -> None:
    steps = 1440
    config = parse_config({"services": {"chat": {
        "capacity": {"requestsPerSecond": 5.0},
        "schedule": {"mode": "window", "start": "22:00", "end": "06:00", "timezone": "Europe/Berlin"}}}})
    service = ServiceHistory("chat", work={c: np.ones(steps) for c in COLUMNS},
                             pod_work={"p": {c: np.ones(steps) for c in COLUMNS}},
                             pod_covered={"p": np.ones(steps, dtype=np.bool_)}, pods=np.ones(steps, dtype=np.int64),
                             complete=True)
    fleet, _, _ = fleet_from_history(config, History(START, 60.0, steps, {"chat": service}, []))
    assert fleet.start_time == START
    allowed = lending_minutes(fleet.services[0], fleet, np.arange(steps))
    assert allowed is not None
    # 22:00-06:00 in Berlin is 20:00-04:00 UTC in July: minutes 0-239 and 1200-1439 of a UTC day.
    hours = np.flatnonzero(allowed[::60]).tolist()
    assert hours == [0, 1, 2, 3, 20, 21, 22, 23]
