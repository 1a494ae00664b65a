"""Each gate CronWorkflow run lasts until the hand-over before the next firing of its own schedules.

The fault played: the gate CronWorkflow built for a schedule other than every 5 minutes. Its runs
lasted 285 s whatever the schedule: every 2 minutes, a run outlasted two firings (which
`concurrencyPolicy: Forbid` skips) and the gap after it was 75 s plus a pod start; hourly, 55 minutes
of every hour had no gate. What must hold, for any schedules: a run ends `HANDOVER_SECONDS` before the
soonest next firing (never later: Forbid would skip it), and its pod's deadline follows the run.
"""

from datetime import datetime, timezone

import pytest

from offhours.cronworkflows.cronexpr import next_firings, parse_cron, time_zone
from offhours.cronworkflows.gate import HANDOVER_SECONDS, RUN_SECONDS, gate_cron_workflow


def _run(schedules: list[str], zone: str = "UTC") -> tuple[int, int]:
    spec = gate_cron_workflow(schedules=schedules, timezone=zone).to_dict()["spec"]
    params = {p["name"]: p["value"] for p in spec["workflowSpec"]["arguments"]["parameters"]}
    tick = next(t for t in spec["workflowSpec"]["templates"] if t["name"] == "tick")
    return int(params["run-seconds"]), int(tick["activeDeadlineSeconds"])


@pytest.mark.parametrize("schedules", [["*/5 * * * *"], ["*/2 * * * *"], ["0 * * * *"], ["* * * * *"],
                                       ["0,30 * * * *", "15 * * * *"], ["*/10 8-20 * * *"]])
def test_a_run_ends_the_hand_over_before_the_soonest_next_firing(schedules: list[str]) -> None:
    run, deadline = _run(schedules)
    zone = time_zone("UTC")
    after = datetime(2026, 3, 2, tzinfo=timezone.utc)
    firings = sorted({f.timestamp() for s in schedules for f in next_firings(parse_cron(s), zone, after, 600)})
    gaps = [b - a for a, b in zip(firings, firings[1:])]
    assert run + HANDOVER_SECONDS <= min(gaps), "a run outlasting the next firing: Forbid skips that one"
    assert run + HANDOVER_SECONDS == min(gaps), "a run shorter than its schedule needs leaves a gap"
    assert run < deadline <= min(gaps), "the pod's deadline ends the run only past its own end, before the next"


def test_the_default_schedule_keeps_its_run() -> None:
    assert _run(["*/5 * * * *"]) == (RUN_SECONDS, 290)
