"""The lent-but-unused gauge: GPUs lowered from serving that no running research workflow holds.

Invariant, in words: for any lent count and any mix of job states, the gauge is the service's lent GPUs
minus the GPUs of its running workflows, never below zero, and waiting, admitted-not-running or other
services' jobs never lower it.
"""

from datetime import datetime, timezone

from hypothesis import given
from hypothesis import strategies as st

from offhours.scripts.pool.model import ADMITTED, RUNNING, WAITING, JobView, Pool, RunView, ServiceView
from offhours.scripts.pool.operator_metrics import MetricsState, exposition, lent_unused_gpus

AT = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _pool(lent: int, jobs: list[tuple[str, int, str]]) -> Pool:
    runs = tuple(RunView(f"r{i}", "research", svc, (JobView(f"j{i}", "research", f"u{i}", f"r{i}", svc, n, state,
                                                             "Running", AT),))
                 for i, (svc, n, state) in enumerate(jobs))
    return Pool((ServiceView("chat", "serving", lent=lent, gpus_per_replica=4),), runs, AT)


@given(st.integers(0, 20), st.lists(st.tuples(st.sampled_from(("chat", "code")), st.integers(1, 4),
                                              st.sampled_from((WAITING, ADMITTED, RUNNING))), max_size=6))
def test_the_gauge_is_lent_minus_running_never_below_zero(lent, jobs):  # type: ignore[no-untyped-def]
    pool = _pool(lent, jobs)
    running = sum(n for svc, n, state in jobs if svc == "chat" and state == RUNNING)
    assert lent_unused_gpus(pool.services[0], pool) == max(0, 4 * lent - 4 * running)


def test_the_gauge_is_on_the_metrics_page():
    pool = _pool(3, [("chat", 1, RUNNING), ("chat", 2, ADMITTED)])
    page = exposition(pool, MetricsState())
    assert 'offhours_service_lent_unused_gpus{service="chat"} 8' in page
