"""End to end: the live sandbox as a person drives it — start it, run one's own jobs in it, stop it.

`offhours demo --keep --no-pipeline` (what `make sandbox` runs, less the demo's own pipeline) in a
child process, as from a terminal: serving replays the trace, the gate's CronWorkflow ticks, and
the cluster's own pod runner (the daemon `make cluster-up` started, serving pod logs as a kubelet
through kwok's node port) runs the gate, the exit hooks and the jobs. One job comes from
`offhours submit`, one from `argo submit --from workflowtemplate/offhours-job`; the evening peak
of the trace preempts both, the night resumes both from their checkpoints, and `jobs`, `why` and
`logs` show it. `offhours demo --stop` ends it, and its last lines say what it left.

At 120x from trace 15:00: the gate decides within a wall minute (trace 16:00), lends, the 19:30
peak reclaims (about 150 wall s in), the load falls by 23:30 and both copies resume (about 270 s).
"""

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import RESEARCH, wait
from .test_argo_submit_e2e import argo
from .test_researcher_journey_e2e import Cli, cli, job_params  # noqa: F401 - cli is a fixture

NS = ["-n", RESEARCH]


@pytest.fixture
def sandbox(cluster_env: dict[str, str], tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """The sandbox in a child process, its output in a file; killed (and its jobs stopped) if the test fails."""
    out = tmp_path / "sandbox.out"
    with out.open("w") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "offhours.scripts.cli.main", "demo", "--keep", "--no-pipeline",
                                 "--speed", "120", "--start-hour", "15"],
                                env={**os.environ, "KUBECONFIG": cluster_env["KUBECONFIG"], "PYTHONUNBUFFERED": "1"},
                                stdout=sink, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
    try:
        yield proc, out
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
        subprocess.run([f"{cluster_env['OFFHOURS_CLUSTER_BIN']}/kubectl", "--kubeconfig", cluster_env["KUBECONFIG"],
                        "-n", RESEARCH, "delete", "workflows", "-l", "offhours.io/run-id in (sandbox-cli,sandbox-argo)",
                        "--ignore-not-found", "--wait=false"], capture_output=True, timeout=120)


def _run(offhours: Cli, run_id: str) -> dict[str, Any]:
    out, _ = offhours("jobs", "--all", "-o", "json", *NS)
    runs = {r["runId"]: r for r in json.loads(out)}
    return runs.get(run_id, {})


def test_sandbox_runs_a_persons_own_jobs_through_preemption_and_resume(
        cluster_env: dict[str, str], sandbox: tuple[subprocess.Popen[str], Path], cli: Cli,  # noqa: F811
        tmp_path: Path) -> None:
    proc, out = sandbox
    wait("the sandbox to say it stays live", lambda: "the sandbox stays live" in out.read_text() or proc.poll(),
         timeout=180)
    assert proc.poll() is None, out.read_text()

    cli("submit", "offhours-job", *NS, *job_params("sandbox-cli", tmp_path / "a"))
    argo_name = argo(cluster_env, "submit", "-n", RESEARCH, "--from", "workflowtemplate/offhours-job", "-o", "name",
                     *job_params("sandbox-argo", tmp_path / "b")).strip().split("/")[-1]
    assert argo_name

    def resumed(run_id: str) -> tuple[dict[str, Any], str] | None:
        # Resumed for real: a later attempt's training started at a checkpointed step (a copy of a
        # workflow that never ran starts at step 0), and the run counts its preemption.
        run = _run(cli, run_id)
        if run.get("preemptions", 0) < 1 or run.get("state") != "running":
            return None
        text, _ = cli("logs", run_id, *NS)
        return (run, text) if re.search(r"start at step [1-9]\d*", text) else None

    for run_id in ("sandbox-cli", "sandbox-argo"):
        run, logs = wait(f"{run_id} admitted, preempted and resumed from a checkpoint", lambda r=run_id: resumed(r),
                         timeout=480, every=5)
        assert len(run["workflows"]) >= 2, run  # the copy parked after the preemption is what runs now
        why, _ = cli("why", run_id, *NS)
        assert "preempted" in why and "parked again" in why, why
        # Every attempt in order, marked: the first before the one that resumed.
        marks = re.findall(r"\(attempt (\d+) of (\d+)", logs)
        assert marks and marks[0][0] == "1" and int(marks[-1][0]) == int(marks[-1][1]) >= 2, logs
        assert "resumed from the last checkpoint" in logs, logs
        step = int(re.findall(r"start at step (\d+)", logs)[-1])
        assert step > 0, logs

    # Stopped as a person would from another shell; its last lines say what it lent and what it left.
    stop = subprocess.run([sys.executable, "-m", "offhours.scripts.cli.main", "demo", "--stop"], capture_output=True,
                          text=True, timeout=240, env={**os.environ, "KUBECONFIG": cluster_env["KUBECONFIG"]})
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert proc.wait(timeout=30) == 0
    text = out.read_text()
    assert "Traceback" not in text, text
    summary = re.search(r"summary: ([\d.]+) GPU-hours lent on the trace clock", text)
    assert summary and float(summary.group(1)) > 0, text[-3000:]
    assert re.search(r"preemptions: [1-9]", text), text[-3000:]
    assert "resumed from its checkpoint at step" in text, text[-3000:]
    assert "left on the cluster: the gate CronWorkflow" in text and "suspended" in text, text[-3000:]
    # Nothing of a line repeats the state before it: no line of the sandbox's runs past 250 characters.
    assert max(len(line) for line in text.splitlines() if line.startswith("[trace")) <= 250, text[-3000:]
    for run_id in ("sandbox-cli", "sandbox-argo"):  # the person's jobs stay after the sandbox: cancelled as they would
        cli("cancel", run_id, "--yes", *NS)
