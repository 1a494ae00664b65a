"""End to end: a researcher's journey through the `offhours` CLI on the real API server and Argo controller.

`offhours submit` from the installed template → `offhours jobs` (waiting, its queue position) →
`offhours why` (the gate's reason, recorded on the job by a real tick) → the gate admits it →
`offhours jobs` (running) → `offhours logs` (its pods' lines, through the API server) → `offhours
cancel` (stopped, its exit hook runs, the gate gives the replica back) → `offhours usage` (its
GPU-seconds). Every command runs as the researcher would run it: the `offhours` program, its exit
status, what it prints. Wrong names (no such job, another namespace, no rights) get one line and
change nothing.

Real: API server, scheduler, Argo controller, the gate (its ServiceAccount's token), the parameter
check, the reference job and the exit hook (local processes run by the pod runner, whose output
the API server serves as pod logs). Stand-ins: kwok nodes, the vLLM servers (emulated metrics).
"""

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from offhours.scripts.names import ANNOTATION_PROVENANCE
from offhours.scripts.policy.plan import lends_nothing_now
from offhours.scripts.runtime.provenance import decode
from offhours.scripts.runtime.provenance_store import stored_record
from offhours.workflows.render import write

from .conftest import RESEARCH, SERVING, gate_config_raw, wait
from .runner import LocalPodRunner
from .test_gate_e2e import _tick, gate_setup, token_client  # noqa: F401 - gate_setup is a fixture used here
from .test_pipeline_e2e import GROUP, VERSION

LOCAL_IMAGE = "offhours.local/reference-job:e2e"
NS = ["-n", RESEARCH, "--serving-namespace", SERVING]


class Cli:
    """The `offhours` program as a researcher runs it (this checkout's, in a child process)."""

    def __init__(self, kubeconfig: str) -> None:
        self.kubeconfig = kubeconfig

    def __call__(self, *args: str, status: int = 0, kubeconfig: str | None = None) -> tuple[str, str]:
        env = {**os.environ, "KUBECONFIG": kubeconfig or self.kubeconfig}
        out = subprocess.run([sys.executable, "-m", "offhours.scripts.cli.main", *args], env=env, capture_output=True,
                             text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert out.returncode == status, f"offhours {' '.join(args)}: exit {out.returncode}\n{out.stdout}\n{out.stderr}"
        assert "Traceback" not in out.stderr, out.stderr
        return out.stdout, out.stderr


@pytest.fixture
def cli(cluster_env: dict[str, str]) -> Cli:
    return Cli(cluster_env["KUBECONFIG"])


def sa_kubeconfig(api: client.ApiClient, kubeconfig: str, namespace: str, service_account: str, out: Path) -> str:
    """A kubeconfig file that authenticates as a ServiceAccount (so its RBAC applies to the CLI)."""
    conf = token_client(api, kubeconfig, namespace, service_account).configuration
    out.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "c", "cluster": {"server": conf.host, "certificate-authority": conf.ssl_ca_cert}}],
        "users": [{"name": "sa", "user": {"token": conf.api_key["authorization"].removeprefix("Bearer ")}}],
        "contexts": [{"name": "sa", "context": {"cluster": "c", "user": "sa", "namespace": namespace}}]}))
    return str(out)


TAG_WARNING = (f"image={LOCAL_IMAGE} is a mutable tag: a preempted and resumed job may pull other code under it; "
               "give the image by digest (name@sha256:...)")


def job_params(run_id: str, tmp: Path) -> list[str]:
    params = {"service": "chat", "replicas": "1", "run-id": run_id, "image": LOCAL_IMAGE,
              "output-uri": f"file://{tmp}/out", "checkpoint-uri": f"file://{tmp}/ckpt",
              "node-selector": '{"offhours.io/pool": "inference"}', "termination-grace-seconds": "20",
              "args": json.dumps(["--steps", "100000", "--every", "50", "--step-seconds", "0.05"])}
    return [arg for k, v in params.items() for arg in ("-p", f"{k}={v}")]


def table(text: str) -> list[dict[str, str]]:
    """Rows of a kubectl-style table (columns split on runs of 3+ spaces)."""
    lines = text.strip().splitlines()
    head = re.split(r"\s{3,}", lines[0])
    return [dict(zip(head, re.split(r"\s{3,}", line))) for line in lines[1:]]


def get_wf(api: client.ApiClient, name: str, namespace: str = RESEARCH) -> dict[str, Any]:
    return dict(client.CustomObjectsApi(api).get_namespaced_custom_object(GROUP, VERSION, namespace, "workflows", name))


@pytest.fixture
def other_namespace_job(api: client.ApiClient) -> Iterator[str]:
    """A parked offhours workflow in namespace `other` (someone else's)."""
    custom = client.CustomObjectsApi(api)
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Workflow",
            "metadata": {"name": "theirs", "namespace": "other",
                         "labels": {"offhours.io/service": "chat", "offhours.io/replicas": "1",
                                    "offhours.io/state": "parked", "offhours.io/run-id": "theirs"}},
            "spec": {"suspend": True, "entrypoint": "main", "templates": [{"name": "main", "suspend": {}}]}}
    custom.delete_collection_namespaced_custom_object(GROUP, VERSION, "other", "workflows")
    custom.create_namespaced_custom_object(GROUP, VERSION, "other", "workflows", body)
    yield "theirs"
    custom.delete_collection_namespaced_custom_object(GROUP, VERSION, "other", "workflows")


@pytest.fixture
def console_reader(api: client.ApiClient, kubectl: Callable[..., str], installed: Path, cluster_env: dict[str, str],
                   tmp_path: Path) -> Iterator[str]:
    """A kubeconfig of the console's ServiceAccount, its read-only rights as `offhours render --console` renders them."""
    out = tmp_path / "with-console"
    write(out, yaml.safe_dump(gate_config_raw(8000)), console=True)
    files = [out / f for f in ("serviceaccount-offhours-console.yaml", "role-offhours-console.yaml",
                               "rolebinding-offhours-console.yaml", "role-offhours-console-research.yaml",
                               "rolebinding-offhours-console-research.yaml")]
    for f in files:
        kubectl("apply", "--server-side", "-f", str(f))
    yield sa_kubeconfig(api, cluster_env["KUBECONFIG"], SERVING, "offhours-console", tmp_path / "console.kubeconfig")
    for f in reversed(files):
        kubectl("delete", "--ignore-not-found", "-f", str(f))


def stamp(at: str) -> str:
    return at.replace("T", " ")


def seconds(at: str) -> float:
    return datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp()


def test_researcher_submits_waits_runs_reads_logs_cancels_and_counts_gpu_hours(
        api: client.ApiClient, gate_setup: dict[str, Any], runner: LocalPodRunner,  # noqa: F811
        pod_logs: int, cli: Cli, cluster_env: dict[str, str], tmp_path: Path, other_namespace_job: str,
        console_reader: str) -> None:
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    load = gate_setup["load"]
    load.rps = 150.0  # chat needs more than its 16 replicas: nothing to lend
    _tick(gate_setup)  # the emulated servers' first reading (a tick without a rate yet)

    # Two jobs from the installed template; the second, at a higher priority, goes first in the queue.
    out, err = cli("submit", "offhours-job", "-n", RESEARCH, *job_params("journey-a", tmp_path))
    name_a = out.split()[0]
    assert name_a.startswith("journey-a-") and err == f"submit: warning: {TAG_WARNING}\n"
    assert out == f"{name_a} parked in namespace {RESEARCH}: the gate admits it when chat can lend 1 replica(s)\n"
    out, _ = cli("submit", "offhours-job", "-n", RESEARCH, "--priority", "5", *job_params("journey-b", tmp_path))
    name_b = out.split()[0]
    assert out == f"{name_b} parked in namespace {RESEARCH}: the gate admits it when chat can lend 1 replica(s)\n"

    # 150 req/s at 10 per replica with the default headroom: about 19 replicas. The rate is measured from the
    # emulators' counters over the tick's wall-clock interval, which jitters with the machine's load (17 to 20
    # seen; a first interval can read low): the behaviour asserted is that nothing is lent meanwhile, and that once
    # a whole rate is read, more than serving's 16 are needed.
    for _ in range(5):
        tick = _tick(gate_setup)
        assert tick.plan.lent_after == 0, gate_setup["log"].getvalue()
        decided = re.fullmatch(r"load needs (\d+) of 16 replicas; 0 lent", tick.decision.reason)
        if decided:
            break
    assert tick.decision.action == "hold" and decided and 16 < int(decided.group(1)) <= 21, gate_setup["log"].getvalue()
    load_reason = f"waiting: chat {lends_nothing_now(tick.decision)}"  # no load figure in it
    out, err = cli("jobs", *NS)
    assert err == ""
    rows = [{k: v for k, v in row.items() if k != "AGE"} for row in table(out)]
    assert rows == [
        {"NAME": name_b, "RUN": "journey-b", "SERVICE": "chat", "STATE": "waiting", "QUEUE": "1", "GPUS": "4",
         "PREEMPTIONS": "0", "GPU-HOURS": "0.00"},
        {"NAME": name_a, "RUN": "journey-a", "SERVICE": "chat", "STATE": "waiting", "QUEUE": "2", "GPUS": "4",
         "PREEMPTIONS": "0", "GPU-HOURS": "0.00"}]
    reason_a = f"{load_reason}; position 2 in the queue"
    wf_a = get_wf(api, name_a)
    assert (wf_a["metadata"]["annotations"]["offhours.io/waiting-reason"],
            wf_a["metadata"]["annotations"]["offhours.io/queue-position"]) == (reason_a, "2")
    out, err = cli("why", name_a, *NS)
    lines = out.splitlines()
    assert lines[:7] == [
        reason_a, "", "timeline:", f"  {stamp(wf_a['metadata']['creationTimestamp'])}  submitted  [{name_a}]", "",
        "last checkpoint: none in its checkpoint store", "GPU-hours: 0.00 over 1 workflow(s)"]
    # Then its provenance (what a rerun submits again): the template it was made from, then its references.
    assert lines[7] == "" and lines[8].startswith("provenance: template offhours-job at resourceVersion "), out

    # Job b is cancelled while it waits: it never held a replica, and job a moves up.
    out, err = cli("cancel", name_b, "--yes", *NS)
    assert (out, err) == (f"{name_b}: stopping (it was waiting: it held no lent GPUs: nothing to give back)\n", "")
    wf_b = get_wf(api, name_b)
    assert wf_b["spec"]["shutdown"] == "Stop" and "offhours.io/cancelled-at" in wf_b["metadata"]["annotations"]
    # A parked workflow must really end, not stay suspended with a shutdown Argo never acts on.
    ended = wait(f"{name_b} to end", lambda: get_wf(api, name_b).get("status", {}).get("phase") in ("Failed", "Error"),
                 timeout=60)
    assert ended and "suspend" not in get_wf(api, name_b)["spec"]
    tick = _tick(gate_setup)
    out, _ = cli("why", "journey-a", *NS)  # by run id too
    assert out.splitlines()[0] == f"waiting: chat {lends_nothing_now(tick.decision)}; position 1 in the queue"
    assert re.fullmatch(r"load needs (19|20) of 16 replicas; 0 lent", tick.decision.reason)
    assert [r["NAME"] for r in table(cli("jobs", *NS)[0])] == [name_a]

    load.rps = 5.0  # quiet: chat needs 1 replica, so the gate lends one to job a
    for _ in range(4):
        if _tick(gate_setup).plan.admit:
            break
    wf_a = get_wf(api, name_a)
    assert wf_a["metadata"]["labels"]["offhours.io/state"] == "admitted" and not wf_a["spec"].get("suspend")
    assert apps.read_namespaced_deployment("chat", SERVING).spec.replicas == 15
    wait("the job's training step to start", lambda: [o for (ns, pod), o in runner.outputs.items()
                                                      if ns == RESEARCH and pod.startswith(f"{name_a}-job-")
                                                      and "ready\n" in o], timeout=90)
    out, _ = cli("jobs", *NS)
    assert [{k: v for k, v in row.items() if k != "AGE"} for row in table(out)] == [
        {"NAME": name_a, "RUN": "journey-a", "SERVICE": "chat", "STATE": "running", "QUEUE": "-", "GPUS": "4",
         "PREEMPTIONS": "0", "GPU-HOURS": "0.00"}]
    wf_a = get_wf(api, name_a)
    first_pod = min(n["startedAt"] for n in wf_a["status"]["nodes"].values() if n["type"] == "Pod")
    assert seconds(first_pod) >= seconds(wf_a["metadata"]["annotations"]["offhours.io/admitted-at"])
    out, _ = cli("why", name_a, *NS)
    assert out.splitlines()[0].startswith(f"running since {stamp(first_pod)} on 4 GPUs of chat (")

    # Its pods' logs, read through the API server: the parameter check's, then the job's.
    pods = sorted(core.list_namespaced_pod(RESEARCH, label_selector=f"workflows.argoproj.io/workflow={name_a}").items,
                  key=lambda p: p.metadata.creation_timestamp)
    check_pod, job_pod = [p.metadata.name for p in pods]
    out, err = cli("logs", name_a, *NS)
    assert err == ""
    kept = f"file://{tmp_path}/ckpt/journey-a/provenance.json"
    assert out.splitlines()[:7] == [f"==> {name_a} / {check_pod} <==",
                                    f"check-parameters: provenance of run journey-a recorded at {kept}",
                                    "check-parameters: 19 parameter(s) ok",
                                    f"==> {name_a} / {job_pod} <==", "started", "ready", "start at step 0 of 100000"]
    # The check pod kept, in the run's store, the record the workflow carries (handed to it by Argo as a value).
    assert stored_record(f"file://{tmp_path}/ckpt/journey-a", "journey-a") == \
        decode(wf_a["metadata"]["annotations"][ANNOTATION_PROVENANCE], "journey-a")
    out, _ = cli("logs", name_a, "--step", "job", *NS)
    assert out.splitlines()[:2] == [f"==> {name_a} / {job_pod} <==", "started"]

    # Wrong names and missing rights: one line each, exit 1, nothing changed.
    missing = "no offhours job '{}' in namespace {} (from -n) (`offhours jobs --all` lists them; -n names another namespace)"
    for command in (["logs", "nosuch"], ["cancel", "nosuch", "--yes"], ["logs", other_namespace_job],
                    ["cancel", other_namespace_job, "--yes"]):
        assert cli(*command, *NS, status=1) == ("", f"{command[0]}: {missing.format(command[1], RESEARCH)}\n")
    assert cli("cancel", name_a, "--yes", "-n", "other", "--serving-namespace", SERVING, status=1) == (
        "", f"cancel: {missing.format(name_a, 'other')}\n")
    nobody = sa_kubeconfig(api, cluster_env["KUBECONFIG"], RESEARCH, "offhours-research", tmp_path / "research.kubeconfig")
    for command in (["logs", name_a], ["cancel", name_a, "--yes"], ["jobs"]):
        assert cli(*command, *NS, status=1, kubeconfig=nobody) == ("", (
            f"{command[0]}: list workflows in research: no rights (HTTP 403): ask for read access, see "
            "`offhours render --console` for the Role\n"))
    # The console's read-only account reads workflows but no pods (it serves no logs), and cannot cancel.
    # The one resolver asks the API server what this account may do before it acts: a job it may only read is
    # refused by name, nothing touched.
    for command, may in ((["logs", name_a, "--step", "job"], "get pods/log"), (["cancel", name_a, "--yes"], "patch")):
        out, err = cli(*command, *NS, status=1, kubeconfig=console_reader)
        assert out == "" and err.startswith(f"{command[0]}: {name_a!r} matches no offhours job that you may {may}") \
            and err.endswith("where you may not; nothing was touched\n"), err
    assert get_wf(api, other_namespace_job, "other")["spec"].get("shutdown") is None
    wf_a = get_wf(api, name_a)
    assert wf_a["spec"].get("shutdown") is None and wf_a["metadata"]["labels"]["offhours.io/state"] == "admitted"

    # Cancel: Argo stops it, its exit hook marks it returned, the gate's next tick gives the replica back.
    out, err = cli("cancel", name_a, "--yes", *NS)
    assert (out, err) == (f"{name_a}: stopping (exit handlers run; its GPUs go back to chat)\n", "")
    done = wait("job a to end", lambda: (lambda w: w if w.get("status", {}).get("phase") in
                                         ("Failed", "Error", "Succeeded") else None)(get_wf(api, name_a)), timeout=120)
    assert (done["status"]["phase"], done["status"]["message"]) == ("Failed", "Stopped with strategy 'Stop'")
    hook = wait("its exit hook", lambda: [r for r in runner.ran if r.pod.startswith(name_a)
                                          and r.argv[:2] == ["offhours", "return-gpus"]], timeout=90)
    assert hook[0].exit_code == 0, hook[0].output
    wait("the returned mark", lambda: get_wf(api, name_a)["metadata"]["labels"]["offhours.io/state"] == "returned",
         timeout=30)
    _tick(gate_setup)
    assert apps.read_namespaced_deployment("chat", SERVING).spec.replicas == 16
    state = json.loads(core.read_namespaced_config_map("offhours-state-chat", SERVING).data["state.json"])
    assert (state["baseline"], state["applied"], state["lastDecision"]["lent"]) == (16, 16, 0)
    assert cli("jobs", *NS) == (f"no unfinished offhours jobs in namespace {RESEARCH} (from -n); 2 finished one(s): "
                                "use --all to list them\n", "")
    out, _ = cli("jobs", "--all", *NS)
    assert [(r["NAME"], r["STATE"], r["QUEUE"], r["GPU-HOURS"]) for r in table(out)] == [
        (name_b, "cancelled", "-", "0.00"), (name_a, "cancelled", "-", "0.00")]
    final = get_wf(api, name_a)
    out, _ = cli("why", name_a, *NS)
    assert out.splitlines()[0] == f"cancelled at {stamp(final['status']['finishedAt'])} after 0.00 GPU-hours and 0 preemption(s)"

    # Usage: what Argo measured on its GPUs (kwok: a stopped pod's GPU time is not measured, see the report),
    # and the GPU-hours lent to it: its 4 GPUs from admission to their return.
    notes = final["metadata"]["annotations"]
    used = float(final["status"].get("resourcesDuration", {}).get("nvidia.com/gpu", notes.get("offhours.io/gpu-seconds", 0)))
    end = min(seconds(notes["offhours.io/returned-at"]), seconds(final["status"]["finishedAt"]))
    lent = (end - seconds(notes["offhours.io/admitted-at"])) * 4 / 3600
    assert lent > 0
    assert cli("usage", "--csv", *NS) == (
        "service,runs,gpu_hours_used,gpu_hours_lost_to_preemption,gpu_hours_lent\n"
        f"chat,2,{used / 3600:.2f},0.00,{lent:.2f}\n", "")
    out, _ = cli("usage", "--by", "label:offhours.io/run-id", "--csv", *NS)
    assert out.splitlines()[1:] == [f"journey-a,1,{used / 3600:.2f},0.00,{lent:.2f}", "journey-b,1,0.00,0.00,0.00"]
