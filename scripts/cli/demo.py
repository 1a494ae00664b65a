"""`offhours demo`: the whole loop, live, on the local control plane (`make cluster-up`).

It installs offhours for a demo gate configuration (service `chat`, 16 replicas of 4 GPUs: every
GPU of the 16 kwok nodes serves), runs an emulated vLLM fleet on the serving pods' loopback IPs
that replays the bundled 14-day trace at an accelerated clock (default: a trace minute per
second, from 16:00 of day 1, before the evening peak), lets the gate's CronWorkflow run for
real (every minute; its pods are run by the cluster's local pod runner), submits a pipeline from
`offhours-llm-pipeline` with the README's local parameters (its sft stage is the reference job,
run as a local process that checkpoints to a local folder), and prints what happens as it
happens: load, replicas in service, the gate's decisions, the job's states, preemptions and
resumes, until the pipeline completes or the replay ends.

The pure part, what changed between two observations (`changes`), is separate from the I/O.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import urllib3
import yaml

from offhours.scripts.cli.demo_text import (
    GateDecision,
    JobState,
    Snapshot,
    changes,
    legend,
    summarize,
    summary_lines,
)
from offhours.scripts.cli.sandbox_history import write_replay
from offhours.scripts.cli.text import printable
from offhours.scripts.cluster.connection import client_of
from offhours.scripts.cluster.handles import ApiError, handles
from offhours.scripts.inputs.errors import InputError
from offhours.scripts.inputs.limits import MANIFEST_BYTES, SMALL_FILE_BYTES
from offhours.scripts.inputs.text import read_bytes, read_text
from offhours.scripts.inputs.yamldoc import read_yaml
from offhours.scripts.metrics.emulator import EmulatedServer, Fleet
from offhours.scripts.names import (
    ANNOTATION_WAITING_REASON,
    ARGO_GROUP,
    ARGO_VERSION,
    GATE_CONFIG_KEY,
    GATE_CONFIG_MAP,
    GATE_CRON_WORKFLOW,
    GPU_RESOURCE,
    LABEL_RUN_ID,
    LABEL_SERVICE,
    LABEL_STATE,
    PIPELINE_TEMPLATE,
    STATE_KEY,
    STATE_PREEMPTED,
    state_configmap_name,
)
from offhours.scripts.pool.model import STOPPED_UNADMITTED
from offhours.scripts.simulate.trace import Trace, load_trace

CLUSTER_STATE = Path(os.environ.get("OFFHOURS_CLUSTER_DIR", "/tmp/offhours-cluster"))
SERVING, RESEARCH, SERVICE = "serving", "research", "chat"
# The demo's files belong to the control plane it runs on: the default one's in the temporary folder (README's
# paths), another's (a shard of the e2e tier, OFFHOURS_CLUSTER_DIR) beside its state, so two never share a folder.
DEMO_DIR = (CLUSTER_STATE / "demo" if "OFFHOURS_CLUSTER_DIR" in os.environ
            else Path(tempfile.gettempdir()) / "offhours-demo")
LOCAL_IMAGE = "offhours.local/reference-job:demo"
CAPACITY_RPS = 10.0  # what one emulated replica serves (the gate config's capacity)
# One port for every run: a gate run that started before this demo still reads its metrics there.
METRICS_PORT = 18473
DEMO_LABEL = "offhours.io/demo"


# The gate's durations that are about the load's pace, in trace seconds (the gate config's defaults:
# a 15-minute stabilisation window; a reaction time of a 240 s cold start plus a 120 s stop grace).
TRACE_STABILIZATION_SECONDS = 900.0
TRACE_COLD_START_SECONDS = 240.0
TRACE_MAX_GRACE_SECONDS = 120.0


def demo_gate_config(port: int, replicas: int, speed: float = 60.0) -> dict[str, Any]:
    """Return the demo's gate configuration: one service, direct scraping, decisions every few seconds.

    The load runs `speed` times faster than the wall clock, so every duration the gate compares
    with the load's changes is divided by `speed`: the stabilisation window and the reaction time
    of the look-ahead (cold start + stop grace). Left at their real-time values, the trend term
    compares the need with the need 370 wall seconds earlier, six trace hours at 60x: after a
    rise it holds every replica for hours of trace, and a preempted job never resumes.
    """
    return {
        "namespace": SERVING, "workflowNamespace": RESEARCH, "tickSeconds": 10,
        "metrics": {"source": "direct", "maxAgeSeconds": 60, "direct": {"port": port, "timeoutSeconds": 2}},
        "failSafe": {"failedTicksBeforeReclaim": 3},
        "services": {SERVICE: {"deployment": SERVICE, "gpusPerReplica": 4,
                               "capacity": {"requestsPerSecond": CAPACITY_RPS}, "headroom": 0.25,
                               "stabilizationSeconds": TRACE_STABILIZATION_SECONDS / speed,
                               "coldStartSeconds": TRACE_COLD_START_SECONDS / speed,
                               "maxGraceSeconds": TRACE_MAX_GRACE_SECONDS / speed,
                               "maxLendStep": 4, "minReplicas": 1}},
        # No workflow quota in the demo: until kube-controller-manager has counted the workflows (seen to take
        # minutes on the local control plane), it would refuse the demo's first jobs.
        "research": {"maxWorkflows": None},
    }


def pipeline_parameters(run_id: str, steps: int) -> dict[str, str]:
    """Return the README's local example parameters (schedules on the kwok GPU nodes; sft = the reference job)."""
    return {
        "service": SERVICE, "replicas": "2", "run-id": run_id, "image": LOCAL_IMAGE,
        "output-uri": f"file://{DEMO_DIR}/out", "checkpoint-uri": f"file://{DEMO_DIR}/ckpt",
        "node-selector": '{"offhours.io/pool": "inference"}',
        "run-preprocess": "false", "run-pretrain": "false", "run-rl": "false", "run-eval": "false",
        "sft-command": '["python", "/app/train.py"]',
        "sft-args": json.dumps(["--steps", str(steps), "--every", "50", "--step-seconds", "0.05"]),
        "sft-gpus": "4",
    }


@dataclass
class TraceClock:
    """Trace time that runs `speed` times faster than the wall clock, from `start_minute` of the trace."""

    start_minute: float
    speed: float
    started: float = field(default_factory=time.monotonic)
    period_minutes: int = 0  # the trace's length: a sandbox past its end replays it from the start (0: no end)

    def minute(self, now: float | None = None) -> float:
        """Return the trace minute at wall-clock `now` (monotonic)."""
        return self.start_minute + ((now if now is not None else time.monotonic()) - self.started) * self.speed / 60

    def label(self, now: float | None = None) -> str:
        """Return the trace time as `day D HH:MM`."""
        m = int(self.minute(now))
        if self.period_minutes:
            m %= self.period_minutes
        return f"day {m // 1440 + 1} {m % 1440 // 60:02d}:{m % 60:02d}"


def load_scale(trace: Trace, start_minute: int, minutes: int, replicas: int, headroom: float,
               percentile: float = 90.0) -> float:
    """Return the factor that makes the window's `percentile` minute need all but half a replica of `replicas`.

    The busier minutes above it need more than serving has lent out: the gate must reclaim.
    """
    level = float(np.percentile(trace.requests[start_minute:start_minute + minutes], percentile)) / 60
    return (replicas - 0.5) * CAPACITY_RPS / (1 + headroom) / level


class Replay:
    """Emulated vLLM on every ready serving pod, fed from the trace at the clock's pace."""

    def __init__(self, api: Any, port: int, trace: Trace, clock: TraceClock, scale: float) -> None:
        self.core, self.port, self.trace, self.clock, self.scale = handles(api).core, port, trace, clock, scale
        self.servers: dict[str, EmulatedServer] = {}
        self.fleet = Fleet([]).start()
        self.rps = 0.0
        self.errors: list[str] = []
        self._last = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="replay")

    def start(self) -> "Replay":
        """Start feeding the servers once a second."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop feeding and serving."""
        self._stop.set()
        self._thread.join(timeout=10)
        self.fleet.stop()

    def _ready_ips(self) -> list[str]:
        pods = self.core.list_namespaced_pod(SERVING, label_selector=f"app={SERVICE}").items
        return [p.status.pod_ip for p in pods if p.status.pod_ip and p.metadata.deletion_timestamp is None
                and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])]

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            now = time.monotonic()
            dt, self._last = now - self._last, now
            # Past the trace's last minute it starts over: a sandbox replays it on and on.
            minute = int(self.clock.minute(now)) % self.trace.minutes
            self.rps = float(self.trace.requests[minute]) / 60 * self.scale
            prompt = float(self.trace.input_tokens[minute]) / 60 * self.scale
            generated = float(self.trace.output_tokens[minute]) / 60 * self.scale
            try:
                ips = self._ready_ips()
                for ip in ips:
                    if ip not in self.servers:
                        server = EmulatedServer(engines=1)
                        self.fleet.add(ip, self.port, server)
                        self.servers[ip] = server
            except Exception as err:  # noqa: BLE001 - reported; the next second tries again
                self.errors.append(f"{type(err).__name__}: {err}")
                continue
            for ip in ips:
                n = len(ips)
                # More load per replica than it serves shows as a queue, as on a saturated vLLM.
                waiting = max(0.0, self.rps / n - CAPACITY_RPS) * 2.0
                self.servers[ip].feed(self.rps * dt / n, prompt * dt / n, generated * dt / n, dt, waiting=waiting)


class Watcher:
    """Reads a Snapshot from the cluster: the demo's service and the research workflows `selector` picks."""

    def __init__(self, api: Any, selector: str, baseline: int) -> None:
        apis = handles(api)
        self.apps, self.core, self.custom = apis.apps, apis.core, apis.custom
        self.selector, self.baseline = selector, baseline

    def snapshot(self) -> Snapshot:
        """Read the serving Deployment, the gate's state ConfigMap and the research workflows."""
        dep = self.apps.read_namespaced_deployment(SERVICE, SERVING, _request_timeout=READ_SECONDS)
        decision = None
        try:
            cm = self.core.read_namespaced_config_map(state_configmap_name(SERVICE), SERVING,
                                                      _request_timeout=READ_SECONDS)
            last = json.loads((cm.data or {}).get(STATE_KEY, "{}")).get("lastDecision") or {}
            if last:
                decision = GateDecision(str(last.get("action") or ""), _int(last.get("required")),
                                        _int(last.get("lent")), _int(last.get("target")),
                                        str(last.get("reason") or ""), float(last.get("at") or 0.0))
        except (ApiError, ValueError, TypeError):
            decision = None
        from offhours.scripts.pool.model import job_view

        jobs: dict[str, JobState] = {}
        for wf in self.custom.list_namespaced_custom_object(ARGO_GROUP, ARGO_VERSION, RESEARCH, "workflows",
                                                            label_selector=self.selector,
                                                            _request_timeout=READ_SECONDS)["items"]:
            meta = wf["metadata"]
            # The state as every verb says it (pool/model.py): preempted only if it held lent GPUs, waiting
            # while not admitted; not the gate's label, which marks a stop before admission `preempted` too.
            view = job_view(wf)
            jobs[meta["name"]] = JobState((wf.get("status") or {}).get("phase") or "Pending",
                                          view.state if view is not None else (meta.get("labels") or {}).get(LABEL_STATE, ""),
                                          (meta.get("annotations") or {}).get(ANNOTATION_WAITING_REASON, ""))
        return Snapshot(dep.spec.replicas or 0, dep.status.ready_replicas or 0, decision, jobs)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def finished(snapshot: Snapshot) -> bool:
    """Whether the run is over: a run succeeded, or one failed on its own (not stopped by the gate)."""
    jobs = snapshot.jobs.values()
    return any(j.phase == "Succeeded" for j in jobs) or any(
        j.phase in ("Failed", "Error") and j.state not in (STATE_PREEMPTED, STOPPED_UNADMITTED) for j in jobs)


def kubectl(bin_dir: str, kubeconfig: str, *args: str, stdin: str | None = None) -> str:
    """Run the cluster's kubectl; raise with its message on failure."""
    out = subprocess.run([f"{bin_dir}/kubectl", "--kubeconfig", kubeconfig, *args], input=stdin, text=True,
                         capture_output=True, timeout=120)
    if out.returncode:
        raise RuntimeError(f"kubectl {' '.join(args[:3])}: {out.stderr.strip()}")
    return out.stdout


def delete_gate_runs(bin_dir: str, kubeconfig: str, namespace: str, wait: bool = True) -> None:
    """Delete the gate CronWorkflow's runs in `namespace` (`wait`: until they are gone)."""
    kubectl(bin_dir, kubeconfig, "-n", namespace, "delete", "workflows", "-l",
            f"workflows.argoproj.io/cron-workflow={GATE_CRON_WORKFLOW}", "--ignore-not-found", f"--wait={str(wait).lower()}")


def local_cluster() -> dict[str, str]:
    """Return the local control plane's env (KUBECONFIG, OFFHOURS_CLUSTER_BIN); exit with a hint when it is down."""
    env_file = CLUSTER_STATE / "env"
    if not env_file.exists():
        raise SystemExit("offhours demo: no local control plane: run `make cluster-up` first")
    return dict(line.split("=", 1) for line in read_text(env_file, SMALL_FILE_BYTES).split())


def install(env: dict[str, str], raw_config: dict[str, Any], replicas: int, say: Callable[[str], None]) -> None:
    """Install offhours for the demo configuration, the serving Deployment, and a fast gate schedule."""
    from offhours.workflows.render import write

    bin_dir, kubeconfig = env["OFFHOURS_CLUSTER_BIN"], env["KUBECONFIG"]
    out = DEMO_DIR / "manifests"
    shutil.rmtree(out, ignore_errors=True)
    write(out, yaml.safe_dump(raw_config))
    kubectl(bin_dir, kubeconfig, "apply", "--server-side", "--force-conflicts", "-k", str(out))
    cron = read_yaml(str(out / "cronworkflow-offhours-gate.yaml"), MANIFEST_BYTES)
    cron_ns = cron["metadata"]["namespace"]
    for ns in sorted({SERVING, cron_ns}):  # the ConfigMap beside the CronWorkflow that mounts it
        kubectl(bin_dir, kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", "-", stdin=json.dumps({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": GATE_CONFIG_MAP, "namespace": ns},
            "data": {GATE_CONFIG_KEY: yaml.safe_dump(raw_config)}}))
    say(f"installed offhours (render of the demo gate config) and the ConfigMap in {cron_ns}")
    # A fresh start: no gate memory, serving Deployment or workflows left by an earlier demo.
    kubectl(bin_dir, kubeconfig, "-n", SERVING, "delete", f"configmap/{state_configmap_name(SERVICE)}",
            f"deployment/{SERVICE}", "--ignore-not-found", "--wait=true")
    kubectl(bin_dir, kubeconfig, "-n", RESEARCH, "delete", "workflows", "-l", f"{DEMO_LABEL}=true",
            "--ignore-not-found", "--wait=true")
    # A gate run of an earlier install (another config, another schedule) would tick on for minutes,
    # and concurrencyPolicy Forbid would hold the demo's own runs back until it ended.
    delete_gate_runs(bin_dir, kubeconfig, cron_ns)
    # One gate run a minute (the least cron allows), ticking every tickSeconds for 50 s.
    kubectl(bin_dir, kubeconfig, "-n", cron_ns, "patch", "cronworkflow", GATE_CRON_WORKFLOW, "--type=merge", "-p",
            json.dumps({"spec": {"suspend": False, "schedules": ["* * * * *"],
                                 "workflowSpec": {"arguments": {"parameters": [
                                     {"name": p["name"], "value": "50" if p["name"] == "run-seconds" else p["value"]}
                                     for p in cron["spec"]["workflowSpec"]["arguments"]["parameters"]]}}}}))
    say("gate CronWorkflow: every minute, one decision every 10 s")
    labels = {"app": SERVICE, LABEL_SERVICE: SERVICE}
    kubectl(bin_dir, kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", "-", stdin=json.dumps({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": SERVICE, "namespace": SERVING,
                                                                     "labels": labels},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": SERVICE}},
                 "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "100%"}},
                 "template": {"metadata": {"labels": labels}, "spec": {
                     "terminationGracePeriodSeconds": 5, "nodeSelector": {"offhours.io/pool": "inference"},
                     "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.12.0",
                                     "resources": {"requests": {GPU_RESOURCE: "4", "cpu": "4"},
                                                   "limits": {GPU_RESOURCE: "4"}}}]}}}}))
    say(f"serving: Deployment {SERVICE}, {replicas} replicas x 4 GPUs (vLLM emulated on each pod's IP)")


def submit(env: dict[str, str], run_id: str, steps: int) -> str:
    """Submit the pipeline with the argo CLI, parameters only; return the workflow's name."""
    args = [f"{env['OFFHOURS_CLUSTER_BIN']}/argo", "--kubeconfig", env["KUBECONFIG"], "submit", "-n", RESEARCH,
            "--from", f"workflowtemplate/{PIPELINE_TEMPLATE}", "-o", "name", "--labels", f"{DEMO_LABEL}=true"]
    for name, value in pipeline_parameters(run_id, steps).items():
        args += ["-p", f"{name}={value}"]
    out = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if out.returncode:
        raise RuntimeError(f"argo submit: {out.stderr.strip()}")
    return out.stdout.strip().split("/")[-1]


def watch(watcher: Watcher, clock: TraceClock, replay: Replay, until: Callable[[Snapshot], bool], deadline: float,
          say: Callable[[str], None], began: float) -> Iterator[Snapshot]:
    """Print changes once a second until `until` holds or the deadline passes; yield each snapshot."""
    before: Snapshot | None = None
    while time.monotonic() < deadline:
        try:
            now = watcher.snapshot()
        except ApiError as err:
            say(f"cannot read the cluster: HTTP {err.status} {err.reason}")
            if STOP.wait(1):
                return
            continue
        except (OSError, urllib3.exceptions.HTTPError) as err:  # timed out, refused: the next second tries again
            say(f"cannot read the cluster: {type(err).__name__}: {err}")
            if STOP.wait(1):
                return
            continue
        stamp = f"[trace {clock.label()} | wall +{time.monotonic() - began:.0f} s] load {replay.rps:.1f} req/s"
        for line in changes(before, now, SERVICE, watcher.baseline, clock.speed):
            say(f"{stamp} | {line}")
        before = now
        yield now
        if until(now) or STOP.wait(1):
            return


@dataclass
class DemoResult:
    """What the demo saw: the submitted workflow, every snapshot (wall-clock second, trace time), the lines."""

    workflow: str = ""
    snapshots: list[tuple[str, Snapshot]] = field(default_factory=list)
    samples: list[tuple[float, Snapshot]] = field(default_factory=list)
    left: list[str] = field(default_factory=list)

    @property
    def completed(self) -> bool:
        """Whether a run of the pipeline succeeded."""
        return bool(self.snapshots) and any(j.phase == "Succeeded" for j in self.snapshots[-1][1].jobs.values())


PID_FILE = DEMO_DIR / "sandbox.pid"
STOP = threading.Event()  # set by SIGTERM (`offhours demo --stop`): the demo ends and cleans up
READ_SECONDS = 10  # each read of the watch loop: a hung API server is a missed second, not a hung demo
STOP_SECONDS = 180  # its cleanup: the gate suspended, its runs deleted, the summary's log reads (each time-boxed)
RESUMED = re.compile(r"start at step (\d+)")


MAX_SPEED = 3600.0  # a trace hour per wall second: beyond it a 10 s tick spans more than a trace day


def flag_problems(args: argparse.Namespace, trace_minutes: int) -> list[str]:
    """Return every wrong flag of `offhours demo`, each naming what is expected (empty: all fine).

    Checked before anything is installed or deleted: the run id names the folders the demo clears, and
    the speed, window and replicas make the gate configuration and the load it replays.
    """
    import math

    from offhours.scripts.runtime.parameters import KINDS

    problems = []
    if not (math.isfinite(args.speed) and 1 <= args.speed <= MAX_SPEED):
        problems.append(f"--speed {args.speed:g}: expected 1 (real time) to {MAX_SPEED:g} trace seconds per wall second")
    hours = trace_minutes / 60
    start_ok = math.isfinite(args.start_hour) and 0 <= args.start_hour < hours
    if not start_ok:
        problems.append(f"--start-hour {args.start_hour:g}: expected 0 to under {hours:g} (the trace's hours)")
    if not (math.isfinite(args.hours) and args.hours * 60 >= 1):
        problems.append(f"--hours {args.hours:g}: expected at least one trace minute")
    elif start_ok and int(args.start_hour * 60) + int(args.hours * 60) > trace_minutes:
        problems.append(f"--start-hour {args.start_hour:g} --hours {args.hours:g}: past the trace's end "
                        f"(it has {hours:g} hours)")
    if args.replicas < 1:
        problems.append(f"--replicas {args.replicas}: expected 1 or more serving replicas")
    if args.steps < 1:
        problems.append(f"--steps {args.steps}: expected 1 or more training steps")
    if args.run_id is not None:
        wrong = KINDS["run-id"](args.run_id)
        if wrong:
            problems.append(f"--run-id {printable(args.run_id)!r}: {wrong}")
    return problems


def run_demo(args: argparse.Namespace, say: Callable[[str], None] = print) -> int:
    """Run the demo (`offhours demo`); exit 0 if the pipeline completed (`--keep`: once stopped)."""
    if args.stop:
        return stop_sandbox(say)
    problems = flag_problems(args, load_trace().minutes)
    if problems:
        import sys

        print("offhours demo: " + "; ".join(problems) + "; nothing was installed", file=sys.stderr)
        return 2
    running = sandbox_pid()
    if running is not None:  # a second install would reset the serving and gate the first one drives
        say(f"offhours demo: a sandbox is already running (pid {running}): `make sandbox-stop` first")
        return 1
    # SIGTERM (`offhours demo --stop`, `make sandbox-stop`) ends it as Ctrl-C does: the cleanup runs.
    signal.signal(signal.SIGTERM, _interrupt)
    from offhours.scripts.cli.connect import NoCluster

    try:
        result = demo(args, say)
    except NoCluster:
        raise  # one line with the way to get a cluster (cli/errors.py)
    except (RuntimeError, subprocess.TimeoutExpired) as err:  # kubectl's or argo's own message, after the cleanup
        import sys

        print(f"offhours demo: {printable(str(err))}", file=sys.stderr)
        return 1
    return 0 if args.keep or result.completed else 1


def _interrupt(*_: Any) -> None:
    # A flag, not an exception: the watch loop ends at its next second, wherever the signal lands.
    STOP.set()


def sandbox_pid() -> int | None:
    """Return the pid of the running sandbox, or None (no pid file, its process gone, or the pid reused)."""
    try:
        pid = int(read_text(PID_FILE, SMALL_FILE_BYTES).strip())
        cmdline = read_bytes(f"/proc/{pid}/cmdline", SMALL_FILE_BYTES).replace(b"\0", b" ").decode(errors="replace")
    except (OSError, ValueError):
        return None
    return pid if " demo" in cmdline and "--keep" in cmdline and pid != os.getpid() else None


def _running(pid: int) -> bool:
    """Whether process `pid` still runs: an exited one its parent has not reaped yet (a zombie) has ended."""
    try:
        stat = read_text(f"/proc/{pid}/stat", SMALL_FILE_BYTES)
    except (OSError, InputError):
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def stop_sandbox(say: Callable[[str], None]) -> int:
    """Stop a running sandbox (its pid file names it); return 1 when none runs."""
    pid = sandbox_pid()
    if pid is None:
        say(f"offhours demo: no sandbox is running (no live sandbox process in {PID_FILE})")
        return 1
    try:
        os.kill(pid, signal.SIGTERM)
    except PermissionError as err:  # the demo's folder is shared: the pid file may name another user's sandbox
        say(f"offhours demo: the sandbox (pid {pid}) is not yours to stop ({err.strerror}): its owner stops it")
        return 1
    except ProcessLookupError:
        say(f"offhours demo: no sandbox is running (pid {pid} ended)")
        return 1
    deadline = time.monotonic() + STOP_SECONDS
    while time.monotonic() < deadline and _running(pid):
        time.sleep(0.5)
    if _running(pid):
        say(f"offhours demo: the sandbox (pid {pid}) did not stop within {STOP_SECONDS} s; its output says where it is")
        return 1
    say(f"sandbox stopped (pid {pid}); its last lines say what it left on the cluster")
    return 0


def resumed_steps(core: Any, jobs: dict[str, JobState]) -> dict[str, int]:
    """Return the step each workflow's training resumed from (its pods' logs: `start at step N`, N > 0)."""
    steps: dict[str, int] = {}
    for name in jobs:
        try:
            pods = core.list_namespaced_pod(RESEARCH, label_selector=f"workflows.argoproj.io/workflow={name}",
                                            _request_timeout=10).items
            for pod in pods:
                text = core.read_namespaced_pod_log(pod.metadata.name, RESEARCH, container="main",
                                                    _preload_content=False, _request_timeout=10).data.decode(
                                                        errors="replace")
                found = [int(m) for m in RESUMED.findall(text) if int(m) > 0]
                if found:
                    steps[name] = found[0]
        except (ApiError, OSError, ValueError):
            continue  # advisory: the summary says only what it could read
    return steps


def demo(args: argparse.Namespace, say: Callable[[str], None] = print) -> DemoResult:
    """Set up the demo, run it until the pipeline completes or the replay ends (`--keep`: until stopped)."""
    from offhours.scripts.cli.connect import connect

    env = local_cluster()
    # Its env file outlives a control plane that crashed or a reboot: asked once, one that answers nothing is one
    # line with the way to start it, before anything is installed.
    connect(env["KUBECONFIG"])
    api = client_of(env["KUBECONFIG"])
    trace = load_trace()
    start = int(args.start_hour * 60)
    minutes = int(args.hours * 60)
    port = METRICS_PORT
    raw = demo_gate_config(port, args.replicas, args.speed)
    scale = load_scale(trace, start, minutes, args.replicas, 0.25)
    DEMO_DIR.mkdir(parents=True, exist_ok=True)
    run_id = args.run_id or f"demo-{int(time.time())}"
    keep, pipeline = bool(getattr(args, "keep", False)), not getattr(args, "no_pipeline", False)
    # A fresh start for this run id: an earlier demo's checkpoints would make the job resume, not start.
    for kept in ("ckpt", "out"):
        shutil.rmtree(DEMO_DIR / kept / run_id, ignore_errors=True)
    install(env, raw, args.replicas, say)
    clock = TraceClock(start, args.speed, period_minutes=trace.minutes)
    # What it replays, for `offhours console --history-sandbox` (cli/sandbox_history.py): the estimate's load.
    write_replay(DEMO_DIR, scale, args.speed, start, time.time())
    replay = Replay(api, port, trace, clock, scale).start()
    began = time.monotonic()
    say(f"replaying the bundled trace from trace {clock.label()} at {args.speed:g}x ({minutes} trace minutes in "
        f"{minutes * 60 / args.speed:.0f} wall s{'; then on and on, from the trace start' if keep else ''}); "
        f"peak {float(trace.requests[start:start + minutes].max()) / 60 * scale:.1f} req/s for {args.replicas} "
        f"replicas of {CAPACITY_RPS:g} req/s")
    for line in legend(SERVICE, args.replicas, args.speed):
        say(line)
    result = DemoResult()
    if keep:
        PID_FILE.write_text(str(os.getpid()))
    # The demo's run, or in a sandbox every offhours workflow (the person's own jobs too).
    watcher = Watcher(api, LABEL_SERVICE if keep else f"{LABEL_RUN_ID}={run_id}", args.replicas)
    try:
        if pipeline:
            # The first gate run starts at the next minute: submit once the gate is deciding.
            say("waiting for the gate's first decision (its CronWorkflow runs every minute)")
            began_at = time.time()
            first_decision = time.monotonic() + 180
            while _decided_at(watcher) < began_at and time.monotonic() < first_decision:
                if STOP.wait(2):
                    break
            if _decided_at(watcher) < began_at:
                say(f"no gate decision in 180 s: see `argo -n {SERVING} list` and the gate run's logs; "
                    "submitting anyway")
            for error in replay.errors[:3]:
                say(f"emulated fleet: {error}")
            result.workflow = submit(env, run_id, args.steps)
            say(f"submitted {result.workflow}: argo submit -n {RESEARCH} --from workflowtemplate/{PIPELINE_TEMPLATE} "
                "(README's local parameters)")
        if keep:
            say(sandbox_hint())
        deadline = time.monotonic() + (float("inf") if keep else minutes * 60 / args.speed)
        done_said = False
        for snap in watch(watcher, clock, replay, (lambda _: False) if keep else finished, deadline, say, began):
            result.snapshots.append((clock.label(), snap))
            result.samples.append((time.monotonic(), snap))
            ours = {n: j for n, j in snap.jobs.items() if result.workflow and n.startswith(result.workflow)}
            if keep and pipeline and not done_said and finished(Snapshot(snap.replicas, snap.ready, None, ours)):
                done_said = True
                say("the demo pipeline has ended; the sandbox stays live for your own jobs")
        if STOP.is_set():
            say("stopping the sandbox" if keep else "stopped")
        elif not keep:
            say("pipeline completed" if result.completed else "the replay ended before the pipeline completed")
    except KeyboardInterrupt:
        say("stopping the sandbox" if keep else "interrupted")
    finally:
        cleanup_began = time.monotonic()
        replay.stop()
        result.left = stop_gate(env, api, args.replicas)
        gate_stopped = time.monotonic() - cleanup_began
        last = result.snapshots[-1][1] if result.snapshots else None
        if last is not None:
            summary = summarize(result.samples, args.replicas, args.speed,
                                resumed_steps(handles(api).core, last.jobs))
            for line in summary_lines(summary, RESEARCH, run_id if pipeline else "NAME", args.speed):
                say(line)
        for line in result.left:
            say(line)
        say(f"(cleanup: the gate stopped in {gate_stopped:.0f} s, all of it in {time.monotonic() - cleanup_began:.0f} s)")
        if keep:  # last: `offhours demo --stop` waits for this process, not for the file
            PID_FILE.unlink(missing_ok=True)
    return result


def _decided_at(watcher: Watcher) -> float:
    """Return when the gate last decided; 0 when the cluster does not answer this time (the caller asks again)."""
    try:
        return watcher.snapshot().decided_at
    except (ApiError, OSError, urllib3.exceptions.HTTPError):
        return 0.0


def sandbox_hint() -> str:
    """Return what a person can do while the sandbox runs."""
    return (f"the sandbox stays live until Ctrl-C or `make sandbox-stop`. In another shell: "
            f'eval "$(python3 scripts/controlplane/lifecycle.py env)"; then `offhours submit offhours-job -n '
            f"{RESEARCH} ...` or `argo submit -n {RESEARCH} --from workflowtemplate/offhours-job ...` (README: "
            f"Try it locally), and watch with `offhours jobs -n {RESEARCH}` and `offhours why NAME -n {RESEARCH}`; "
            f"`offhours console --history-sandbox` estimates a request's start from the sandbox's own load")


def stop_gate(env: dict[str, str], api: Any, baseline: int) -> list[str]:
    """Suspend the gate and end its runs (without the emulated fleet every tick would fail); say what is left."""
    bin_dir, kubeconfig = env["OFFHOURS_CLUSTER_BIN"], env["KUBECONFIG"]
    left: list[str] = []
    try:
        cron_ns = read_yaml(str(DEMO_DIR / "manifests" / "cronworkflow-offhours-gate.yaml"), MANIFEST_BYTES)
        namespace = cron_ns["metadata"]["namespace"]
        kubectl(bin_dir, kubeconfig, "-n", namespace, "patch", "cronworkflow", GATE_CRON_WORKFLOW, "--type=merge",
                "-p", '{"spec":{"suspend":true}}')
        # The run in progress would tick on for up to a minute; deleted, its gate ends its tick and exits
        # (nothing here needs it gone: a next install waits for that).
        delete_gate_runs(bin_dir, kubeconfig, namespace, wait=False)
        left.append(f"left on the cluster: the gate CronWorkflow {namespace}/{GATE_CRON_WORKFLOW} suspended and its "
                    "runs deleted (the emulated vLLM servers stopped with this process, so every tick would fail)")
    except (OSError, RuntimeError, subprocess.TimeoutExpired, KeyError, TypeError, InputError) as err:
        left.append(f"could not suspend the gate CronWorkflow ({err}): it still ticks and finds no vLLM metrics")
    try:
        dep = handles(api).apps.read_namespaced_deployment(SERVICE, SERVING)
        wfs = handles(api).custom.list_namespaced_custom_object(
            ARGO_GROUP, ARGO_VERSION, RESEARCH, "workflows", label_selector=LABEL_SERVICE)["items"]
        running = [w["metadata"]["name"] for w in wfs if (w.get("status") or {}).get("phase") in ("Running", None)
                   and not (w.get("spec") or {}).get("suspend")]
        lent = "" if (dep.spec.replicas or 0) >= baseline else (
            f" ({baseline - (dep.spec.replicas or 0)} lent: each job's exit hook gives its replicas back when it ends)")
        left.append(f"  serving: {SERVING}/{SERVICE} at {dep.spec.replicas} replicas{lent}")
        left.append(f"  research: {len(wfs)} workflows in {RESEARCH}" + (
            f", still running: {', '.join(sorted(running))}" if running else ", none running")
            + f" (`argo list -n {RESEARCH}`)")
    except (ApiError, OSError, KeyError, TypeError) as err:
        left.append(f"  could not read what is left ({err})")
    left.append("  `make sandbox` starts the live sandbox again (it reinstalls the gate and serving)")
    return left


def register(subparsers: Any) -> None:
    """Add `offhours demo` to the command line."""
    p = subparsers.add_parser("demo", help="the whole loop live on the local control plane (make cluster-up): "
                              "emulated vLLM replaying the bundled trace, the gate, a pipeline preempted and resumed")
    p.add_argument("--speed", type=float, default=60.0, help="trace seconds per wall-clock second (default 60)")
    p.add_argument("--start-hour", type=float, default=16.0, help="trace hour to start at (default 16: day 1, "
                   "16:00, before the evening peak; the night after it is low for hours: the job resumes)")
    p.add_argument("--hours", type=float, default=14.0, help="trace hours to replay at most (default 14; "
                   "with --keep, the load scale's window)")
    p.add_argument("--replicas", type=int, default=16, help="serving replicas of 4 GPUs (default 16: every kwok GPU)")
    p.add_argument("--steps", type=int, default=5000, help="training steps of the reference job, 0.05 s each "
                   "(default 5000: the job runs into the evening peak)")
    p.add_argument("--run-id", help="run id of the pipeline (default: demo-<time>)")
    p.add_argument("--keep", action="store_true", help="a sandbox: keep serving, the gate and the replay live "
                   "(the trace on and on) until Ctrl-C or `offhours demo --stop`; your own jobs run there too")
    p.add_argument("--no-pipeline", action="store_true", help="submit no demo pipeline (with --keep: only your jobs)")
    p.add_argument("--stop", action="store_true", help="stop the running sandbox (`make sandbox-stop`)")
    p.set_defaults(func=run_demo)
