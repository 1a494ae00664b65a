"""No decision reads another process's clock: the gate, its reclaim checks and the backstop on skewed nodes.

Each process runs on a node whose wall clock may be a day off the others' and the API server's. The
mechanism: every time offhours dates or ages anything by is the API server's (`cluster.clock.ServerClock`,
`Cluster.server_time`); a process's own monotonic clock only measures its own durations, and another
process's liveness is judged by observing its record change (`cluster.lease.LeaseObserver`).

Invariants, in words:
- skew never makes the backstop restore while the gate is live (ticking within its lease);
- skew never keeps the backstop from restoring once the gate is gone past its bound (twice its lease
  when its Lease is still held, plus the minute to the backstop's next run);
- skew never makes a reclaim check lend, nor keeps it from raising serving for a rise;
- skew never makes a candidate take a Lease whose holder keeps renewing, nor keeps it from taking one
  whose holder stopped, once it has observed the record unchanged for the lease's duration.
"""

import ast
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from offhours.scripts.backstop.restore import HELD_LEASES, run_backstop
from offhours.scripts.cluster.base import ClusterError
from offhours.scripts.cluster.clock import ServerClock, parse_http_date
from offhours.scripts.cluster.lease import LeaseObserver
from offhours.scripts.gate.controller import Gate
from offhours.scripts.gate.reclaim import ReclaimCheck
from tests.support.campaign import CLEAN, NS, TICK, World

DAY = 86_400.0
SKEWS = st.sampled_from([-DAY, -3600.0, -61.0, 0.0, 61.0, 3600.0, DAY])
ROOT = Path(__file__).resolve().parents[2]
# The modules that decide (whether to lend, to restore, to take the Lease) and date what they record.
DECIDING = ("scripts/gate/controller.py", "scripts/gate/reclaim.py", "scripts/gate/loop.py",
            "scripts/backstop/restore.py", "scripts/policy/lease.py", "scripts/policy/record.py",
            "scripts/policy/decide.py", "scripts/cluster/lease.py", "scripts/cluster/clock.py")


@contextmanager
def node_clock(skew: float) -> Iterator[None]:
    """Run the block as a process on a node whose wall clock is `skew` seconds off (`time.time`; a `datetime.now`
    in a deciding module is refused by `test_no_deciding_module_reads_a_wall_clock`)."""
    real_time = time.time
    with mock.patch("time.time", lambda: real_time() + skew):
        yield


def lending_world(gate_skew: float) -> tuple[World, Gate]:
    """A world whose gate has lent (a parked job admitted against low load), dated by the API server's clock."""
    w = World((CLEAN,))
    w.cluster.clock = 1_800_000_000.0  # the API server's time; each node's clock is off it by its skew
    w.gate = Gate(w.config, w.cluster, w.source, out=w.log, monotonic=lambda: w.cluster.clock + 7 * DAY)
    w.cluster.add_workflow(NS, "chat-job1", CLEAN, 2, created=w.cluster.clock)
    w.submitted["chat-job1"] = 2
    w.source.demand[CLEAN] = 5.0
    for _ in range(8):
        with node_clock(gate_skew):
            w.tick()
        if w.lent(CLEAN):
            break
    assert w.lent(CLEAN) == 2 and w.dep(CLEAN).replicas == 6, w.log.getvalue()
    return w, w.gate


@settings(max_examples=25, deadline=None, derandomize=True)
@given(gate_skew=SKEWS, backstop_skew=SKEWS, check_skew=SKEWS, held=st.booleans())
def test_skew_never_decides_whether_the_backstop_restores(gate_skew: float, backstop_skew: float, check_skew: float,
                                                          held: bool) -> None:
    w, gate = lending_world(gate_skew)
    checks = ReclaimCheck(gate)
    # The gate is live: it ticks every minute, the backstop runs every minute between, a check between those.
    for _ in range(6):
        with node_clock(gate_skew):
            outcomes = gate.tick()
        w.cluster.clock += TICK / 2
        checks.remember(outcomes)
        with node_clock(check_skew):
            assert checks.run() == [], "a check with the load still low acted"
        with node_clock(backstop_skew):
            done = run_backstop(w.cluster, NS, out=w.log, holder="backstop/skewed")
        assert done == [], f"the backstop restored while the gate is live: {[d.message for d in done]}"
        assert w.dep(CLEAN).replicas == 6
        w.cluster.clock += TICK / 2
    # A rise between ticks: the check raises serving, whatever its node's clock says.
    w.source.demand[CLEAN] = 70.0
    with node_clock(check_skew):
        acted = checks.run()
    assert [o.service for o in acted] == [CLEAN] and w.dep(CLEAN).replicas == 8, w.log.getvalue()[-1500:]
    # Lend again, then the gate is gone (its Lease left held, or given back): the backstop restores within the bound.
    w.source.demand[CLEAN] = 5.0
    w.cluster.add_workflow(NS, "chat-job2", CLEAN, 2, created=w.cluster.clock)
    w.submitted["chat-job2"] = 2
    for _ in range(8):
        with node_clock(gate_skew):
            w.tick()
        if w.dep(CLEAN).replicas < 8:
            break
    assert w.dep(CLEAN).replicas == 6, w.log.getvalue()[-1500:]
    record = w.record(CLEAN)
    assert record.renewed_at is not None and record.lease_seconds is not None
    if held:
        w.cluster.lease_holder, w.cluster.lease_until = "gate/dead-host/1/0", w.cluster.clock + 10 * DAY
    bound = record.renewed_at + (HELD_LEASES if held else 1.0) * record.lease_seconds + TICK
    restored_at = None
    while w.cluster.clock <= bound + TICK:
        w.cluster.clock += TICK
        with node_clock(backstop_skew):
            run_backstop(w.cluster, NS, out=w.log, holder="backstop/skewed")
        if restored_at is None and w.dep(CLEAN).replicas == 8:
            restored_at = w.cluster.clock
        if w.cluster.clock <= record.renewed_at + record.lease_seconds:
            assert w.dep(CLEAN).replicas == 6, "restored before the lease ran out"
    assert restored_at is not None and restored_at <= bound + TICK, (
        f"not restored by {bound + TICK - record.renewed_at:.0f} s after the last renewal: {w.log.getvalue()[-1500:]}")


@settings(max_examples=50, deadline=None, derandomize=True)
@given(origin=st.floats(-DAY * 365, DAY * 365), duration=st.integers(10, 120),
       renewals=st.lists(st.floats(0.1, 0.95), min_size=1, max_size=30), stopped_for=st.floats(1.05, 5.0))
def test_skew_never_lends_or_steals_a_lease(origin: float, duration: int, renewals: list[float],
                                            stopped_for: float) -> None:
    """The candidate's monotonic clock has any origin; the holder's renewTime is any time (its clock): only
    whether the record changed within the duration, as the candidate observed it, decides."""
    now = [origin]
    observer = LeaseObserver(monotonic=lambda: now[0])
    holder_clock = origin * -3.0 + 12_345.0  # the holder's renewTime: another clock altogether
    for step in renewals:  # a live holder renews within the duration: the record changes
        holder_clock += step * duration
        now[0] += step * duration
        assert not observer.expired(("gate/a", holder_clock, duration), duration), "took a Lease whose holder renews"
    record = ("gate/a", holder_clock, duration)
    now[0] += stopped_for * duration  # the holder stopped: its record stays as it was
    assert observer.expired(record, duration), "never took the Lease of a holder gone for longer than its duration"


def test_the_server_clock_is_the_date_of_an_answer_advanced_on_monotonic_time() -> None:
    mono = [500.0]
    clock = ServerClock(monotonic=lambda: mono[0])
    assert clock.now() is None
    heard = parse_http_date("Thu, 03 Dec 2026 10:31:07 GMT")
    assert heard == datetime.fromisoformat("2026-12-03T10:31:07+00:00").timestamp()
    clock.heard(heard)
    mono[0] += 30.5
    assert clock.now() == heard + 30.5
    clock.heard(heard + 30)  # an older whole second than what it knows: kept as it was
    assert clock.now() == heard + 30.5
    assert parse_http_date("yesterday") is None and parse_http_date(None) is None


def test_no_deciding_module_reads_a_wall_clock() -> None:
    """The deciding modules read no node's wall clock (`time.time`, `datetime.now`/`utcnow`, `date.today`), not even
    as a default argument: their `now` is `Cluster.server_time`. Durations of their own use `time.monotonic`."""
    found = []
    for rel in DECIDING:
        tree = ast.parse((ROOT / rel).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("time", "now", "utcnow", "today") and \
                    isinstance(node.value, ast.Name) and node.value.id in ("time", "datetime", "date"):
                found.append(f"{rel}:{node.lineno}: {node.value.id}.{node.attr}")
    assert found == [], found


# -- no server time at all: no readable Date on any answer ------------------------------------------

def _dateless(w: World) -> None:
    def server_time() -> float:
        raise ClusterError("the API server's answers carry no readable Date header")
    w.cluster.server_time = server_time  # type: ignore[method-assign]


def test_no_server_time_is_every_services_failed_tick_and_the_fail_safe_still_fires() -> None:
    """A fault stays with its object: no clock fails each service's tick (counted), never the whole tick, and after
    `failedTicksBeforeReclaim` of them the gate's own fail-safe gives serving its whole baseline back."""
    w, gate = lending_world(0.0)
    _dateless(w)
    for _ in range(w.config.failed_ticks_before_reclaim):
        outcomes = gate.tick()
        assert outcomes and all(o.failed and "no server time" in (o.error or "") for o in outcomes), outcomes
    assert w.dep(CLEAN).replicas == 8, w.log.getvalue()[-1500:]


def test_no_server_time_skips_a_reclaim_check_without_ending_the_loop() -> None:
    w, gate = lending_world(0.0)
    checks = ReclaimCheck(gate)
    checks.remember(gate.tick())
    w.source.demand[CLEAN] = 70.0
    _dateless(w)
    assert checks.run() == [] and "reclaim check skipped: no server time" in w.log.getvalue()


def test_no_server_time_backstop_names_it_and_restores_nothing_blindly() -> None:
    """The backstop cannot age a lease without the server's time: it says so (an error, no traceback) and restores
    nothing - a live gate's lease and a dead one's look alike; a live gate's own fail-safe covers it."""
    w, _ = lending_world(0.0)
    _dateless(w)
    done = run_backstop(w.cluster, NS, out=w.log, holder="backstop/dateless")
    assert [(r.error, r.value) for r in done] == [(True, None)] and "no server time" in done[0].message
    assert w.dep(CLEAN).replicas == 6


# -- the server clock follows the server both ways; one absurd Date does not move it ----------------

def test_the_server_clock_follows_a_server_clock_stepped_back() -> None:
    """One answer dated a day ahead (a skewed replica behind the load balancer, a clock stepped back) does not latch
    the clock ahead: the next readings, behind it by more than the Date's resolution, are followed."""
    mono = [0.0]
    clock = ServerClock(monotonic=lambda: mono[0])
    t = 1_800_000_000.0
    clock.heard(t)
    mono[0] = 1.0
    clock.heard(t + 1 + DAY)
    mono[0] = 2.0
    clock.heard(t + 2)
    mono[0] = 3.0
    clock.heard(t + 3)
    assert abs(clock.now() - (t + 3)) < 2  # type: ignore[operator]
    mono[0] = 4.0
    clock.heard(t + 3.5 - 60)  # the server's clock stepped back a minute: followed
    assert clock.now() == t + 3.5 - 60


def test_an_absurd_date_waits_for_a_second_reading_that_confirms_it() -> None:
    mono = [0.0]
    clock = ServerClock(monotonic=lambda: mono[0])
    t = 1_800_000_000.0
    clock.heard(t)
    mono[0] = 1.0
    clock.heard(253_402_300_799.0)  # year 9999: refused, the clock stays on the earlier readings
    assert clock.now() == t + 1
    mono[0] = 2.0
    clock.heard(t + 2 + 3 * DAY)  # far, but not confirmed by the one before it
    assert clock.now() == t + 2
    mono[0] = 3.0
    clock.heard(t + 3 + 3 * DAY)  # a second reading agrees: the server really is there
    assert clock.now() == t + 3 + 3 * DAY


def test_a_gate_that_heard_one_date_ahead_does_not_hold_off_the_backstop() -> None:
    """The gate renews its lending on its clock: had one answer latched it a day ahead, a backstop on the server's
    true time would see a lease renewed in the future and restore nothing for a day after the gate died."""
    from offhours.scripts.policy.lease import expired
    from offhours.scripts.policy.record import ServiceRecord

    mono = [0.0]
    gate_clock = ServerClock(monotonic=lambda: mono[0])
    t = 1_800_000_000.0
    gate_clock.heard(t + DAY)
    gate_clock.heard(t)
    record = ServiceRecord(deployment_uid="u", writes_to="replicas", baseline=8, applied=6,
                           renewed_at=gate_clock.now(), lease_seconds=300.0)
    assert expired(record, t + 3600.0, HELD_LEASES)


def test_the_kube_clusters_clock_ignores_one_garbage_far_future_date() -> None:
    from types import SimpleNamespace

    from offhours.scripts.cluster.kube import KubeCluster

    answers = iter(["Thu, 03 Dec 2026 10:31:07 GMT", "Fri, 31 Dec 9998 23:59:59 GMT",
                    "Thu, 03 Dec 2026 10:31:09 GMT", "Thu, 03 Dec 2026 10:31:10 GMT"])
    api = SimpleNamespace(last_response=None)
    kc = KubeCluster.__new__(KubeCluster)
    kc.api = api
    kc.retries, kc.backoff, kc.sleep = 0, 0.0, lambda s: None
    mono = [0.0]
    kc.monotonic = lambda: mono[0]
    kc.server_clock = ServerClock(kc.monotonic)

    def answer() -> bool:
        date = next(answers)
        api.last_response = SimpleNamespace(getheader=lambda name: date if name == "Date" else None)
        mono[0] += 1.0
        return True

    for _ in range(4):
        kc._call("probe", answer)
    assert abs(kc.server_time() - parse_http_date("Thu, 03 Dec 2026 10:31:10 GMT")) < 2  # type: ignore[operator]


def test_an_http_date_without_gmt_is_utc_whatever_the_pods_timezone() -> None:
    """RFC 9110: a recipient accepts asctime dates, and HTTP dates are UTC; an asctime or "-0000" date parses naive,
    and must not be read in the process's local time zone."""
    import os

    old = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    try:
        gmt = parse_http_date("Thu, 03 Dec 2026 10:31:07 GMT")
        assert parse_http_date("Thu Dec  3 10:31:07 2026") == gmt
        assert parse_http_date("Thu, 03 Dec 2026 10:31:07 -0000") == gmt
    finally:
        if old is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = old
        time.tzset()
