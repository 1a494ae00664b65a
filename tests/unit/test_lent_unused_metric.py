"""Lent but unused: GPUs lowered from serving for a workflow none of whose work pods has run yet.

Invariants, in words, for any workflows (admitted or not, started before, after or never, ended or not):
- the report's GPU-hours lent but unused are the integral over time of the gauge's function
  (`lent_unused_gpus_at`), minute by minute: one definition, two readings;
- the gauge on the metrics page at the read is the GPUs of the service's workflows still lent with no work pod
  run yet (Argo's phase `Running` with its pods Pending counts: that is the case it exists for), and no other
  service's workflow, parked one or started one changes it;
- unused never exceeds lent.
"""

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offhours.scripts.pool.model import ADMITTED, RUNNING, WAITING, JobView, Pool, RunView, ServiceView
from offhours.scripts.pool.operator_metrics import MetricsState, exposition
from offhours.scripts.pool.usage import job_usages, lent_unused_gpus_at, service_lent_unused_gpus, usage_lines

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
READ = T0 + timedelta(minutes=60)


def minute(m: int | None) -> datetime | None:
    return None if m is None else T0 + timedelta(minutes=m)


# (service, replicas, state, admitted, work started, finished) in minutes after T0; the read is at minute 60
JOB = st.tuples(st.sampled_from(("chat", "code")), st.integers(1, 3), st.sampled_from((WAITING, ADMITTED, RUNNING)),
                st.none() | st.integers(0, 59), st.none() | st.integers(0, 59), st.none() | st.integers(1, 59))


def pool_of(jobs: list[tuple[str, int, str, int | None, int | None, int | None]]) -> Pool:
    runs = []
    for i, (svc, n, state, admitted, started, finished) in enumerate(jobs):
        phase = "Succeeded" if finished is not None else "Running"
        job = JobView(f"j{i}", "research", f"u{i}", f"r{i}", svc, n, state if finished is None else "succeeded", phase,
                      T0, admitted=minute(admitted), work_started=minute(started), finished=minute(finished))
        runs.append(RunView(f"r{i}", "research", svc, (job,)))
    services = (ServiceView("chat", "serving", lent=3, gpus_per_replica=4),
                ServiceView("code", "serving", lent=3, gpus_per_replica=2))
    return Pool(services, tuple(runs), READ)


@given(st.lists(JOB, max_size=6))
def test_the_reports_unused_gpu_hours_are_the_integral_of_the_gauges_function(jobs) -> None:  # type: ignore[no-untyped-def]
    pool = pool_of(jobs)
    usages = list(job_usages(pool))
    for service in ("chat", "code"):
        mine = [u for u in usages if u.job.service == service]
        integral = sum(lent_unused_gpus_at(mine, T0 + timedelta(minutes=m)) for m in range(60)) / 60
        row = next((r for r in usage_lines(pool) if r.key == service), None)
        assert (row.unused if row else 0.0) == pytest.approx(integral)
        assert (row.unused if row else 0.0) <= (row.lent if row else 0.0) + 1e-9


@given(st.lists(JOB, max_size=6))
def test_the_gauge_is_the_gpus_still_lent_with_no_work_pod_run(jobs) -> None:  # type: ignore[no-untyped-def]
    pool = pool_of(jobs)
    page = exposition(pool, MetricsState())
    for service, per_replica in (("chat", 4), ("code", 2)):
        open_now = sum(n * per_replica for svc, n, state, admitted, started, finished in jobs
                       if svc == service and state != WAITING and admitted is not None and started is None
                       and finished is None)
        assert service_lent_unused_gpus(pool, service) == open_now
        assert f'offhours_service_lent_unused_gpus{{service="{service}"}} {open_now}' in page


def test_a_work_pod_that_ran_ends_the_unused_part_and_one_before_admission_leaves_none() -> None:
    pool = pool_of([("chat", 2, RUNNING, 10, 25, None), ("chat", 1, RUNNING, 30, 5, None)])
    (late, early) = list(job_usages(pool))
    assert late.unused == (minute(10), minute(25)) and not late.unused_open
    assert early.unused == (minute(30), minute(30))
    assert next(r for r in usage_lines(pool) if r.key == "chat").unused == pytest.approx(8 * 15 / 60)
    parked = replace(pool.jobs[0], state=WAITING, phase="")
    assert list(job_usages(replace(pool, runs=(RunView("p", "research", "chat", (parked,)),))))[0].unused is None
