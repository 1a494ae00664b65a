"""End to end: `offhours demo` for a few accelerated hours — lending, a reclaim, a resume, a completed pipeline.

Real: API server, scheduler, Argo controller and CLI, the gate CronWorkflow's runs (their pods run
by the local pod runner as the gate's ServiceAccount), the exit hooks, the reference job (a local
process checkpointing to a local folder). Stand-ins: kwok nodes and the vLLM servers (emulated,
replaying the bundled trace at 60x).
"""

import argparse
import re

from offhours.scripts.cli.demo import demo

from .runner import LocalPodRunner


def test_demo_lends_reclaims_resumes_and_completes(runner: LocalPodRunner, cluster_env: dict[str, str]) -> None:
    lines: list[str] = []
    # The demo's defaults: day 1 from 16:00, the evening peak reclaims, the night lets the copy resume.
    args = argparse.Namespace(speed=60.0, start_hour=16.0, hours=14.0, replicas=16, steps=5000, run_id="e2e-demo")
    result = demo(args, say=lines.append)
    transcript = "\n".join(lines)
    replicas = [snap.replicas for _, snap in result.snapshots]
    assert replicas and replicas[0] == 16, transcript
    lowest = replicas.index(min(replicas))
    assert min(replicas) < 16, "the gate never lent:\n" + transcript
    assert max(replicas[lowest:]) > min(replicas), "the gate never reclaimed:\n" + transcript
    states = [job.state for _, snap in result.snapshots for job in snap.jobs.values()]
    assert "preempted" in states, transcript
    # What a person reads: changes, not the state again; the closing summary; what it left running.
    assert max(len(line) for line in lines if line.startswith("[trace")) <= 250, transcript
    assert re.search(r"summary: [1-9][\d.]* GPU-hours lent on the trace clock", transcript), transcript
    assert re.search(r"preemptions: [1-9]", transcript) and "resumed from its checkpoint at step" in transcript
    assert "left on the cluster: the gate CronWorkflow" in transcript, transcript
    train = [r for r in runner.ran if any(a.endswith("/train.py") or "/train.py" in a for a in r.argv)]
    started = [(r, int(m.group(1))) for r in train for m in [re.search(r"start at step (\d+)", r.output)] if m]
    starts = [step for _, step in started]
    assert starts[0] == 0 and any(s > 0 for s in starts[1:]), f"no resume from a checkpoint: {starts}\n{transcript}"
    # The resumed step is the one the stopped run checkpointed on its SIGTERM: no step lost, none repeated.
    resumed = next(i for i, s in enumerate(starts) if s > 0)
    stopped_run = started[resumed - 1][0]
    saved = re.findall(r"SIGTERM: checkpointed at step (\d+)", stopped_run.output)
    assert saved and starts[resumed] == int(saved[-1]), (starts, stopped_run.output[-500:])
    assert result.completed, transcript
    assert [r.exit_code for r in train][-1] == 0
