import json
import subprocess
import sys
from datetime import timedelta

import pytest

from offhours.scripts.cli import jobs as r
from offhours.scripts.pool.model import build_pool
from offhours.scripts.pool.store_progress import Stored
from tests.support.pool_fixture import NOW, SERVING, lending_pool


@pytest.fixture
def pool():
    return build_pool(*lending_pool(), SERVING, NOW)


def test_jobs_lists_unfinished_runs_with_queue_gpus_and_gpu_hours(pool):
    assert r.jobs_text(pool, r.select_runs(pool)).splitlines() == [
        "NAME         RUN       SERVICE   STATE               QUEUE   GPUS   AGE    PREEMPTIONS   GPU-HOURS",
        "eval-c       eval-c    chat      waiting             2       4      40m    0             0.00",
        "sweep-b      sweep-b   chat      waiting             1       16     50m    0             0.00",
        "train-a      train-a   chat      running             -       8      2h0m   0             0.00",
        "rl-d-x7-p1   rl-d      chat      preempted→waiting   3       8      5h0m   1             1.00",
    ]
    assert [x.run_id for x in r.select_runs(pool, include_finished=True)][-1] == "sft-e"
    assert r.select_runs(pool, service="code") == []


def test_jobs_json_is_one_record_per_run(pool):
    records = json.loads(r.jobs_text(pool, r.select_runs(pool, include_finished=True), "json"))
    rl = next(x for x in records if x["runId"] == "rl-d")
    assert rl == {"name": "rl-d-x7-p1", "runId": "rl-d", "namespace": "research", "service": "chat",
                  "state": "preempted→waiting", "queuePosition": 3, "reason": rl["reason"], "reasonComputed": True,
                  "replicas": 2, "gpus": 8, "submittedAt": "2025-03-14T07:00:00Z", "admittedAt": None,
                  "lastCheckpoint": "2025-03-14T11:15:00Z", "preemptions": 1, "gpuHours": 1.0,
                  "workflows": ["rl-d-x7", "rl-d-x7-p1"]}


def test_why_gives_one_sentence_a_timeline_and_the_last_checkpoint(pool):
    text = r.why_text(pool.find("rl-d"), pool).splitlines()
    assert text[0] == ("preempted 1 time(s), parked to resume from its last checkpoint; waiting: chat needs 6 of its 10 "
                       "replicas and lends 2 already; 2 are lendable and this job needs 2; third in the queue behind "
                       "jobs that are admitted first (computed from ConfigMap offhours-state-chat: the gate has not "
                       "recorded a reason on this job)")
    assert text[2:10] == [
        "timeline:",
        "  2025-03-14 07:00:00Z  submitted  [rl-d-x7]",
        "  2025-03-14 07:10:00Z  admitted  [rl-d-x7]",
        "  2025-03-14 07:10:00Z  started  [rl-d-x7]",
        "  2025-03-14 11:15:00Z  checkpoint  [rl-d-x7]",
        "  2025-03-14 11:29:00Z  preempted: its replicas went back to serving  [rl-d-x7]",
        "  2025-03-14 11:30:00Z  finished (Failed)  [rl-d-x7]",
        "  2025-03-14 11:30:00Z  parked again as rl-d-x7-p1 after preemption 1  [rl-d-x7-p1]",
    ]
    # Then its provenance: these fixture workflows were made without `offhours submit`, so none is recorded.
    assert text[-4:] == ["last checkpoint: 2025-03-14 11:15:00Z (45m ago)", "GPU-hours: 1.00 over 2 workflow(s)", "",
                         "provenance: none recorded"]
    assert r.sentence(pool.find("eval-c"), pool) == "waiting: the lending window opens at 20:00"
    assert r.sentence(pool.find("train-a"), pool) == "running since 2025-03-14 10:10:00Z on 8 GPUs of chat (1h50m)"
    assert r.sentence(pool.find("sft-e"), pool) == \
        "succeeded at 2025-03-14 05:20:00Z after 2.00 GPU-hours and 0 preemption(s)"


def test_usage_used_lost_and_lent(pool):
    (chat,) = r.usage_lines(pool)
    # used: 3600 + 7200 GPU-s; lost: rl-d-x7 stopped 14 min after its checkpoint on 8 GPUs;
    # lent: rl-d-x7 4h19m x 8, sft-e 3h10m x 4, train-a 1h50m x 8 (still running at NOW).
    assert (len(chat.runs), chat.used, round(chat.lost, 4), round(chat.lent, 4)) == (
        5, 3.0, round(14 / 60 * 8, 4), round((259 / 60) * 8 + (190 / 60) * 4 + (110 / 60) * 8, 4))
    by_user = {x.key: round(x.used, 2) for x in r.usage_lines(pool, "user")}
    assert by_user == {"ada": 2.0, "unknown": 1.0}
    recent = r.usage_lines(pool, "service", NOW - timedelta(hours=1))
    assert [(x.key, len(x.runs), round(x.lent, 4)) for x in recent] == [("chat", 4, round((60 + 29) / 60 * 8, 4))]
    assert r.usage_text(r.usage_lines(pool), "service", as_csv=True).splitlines() == [
        "service,runs,gpu_hours_used,gpu_hours_lost_to_preemption,gpu_hours_lent", "chat,5,3.00,1.87,61.87"]


def test_since_parsing():
    assert r.parse_since("7d", NOW) == NOW - timedelta(days=7)
    assert r.parse_since("2025-03-01", NOW).isoformat() == "2025-03-01T00:00:00+00:00"
    with pytest.raises(r.CommandError, match=r"--since 'last week': expected a duration"):
        r.parse_since("last week", NOW)


def test_step_matches_the_node_name():
    pod = {"metadata": {"annotations": {"workflows.argoproj.io/node-name": "run-x.train(0)"}}}
    from offhours.scripts.cli.logs import step_matches

    assert (step_matches(pod, "train"), step_matches(pod, "eval"), step_matches(pod, None)) == (True, False, True)


def test_an_unknown_job_is_named(pool):
    from offhours.scripts.cli.namespaces import FROM_FLAG, Namespaces
    from offhours.scripts.cluster.access import READ_JOBS
    from tests.support.access import may_all

    with pytest.raises(r.CommandError, match=r"^no offhours job 'nope' in namespace research \(from -n\)"):
        r.find_run(pool, "nope", Namespaces("research", "serving", FROM_FLAG), READ_JOBS, may_all())


def test_no_cluster_is_one_line_and_no_traceback(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:9'}}]\n"
                          "users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
                          "current-context: x\n")
    env = {"KUBECONFIG": str(kubeconfig), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "offhours.scripts.cli.main", "jobs", "-n", "research"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.startswith("offhours jobs: no cluster: cannot reach the API server at https://127.0.0.1:9 "
                                  "(connection refused); start the local one with `make cluster-up`")
    assert done.stderr.count("\n") == 1


def with_checkpoint_uri(wf, uri, run_id):
    wf["spec"]["arguments"] = {"parameters": [{"name": "checkpoint-uri", "value": uri},
                                              {"name": "run-id", "value": run_id}]}
    return wf


def checkpoint_line(text: str) -> str:
    """The one line of `why` about the last checkpoint (the provenance lines follow it)."""
    return next((line for line in text.splitlines() if line.startswith("last checkpoint: ")), "")


def test_why_reads_the_run_s_checkpoint_store_where_the_gate_recorded_none(tmp_path):
    """The sandbox's case: no last-checkpoint annotation (the gate reads progress only to choose victims), the store
    holding step 600. `why` reads the store at the place the gate reads (bounded), and says what it found."""
    from offhours.scripts.runtime.checkpoint import CheckpointStore
    from tests.support.pool_fixture import workflow

    uri = f"file://{tmp_path}/ckpt"
    CheckpointStore(uri, run_id="st-run").save(600, b"weights")
    wf = with_checkpoint_uri(workflow("st-run", "chat", 1, "admitted", "Running", created=30, started=20, run_id="st-run",
                                      annotations={"offhours.io/admitted-at": "2025-03-14T11:35:00Z"}), uri, "st-run")
    configmaps, deployments, _ = lending_pool()
    pool = build_pool(configmaps, deployments, [wf], SERVING, NOW)
    run = pool.find("st-run")
    assert run.last_checkpoint is None  # nothing recorded on the workflow
    stored = r.store_progress(run)
    assert stored is not None and stored[0] is not None and stored[1] is None
    line = checkpoint_line(r.why_text(run, pool, stored))
    assert line.startswith("last checkpoint: ") and line.endswith("read from its checkpoint store)"), line
    empty = with_checkpoint_uri(workflow("none-run", "chat", 1, "admitted", "Running", created=30, run_id="none-run"),
                                uri, "none-run")
    nothing = build_pool(configmaps, deployments, [empty], SERVING, NOW).find("none-run")
    assert checkpoint_line(r.why_text(nothing, pool, r.store_progress(nothing))) == \
        "last checkpoint: none in its checkpoint store"
    assert checkpoint_line(r.why_text(run, pool, Stored(None, "s3://lab/x/st-run: reading failed"))) == \
        "last checkpoint: none recorded; its checkpoint store could not be read: s3://lab/x/st-run: reading failed"
