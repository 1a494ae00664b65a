"""A measured release the record's reader refuses must never be written: it would wipe the service's whole record.

`ServiceRecord.from_json` drops a record whose releases exceed a day (a tampered one is no memory), while
`measured` stored whatever `release_seconds` gave: a pod's `finishedAt` read from a node whose clock runs
ahead, or a stop still being measured when the gate comes back after a long outage (its pods gone, the
release dated `now`). One job's pod status then cost the service its baseline, its hysteresis and its
record of what it lent.
"""

from offhours.scripts.policy.plan import ADMITTED, Job
from offhours.scripts.policy.release import OVERDUE_SECONDS, PodExit, measured, release_seconds, with_stops

from .test_gate_controller import World, config

DAY = 86_400.0


def test_a_finish_dated_after_now_by_a_skewed_node_clock_is_dated_now() -> None:
    """Fault: a node clock two days ahead made a 60-second release read as two days."""
    assert release_seconds(1000.0, [PodExit("p", 900.0, 1000.0 + 2 * DAY)], now=1060.0) == 60.0


def test_a_release_found_only_after_a_long_gate_outage_is_not_measured() -> None:
    """Fault: a stop read again after two days (its pods gone) was measured as two days, past any cap."""
    job = Job("wf-a", "chat", 2, ADMITTED, run_id="run-a")
    releasing = with_stops((), [job], 1000.0)
    waiting, releases = measured(releasing, (), {"wf-a": []}, 1000.0 + 2 * DAY, cap_seconds=120.0)
    assert waiting == () and releases == ()
    # Within the bound, a late read still measures what the pods' status says.
    _, releases = measured(releasing, (), {"wf-a": [PodExit("p", 900.0, 1030.0)]}, 1000.0 + 120 + OVERDUE_SECONDS,
                           cap_seconds=120.0)
    assert releases == (("run-a", 1000.0 + 120 + OVERDUE_SECONDS, 30.0),)


def test_one_pods_skewed_clock_keeps_the_services_record() -> None:
    """Fault: one stopped job's pod, on a node whose clock ran two days ahead, wiped the service's record."""
    w = World(config(maxGraceSeconds=300))
    w.lend(2)
    w.tick(chat=40)  # a reclaim: job-0 is stopped
    stopped_at = w.now
    assert [entry[0] for entry in w.record().releasing] == ["job-0"]
    w.cluster.set_workflow_pods("research", "job-0", [PodExit("job-0-step", stopped_at - 300, stopped_at + 2 * DAY)])
    w.tick(chat=40)
    record = w.record()
    assert record.baseline == 8, w.cluster.states[("serving", "chat")]
    assert record.releasing == () and record.releases == (("job-0", w.now, w.now - stopped_at),)
