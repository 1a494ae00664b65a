"""The estimate's queue holds only what the gate would admit ahead of the request (issue 33 §6: "not within the
horizon" for jobs the sandbox admitted in 25 s).

Class: an estimate input that is not what the gate acts on. A parked job the gate never admits (its run id cannot
be trusted, or the gate wrote `not admitted: ...` with position 0: a grace above the cap, a missing template) sits
at the head of every replay, holding replicas it will never hold, so a request behind it "never starts". Mechanism:
`queue_ahead` reads each job as the gate does and leaves out those the gate keeps outside its queue for a problem.
Invariant in words: adding jobs the gate never admits changes no estimate input.
"""

from hypothesis import given, settings
from hypothesis import strategies as st

from offhours.scripts.console.request_pages import queue_ahead
from offhours.scripts.policy.estimate import JobAhead
from tests.support.pool_fixture import ts, workflow
from tests.support.tenant_pool import pool_of


def queued(name: str, replicas: int, priority: int = 0) -> dict:
    return workflow(name, "chat", replicas, "parked", created=30, suspend=True,
                    annotations={"offhours.io/priority": str(priority)})


def refused_by_the_gate(name: str, replicas: int) -> dict:
    return workflow(name, "chat", replicas, "parked", created=40, suspend=True,
                    annotations={"offhours.io/waiting-reason": "not admitted: its pods' grace period is set in a "
                                 "template it runs (mine: 1200 s), above chat's maxGraceSeconds 120",
                                 "offhours.io/queue-position": "0"})


def running(name: str, replicas: int) -> dict:
    return workflow(name, "chat", replicas, "admitted", "Running", created=60, started=50,
                    annotations={"offhours.io/admitted-at": ts(55)})


def test_a_job_the_gate_never_admits_is_not_ahead_of_a_request() -> None:
    ahead = queue_ahead(pool_of(running("r1", 1), queued("q1", 2), refused_by_the_gate("never", 8)), "chat", 0)
    assert sorted(ahead, key=lambda j: (j.running, j.replicas)) == [JobAhead(2, 0), JobAhead(1, 0, running=True)]


@settings(max_examples=60, deadline=None)
@given(live=st.lists(st.tuples(st.booleans(), st.integers(1, 4)), max_size=5),
       never=st.lists(st.integers(1, 16), min_size=1, max_size=5))
def test_jobs_the_gate_never_admits_change_no_estimate_input(live: list[tuple[bool, int]], never: list[int]) -> None:
    jobs = [running(f"r{i}", n) if is_running else queued(f"q{i}", n) for i, (is_running, n) in enumerate(live)]
    refused = [refused_by_the_gate(f"never{i}", n) for i, n in enumerate(never)]
    key = lambda j: (j.running, j.replicas, j.priority)  # noqa: E731
    assert sorted(queue_ahead(pool_of(*jobs, *refused), "chat", 0), key=key) == \
        sorted(queue_ahead(pool_of(*jobs), "chat", 0), key=key)
