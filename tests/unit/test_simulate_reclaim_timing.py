"""The simulator acts on a reclaim when the gate's reclaim check would see the rise: never before the rise.

The fault played: a fleet ticking every 5 minutes, a step in the last minute of a tick's window. The
engine acted on every reclaim `tick - check` before the tick that decided it, so 4.75 minutes before
that tick: here 3.75 minutes before the rise happened, and capacity was back 0.75 minutes after a
rise the gate needs a check, a grace and a cold start to answer (4.75 minutes): delay-minutes
under-counted without a word. What must hold: the stop comes a check period after the first minute
whose load needs it, and capacity is back no sooner than the reaction time after the rise.
"""

import pytest

from offhours.scripts.simulate import engine as E
from offhours.scripts.simulate.fleet import JobSpec, parse_fleet
from offhours.scripts.simulate.trace import parse_trace


def _replay(tick: int, rise: int) -> E.ServiceSim:
    rows = "".join(f"{i},{60 if i < rise else 540},0,0\n" for i in range(200))
    trace = parse_trace("minute,requests,input_tokens,output_tokens\n" + rows)
    fleet = parse_fleet({"tickMinutes": tick,
                         "services": {"chat": {"baseline": 10, "capacity": {"requestsPerSecond": 1.0}}}})
    spec = fleet.services[0]
    sim = E.ServiceSim(spec, fleet, E.service_rates(trace, spec), [E.SimJob(JobSpec("job-0", "chat", 6, 100.0))])
    sim.run(E.GateController(sim))
    return sim


@pytest.mark.parametrize(("tick", "rise"), [(5, 124), (5, 121), (5, 120), (3, 125), (1, 124)])
def test_a_reclaim_is_acted_on_a_check_after_the_rise_never_before_it(tick: int, rise: int) -> None:
    sim = _replay(tick, rise)
    check = sim.fleet.reclaim_check_seconds / 60.0
    stops = [at for at, change in sim.lent_events if change < 0]
    assert stops, sim.lent_events
    assert stops[0] == pytest.approx(rise + check), f"stopped at {stops[0]}, the rise at {rise}"
    back = [at for at, change in sim.capacity_events if change > 0 and at > rise]
    assert back and back[0] >= rise + E.reaction_minutes(sim.spec, sim.fleet) - 1e-9, sim.capacity_events
