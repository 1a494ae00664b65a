"""The tuner's largest rise is measured from levels that mean something, also for a service idle most of the day.

`largest_rise` leaves out rises from below `LEVEL_FLOOR` times the median need; a service idle outside
office hours has a median need of zero, so no level was below the floor: a few requests in the first
minute of the day read as a rise of +99900%, and no headroom without the volatility term was trusted.
"""

import dataclasses

import numpy as np
import pytest

from offhours.scripts.simulate.fleet import default_fleet
from offhours.scripts.simulate.trace import Trace
from offhours.scripts.simulate.tune import largest_rise

DAY = 1440


def _office(night: float, first_minute: float) -> Trace:
    minute = np.arange(3 * DAY)
    hour = (minute % DAY) // 60
    requests = np.where((hour >= 9) & (hour < 17), 3000.0, night)
    requests[minute % DAY == 9 * 60] = first_minute  # the day's first minute: a handful of requests
    return Trace(requests, requests * 600.0, requests * 250.0, "office")


def _rise(trace: Trace) -> float:
    fleet = default_fleet(trace)
    fleet = dataclasses.replace(fleet, services=fleet.services[:1])
    return largest_rise(trace, fleet.services[0], fleet).ratio


def test_a_service_idle_most_of_the_day_has_no_rise_from_a_handful_of_requests() -> None:
    """Fault: with a median need of zero, 3 requests in a minute were a level, and the day's start a +99900% rise."""
    assert _rise(_office(0.0, 3.0)) == _rise(_office(0.0, 0.0)) == 0.0


def test_a_rise_from_a_real_level_is_still_measured() -> None:
    assert _rise(_office(300.0, 300.0)) == pytest.approx(9.0)  # 300 -> 3000 requests a minute: +900%
    assert _rise(_office(0.0, 300.0)) == pytest.approx(9.0)  # from 10% of its serving level, idle or not before it
