"""The simulator's look-ahead looks as far ahead as the gate's: one reaction time as the gate computes it.

The fault: the gate's look-ahead (`controller.look_ahead`) plans over a reclaim check, the service's
grace cap (`maxGraceSeconds`, 120 s by default) and the cold start; the simulator's over a check, the
fleet's victim exit (`graceMinutes`, 30 s) and the cold start. On the default fleet that is 4.75 against
6.25 minutes: the trend term's horizon 5 ticks in the simulator, 7 in the gate, so the replay of "the
gate's own loop" lends a little more than the gate would (69.3% against 69.1% of the fixed reference on
the bundled trace). The fix needs the README's and bench/results' simulated figures made again.
"""

from dataclasses import replace

import numpy as np
import pytest

from offhours.scripts.policy import forecast
from offhours.scripts.simulate import engine as E
from offhours.scripts.simulate.fleet import JobSpec, parse_fleet
from offhours.scripts.simulate.trace import parse_trace


@pytest.mark.xfail(strict=True, reason="the simulator's look-ahead reaction uses the fleet's victim exit, the gate's "
                                       "uses the service's grace cap; the fix remakes the simulated figures")
def test_the_simulated_look_ahead_floor_is_the_gates() -> None:
    rows = "".join(f"{i},{60 + 6 * i},0,0\n" for i in range(120))  # a steady ramp: the trend term reads it
    trace = parse_trace("minute,requests,input_tokens,output_tokens\n" + rows)
    fleet = parse_fleet({"services": {"chat": {"baseline": 40, "capacity": {"requestsPerSecond": 1.0}}}})
    spec = fleet.services[0]
    sim = E.ServiceSim(spec, fleet, E.service_rates(trace, spec), [E.SimJob(JobSpec("job-0", "chat", 2, 1.0))])
    controller = E.GateController(sim)
    tick = fleet.tick_minutes * 60.0
    policy = spec.policy
    cold = policy.cold_start_seconds if policy.cold_start_seconds is not None else fleet.cold_start_minutes * 60.0
    gate_reaction = forecast.reaction_seconds(replace(policy, cold_start_seconds=cold), tick,
                                              float(fleet.reclaim_check_seconds))
    gate_floor = forecast.forecast_series(sim.needs, policy, tick, gate_reaction)
    assert gate_floor is not None and controller.floor is not None
    assert controller.floor == np.asarray(gate_floor, dtype=np.int64).tolist()
