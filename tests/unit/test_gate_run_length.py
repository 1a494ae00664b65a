"""A gate CronWorkflow run never outlasts its own length, whatever the pod's clock says of its creation.

The fault played: the gate pod's node clock 30 s behind the API server's (which dates the run's
creation). The run counted its end from a creation it read as 30 s in the future, so it lasted 314 s
of a 285 s run: past the step's activeDeadlineSeconds (290, counted from the pod's start), killed
there, and past the next run's schedule, which `concurrencyPolicy: Forbid` skips while it is still
active: five minutes with no gate. What must hold: the loop runs at most `seconds`.
"""

from datetime import datetime, timedelta, timezone

import pytest

import offhours.scripts.gate.loop as loop
from offhours.cronworkflows.gate import RUN_SECONDS, gate_cron_workflow, gate_tick


def _run_length(monkeypatch: pytest.MonkeyPatch, created: datetime) -> tuple[float | None, bool]:
    seen: list[tuple[float | None, bool]] = []

    def run(config: str, seconds: float | None, dry_run: bool = False, *, once: bool = False,
            metrics_port: int | None = None) -> int:
        seen.append((seconds, once))
        return 0

    monkeypatch.setattr(loop, "run_from_config", run)
    gate_tick(config="gate.yaml", dry_run=False, seconds=RUN_SECONDS, created=created.strftime("%Y-%m-%dT%H:%M:%SZ"))
    (result,) = seen
    return result


def test_a_creation_dated_ahead_of_the_pods_clock_never_lengthens_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    seconds, once = _run_length(monkeypatch, datetime.now(timezone.utc) + timedelta(seconds=30))
    tick = next(t for t in gate_cron_workflow().to_dict()["spec"]["workflowSpec"]["templates"] if t["name"] == "tick")
    assert not once and seconds is not None
    assert seconds <= RUN_SECONDS < tick["activeDeadlineSeconds"], seconds


def test_a_run_created_a_while_ago_still_ends_on_time(monkeypatch: pytest.MonkeyPatch) -> None:
    seconds, once = _run_length(monkeypatch, datetime.now(timezone.utc) - timedelta(seconds=40))
    assert not once and seconds is not None and RUN_SECONDS - 42 <= seconds <= RUN_SECONDS - 39
