"""The engine's shortcuts give exactly what the long way gives: next-tick lookups, the planner's views, event levels."""

import dataclasses
import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from offhours.scripts.policy.plan import ADMITTED, PARKED, Job
from offhours.scripts.simulate import engine as E
from offhours.scripts.simulate.fleet import JobSpec, parse_fleet
from offhours.scripts.simulate.trace import parse_trace


@given(st.lists(st.booleans(), min_size=1, max_size=80))
def test_next_true_is_the_first_index_at_or_after_i_where_the_mask_holds(flags: list[bool]) -> None:
    """Invariant: at(i) is the smallest j >= i with mask[j], else len(mask); past the end, len(mask)."""
    ahead = E._NextTrue(np.array(flags))
    n = len(flags)
    for i in range(n + 2):
        assert ahead.at(i) == next((j for j in range(i, n) if flags[j]), n)


def _sim(checkpoint_minutes: float, checkpoint_seconds: float | None) -> tuple[E.ServiceSim, E.SimJob]:
    trace = parse_trace("minute,requests,input_tokens,output_tokens\n" + "".join(f"{i},60,0,0\n" for i in range(30)))
    fleet = parse_fleet({"services": {"chat": {"baseline": 10, "capacity": {"requestsPerSecond": 1.0}}}})
    job = E.SimJob(JobSpec("job-0", "chat", 2, 100.0, checkpoint_minutes, 1, 3, checkpoint_seconds))
    return E.ServiceSim(fleet.services[0], fleet, E.service_rates(trace, fleet.services[0]), [job]), job


@given(step=st.one_of(st.integers(1, 90).map(float), st.sampled_from([0.1, 1 / 3, 7.5, 12.25])),
       start=st.one_of(st.integers(0, 500).map(float), st.floats(0.0, 500.0)),
       checkpoints=st.integers(0, 20),
       gaps=st.lists(st.one_of(st.integers(0, 45).map(float), st.floats(0.0, 45.0)), min_size=1, max_size=12),
       grace=st.one_of(st.none(), st.floats(0.0, 300.0)))
def test_a_running_jobs_view_is_the_one_built_afresh_at_every_call(step: float, start: float, checkpoints: int,
                                                                   gaps: list[float], grace: float | None) -> None:
    """Invariant: whether reused, copied or built, the view equals a Job built field by field from the job's progress."""
    sim, job = _sim(step, grace)
    job.progress = job.saved(checkpoints * step)
    job.start(start)
    t = start
    for gap in gaps:
        t += gap
        progress = job.progress_at(t)
        expected = Job("job-0", "chat", 2, ADMITTED, 1, 3, progress_at=t - (progress - job.saved(progress)),
                       exit_seconds=sim.grace_minutes(job) * 60.0)
        view = sim.running_view(job, t)
        assert view == expected and hash(view) == hash(expected) and vars(view) == vars(expected)


def test_a_view_reused_between_checkpoints_and_renewed_at_one() -> None:
    sim, job = _sim(30.0, None)
    job.start(100.0)
    first = sim.running_view(job, 110.0)
    assert first.progress_at == 100.0 and sim.running_view(job, 129.0) is first  # no checkpoint yet
    renewed = sim.running_view(job, 130.0)
    assert renewed.progress_at == 130.0 and renewed is not first
    assert dataclasses.replace(first, progress_at=130.0) == renewed


@given(name=st.text(min_size=1, max_size=8), state=st.sampled_from([ADMITTED, PARKED]), replicas=st.integers(0, 8),
       before=st.floats(allow_nan=False), after=st.floats(allow_nan=False),
       exit_seconds=st.one_of(st.none(), st.floats(0.0, 600.0)))
def test_a_view_copied_with_a_new_checkpoint_is_the_replaced_job(name: str, state: str, replicas: int, before: float,
                                                                 after: float, exit_seconds: float | None) -> None:
    """Invariant: _with_checkpoint(v, m) is dataclasses.replace(v, progress_at=m): equal, same hash, same fields."""
    view = Job(name, "chat", replicas, state, 2, 5.0, progress_at=before, exit_seconds=exit_seconds, uid="u")
    copied, replaced = E._with_checkpoint(view, after), dataclasses.replace(view, progress_at=after)
    assert copied == replaced and hash(copied) == hash(replaced) and vars(copied) == vars(replaced)
    assert view.progress_at == before  # the original is untouched


@given(st.lists(st.tuples(st.floats(-5.0, 70.0), st.integers(-4, 4)), max_size=30), st.integers(0, 20))
def test_events_to_array_adds_each_change_from_the_minute_it_lands_on(events: list[tuple[float, int]],
                                                                       start: int) -> None:
    """Invariant: the level at minute m is start plus every change whose minute rounds up to at most m."""
    minutes = 60
    level = E.events_to_array(events, start, minutes)
    for m in range(minutes):
        assert level[m] == start + sum(c for at, c in events if min(minutes, max(0, math.ceil(at - 1e-9))) <= m)
