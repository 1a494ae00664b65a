#!/usr/bin/env python3
"""The local control plane for offhours' end-to-end tests: real Kubernetes, kwok GPU nodes, real Argo.

    python scripts/controlplane/lifecycle.py up      # build (cached) and start everything on 127.0.0.1
    python scripts/controlplane/lifecycle.py down    # stop every process it started
    eval "$(python scripts/controlplane/lifecycle.py env)"   # KUBECONFIG, and kubectl + argo on PATH
    python scripts/controlplane/lifecycle.py pause workflow-controller    # freeze one process (SIGSTOP)
    python scripts/controlplane/lifecycle.py resume workflow-controller   # and let it go on (SIGCONT)

Everything runs as local processes bound to loopback: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler (one binary, offhours-kube), kwok managing fake nodes
with nvidia.com/gpu capacity, the Argo Workflows controller with the v4.0.5 CRDs applied
server-side, and the local pod runner (podrunner.py), which runs the pods whose program matters
(gate ticks, exit hooks, opted-in jobs) as local processes. Certificates and the kubeconfig are
generated on start; its context's namespace is `research`. No Docker. A start that fails stops
what it started.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script: its neighbour measure.py
import measure  # noqa: E402 - after the path it is found on

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
STATE = Path(os.environ.get("OFFHOURS_CLUSTER_DIR", "/tmp/offhours-cluster"))
ARGO_CRDS = Path(os.environ.get("OFFHOURS_ARGO_CRDS", REPO.parent / "shared" / "argo" / "v4.0.5" / "crds" / "full"))
ETCD_PORT = int(os.environ.get("OFFHOURS_ETCD_PORT", "23790"))
API_PORT = int(os.environ.get("OFFHOURS_API_PORT", "16443"))
# The pod runner's log server: every node's kubelet endpoint points at it, so the API server's pod
# log subresource (kubectl logs, offhours logs) reaches the runner as it would a kubelet. (kwok's
# own --node-port would take the port for kwok's server, which serves only logs it is configured with.)
KUBELET_PORT = int(os.environ.get("OFFHOURS_KUBELET_PORT", "16450"))
# The Argo controller's metrics server (Argo's default port): it panics when the port is taken, so a second
# control plane on the machine (a shard of the e2e tier, scripts/controlplane/shards.py) needs its own.
ARGO_METRICS_PORT = int(os.environ.get("OFFHOURS_ARGO_METRICS_PORT", "9090"))
NODES = int(os.environ.get("OFFHOURS_KWOK_NODES", "16"))
GPUS_PER_NODE = int(os.environ.get("OFFHOURS_GPUS_PER_NODE", "4"))
# A second pool, of 8-GPU nodes, for placement (tests/e2e/test_placement_e2e.py): tainted, so that only pods that
# tolerate it land there and the 4-GPU pool above stays as every other test knows it.
WIDE_NODES = int(os.environ.get("OFFHOURS_KWOK_WIDE_NODES", "4"))
WIDE_GPUS_PER_NODE = 8
WIDE_POOL = "inference-8"
POD_CIDR = os.environ.get("OFFHOURS_POD_CIDR", "127.200.0.1/16")
NAMESPACES = ("argo", "serving", "research", "other")
QUOTA_RESYNC_SECONDS = 10  # kube-controller-manager's full quota recount (its default, 5 min, stalls a new CRD's count)


def log(message: str) -> None:
    print(f"[cluster] {message}", flush=True)


def run(*cmd: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw)  # type: ignore[call-overload]


COMPONENTS = ("offhours-kube", "kwok", "workflow-controller", "argo")  # what build.sh builds with the Go tool


def build() -> Path:
    t0, wall0 = time.monotonic(), time.time()
    # The measured figure, never a guess: a first build on a shared 2-core machine took most of an hour.
    log(f"building the control plane from Go modules (cached; {measure.phrase('first_build', measure.load())})")
    with measure.LoadSampler() as load:
        out = subprocess.run(["bash", str(HERE / "build.sh")], text=True, stdout=subprocess.PIPE)
    if out.returncode:
        raise SystemExit(f"[cluster] the build failed (exit {out.returncode}); see the lines above")
    bin_dir = Path(out.stdout.strip().splitlines()[-1])
    seconds = time.monotonic() - t0
    log(f"binaries ready in {seconds:.1f} s: {bin_dir}")
    # build.sh writes a component's Go log only when it builds it: all of them new is a first build.
    logs = bin_dir.parent / "logs"
    if all((logs / f"{n}.log").exists() and (logs / f"{n}.log").stat().st_mtime >= wall0 for n in COMPONENTS):
        if measure.measured("first_build", seconds, load=load.mean) is not None:
            log(f"a first build: {seconds:.0f} s recorded in bench/results/controlplane.json (the docs' figure)")
    return bin_dir


def certificates(pki: Path) -> None:
    pki.mkdir(parents=True, exist_ok=True)
    if (pki / "admin.crt").exists():
        return
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(pki / "ca.key"),
        "-out", str(pki / "ca.crt"), "-days", "3650", "-subj", "/CN=offhours-local-ca")
    (pki / "san.cnf").write_text(
        "subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
        "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\n")
    for name, subject, ext in (("apiserver", "/CN=kube-apiserver", True),
                               ("admin", "/O=system:masters/CN=offhours-admin", False)):
        run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(pki / f"{name}.key"),
            "-out", str(pki / f"{name}.csr"), "-subj", subject)
        cmd = ["openssl", "x509", "-req", "-in", str(pki / f"{name}.csr"), "-CA", str(pki / "ca.crt"),
               "-CAkey", str(pki / "ca.key"), "-CAcreateserial", "-out", str(pki / f"{name}.crt"), "-days", "3650"]
        run(*cmd, *(["-extfile", str(pki / "san.cnf")] if ext else []))
    run("openssl", "genrsa", "-out", str(pki / "sa.key"), "2048")
    run("openssl", "rsa", "-in", str(pki / "sa.key"), "-pubout", "-out", str(pki / "sa.pub"))


def kubeconfig(pki: Path, path: Path, namespace: str = "research") -> None:
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "offhours",
        "clusters": [{"name": "offhours", "cluster": {"server": f"https://127.0.0.1:{API_PORT}",
                                                      "certificate-authority": str(pki / "ca.crt")}}],
        "users": [{"name": "admin", "user": {"client-certificate": str(pki / "admin.crt"),
                                             "client-key": str(pki / "admin.key")}}],
        "contexts": [{"name": "offhours", "context": {"cluster": "offhours", "user": "admin", "namespace": namespace}}],
    }
    path.write_text(json.dumps(config, indent=2))


def start(name: str, cmd: list[str], env: dict[str, str] | None = None) -> None:
    logfile = (STATE / "logs" / f"{name}.log").open("a")
    proc = subprocess.Popen(cmd, stdout=logfile, stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, **(env or {})})
    (STATE / "pids").mkdir(exist_ok=True)
    (STATE / "pids" / name).write_text(str(proc.pid))
    log(f"started {name} (pid {proc.pid})")


def wait_for(what: str, check, timeout: float = 120.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception as err:  # noqa: BLE001 - any failure means "not yet"
            last = err
        time.sleep(0.5)
    raise SystemExit(f"{what} not ready after {timeout:.0f} s ({last}); see {STATE / 'logs'}")


def kubectl(bin_dir: Path, *args: str, stdin: str | None = None) -> str:
    out = subprocess.run([str(bin_dir / "offhours-kube"), "kubectl", "--kubeconfig", str(STATE / "admin.kubeconfig"),
                          *args], input=stdin, text=True, capture_output=True)
    if out.returncode:
        raise RuntimeError(f"kubectl {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


def nodes_manifest() -> str:
    docs = []
    for i in range(NODES):
        docs.append(json.dumps({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"gpu-{i:02d}", "annotations": {"kwok.x-k8s.io/node": "fake"},
                         "labels": {"type": "kwok", "kubernetes.io/hostname": f"gpu-{i:02d}",
                                    "offhours.io/pool": "inference", "nvidia.com/gpu.present": "true"}},
            "spec": {},
            "status": {"capacity": {"cpu": "64", "memory": "512Gi", "pods": "110",
                                    "nvidia.com/gpu": str(GPUS_PER_NODE)}},
        }))
    for i in range(WIDE_NODES):
        docs.append(json.dumps({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"gpu8-{i:02d}", "annotations": {"kwok.x-k8s.io/node": "fake"},
                         "labels": {"type": "kwok", "kubernetes.io/hostname": f"gpu8-{i:02d}",
                                    "offhours.io/pool": WIDE_POOL, "nvidia.com/gpu.present": "true"}},
            "spec": {"taints": [{"key": "offhours.io/pool", "value": WIDE_POOL, "effect": "NoSchedule"}]},
            "status": {"capacity": {"cpu": "128", "memory": "1Ti", "pods": "110",
                                    "nvidia.com/gpu": str(WIDE_GPUS_PER_NODE)}},
        }))
    return "\n---\n".join(docs)


def node_names() -> list[str]:
    """Every kwok node of the control plane: the 4-GPU pool, then the 8-GPU pool."""
    return [f"gpu-{i:02d}" for i in range(NODES)] + [f"gpu8-{i:02d}" for i in range(WIDE_NODES)]


def up() -> None:
    t0 = time.monotonic()
    if not ARGO_CRDS.is_dir():
        raise SystemExit(f"[cluster] the Argo v4.0.5 CRDs are not at {ARGO_CRDS}: put the project's shared/ folder "
                         "beside the checkout, or set OFFHOURS_ARGO_CRDS to the folder of argoproj.io_*.yaml (where to get "
                         "them: docs/getting-started/sandbox.md, Where the Argo CRDs come from)")
    running = running_processes()
    if running:
        raise SystemExit(f"[cluster] already up ({', '.join(running)} running): `make cluster-down` first")
    if (STATE / "pids").is_dir() and any((STATE / "pids").iterdir()):
        # A cluster killed with its machine (or by SIGKILL) leaves pid files whose processes are gone.
        log("clearing the state of an earlier cluster whose processes are no longer running")
        down()
    bin_dir = build()
    try:
        start_all(bin_dir, t0)
    except BaseException as err:
        log(f"start failed ({err}): stopping what was started")
        down()
        raise


def start_all(bin_dir: Path, t0: float) -> None:
    for sub in ("logs", "pids", "pki", "etcd"):
        (STATE / sub).mkdir(parents=True, exist_ok=True)
    pki = STATE / "pki"
    certificates(pki)
    kubeconfig(pki, STATE / "admin.kubeconfig")
    kubeconfig(pki, STATE / "argo.kubeconfig", namespace="argo")
    kube = str(bin_dir / "offhours-kube")
    t_start = time.monotonic()
    start("etcd", [kube, "etcd", "--data-dir", str(STATE / "etcd"), "--name", "offhours",
                   f"--listen-client-urls=http://127.0.0.1:{ETCD_PORT}",
                   f"--advertise-client-urls=http://127.0.0.1:{ETCD_PORT}",
                   f"--listen-peer-urls=http://127.0.0.1:{ETCD_PORT + 10}",
                   f"--initial-advertise-peer-urls=http://127.0.0.1:{ETCD_PORT + 10}",
                   f"--initial-cluster=offhours=http://127.0.0.1:{ETCD_PORT + 10}",
                   "--quota-backend-bytes=4294967296", "--log-level=warn"])
    wait_for("etcd", lambda: urllib.request.urlopen(f"http://127.0.0.1:{ETCD_PORT}/health", timeout=2).status == 200)
    start("kube-apiserver", [
        kube, "kube-apiserver", f"--etcd-servers=http://127.0.0.1:{ETCD_PORT}",
        "--bind-address=127.0.0.1", f"--secure-port={API_PORT}", "--advertise-address=127.0.0.1",
        f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}", f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        "--service-cluster-ip-range=10.96.0.0/16", "--authorization-mode=Node,RBAC", "--allow-privileged=true",
        "--profiling=false", "--v=1",
    ])
    admin = str(STATE / "admin.kubeconfig")
    wait_for("kube-apiserver", lambda: "ok" in kubectl(bin_dir, "get", "--raw", "/readyz"), timeout=180)
    start("kube-controller-manager", [
        kube, "kube-controller-manager", f"--kubeconfig={admin}", "--leader-elect=false",
        "--bind-address=127.0.0.1", "--secure-port=0", f"--service-account-private-key-file={pki / 'sa.key'}",
        f"--root-ca-file={pki / 'ca.crt'}", f"--cluster-signing-cert-file={pki / 'ca.crt'}",
        f"--cluster-signing-key-file={pki / 'ca.key'}", "--use-service-account-credentials=false",
        # The quota controller learns a new resource (Argo's workflows, applied just below) by discovery every
        # 30 s, and never then recounts a quota it already synced without it: a quota on count/workflows made
        # in between refuses every workflow ("status unknown for quota") until its full resync, 5 min by default.
        f"--resource-quota-sync-period={QUOTA_RESYNC_SECONDS}s", "--v=1",
    ])
    start("kube-scheduler", [kube, "kube-scheduler", f"--kubeconfig={admin}", "--leader-elect=false",
                             "--bind-address=127.0.0.1", "--secure-port=0", "--v=1"])
    for ns in NAMESPACES:
        kubectl(bin_dir, "create", "namespace", ns, "--dry-run=client", "-o", "yaml")
        kubectl(bin_dir, "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "Namespace",
                                                               "metadata": {"name": ns}}))
    kubectl(bin_dir, "apply", "--server-side", "-f", str(ARGO_CRDS))
    wait_for("Argo CRDs", lambda: "workflows.argoproj.io" in kubectl(bin_dir, "get", "crd", "-o", "name"))
    t_crds = time.monotonic()
    kubectl(bin_dir, "apply", "-f", "-", stdin=json.dumps(WORKFLOW_COUNT_PROBE))
    kubectl(bin_dir, "apply", "-f", "-", stdin=nodes_manifest())
    start("kwok", [str(bin_dir / "kwok"), f"--kubeconfig={admin}", "--config", str(HERE / "kwok-stages.yaml"),
                   "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake", f"--cidr={POD_CIDR}",
                   "--node-ip=127.0.0.1"])
    ready = "jsonpath={.items[*].status.conditions[?(@.type=='Ready')].status}"
    wait_for("kwok nodes", lambda: kubectl(bin_dir, "get", "nodes", "-o", ready).split().count("True") == len(node_names()))
    kubectl(bin_dir, "apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "workflow-controller-configmap",
                                                             "namespace": "argo"},
        "data": {"metricsConfig": f"port: {ARGO_METRICS_PORT}\n"}}))
    start("workflow-controller", [str(bin_dir / "workflow-controller"), f"--kubeconfig={STATE / 'argo.kubeconfig'}",
                                  "--executor-image=quay.io/argoproj/argoexec:v4.0.5", "--loglevel=info"],
          env={"ARGO_NAMESPACE": "argo", "LEADER_ELECTION_DISABLE": "true"})
    # The research steps the runner runs locally exec through the launcher, as in a pod.
    (STATE / "bin").mkdir(exist_ok=True)
    run("go", "build", "-o", str(STATE / "bin" / "offhours-launch"), ".", cwd=str(REPO / "scripts" / "launcher"),
        env={**os.environ, "CGO_ENABLED": "0"})
    runner_log = STATE / "logs" / "podrunner.log"
    runner_log_from = runner_log.stat().st_size if runner_log.exists() else 0  # the log is appended to
    start("podrunner", [sys.executable, str(HERE / "podrunner.py"), "--kubeconfig", admin,
                        "--journal", str(STATE / "podrunner.jsonl"), "--pause-file", str(STATE / "podrunner.pause"),
                        "--map", f"/offhours/bin/={STATE / 'bin'}/", "--map", f"/app/={REPO / 'examples' / 'reference-job'}/",
                        "--log-dir", str(STATE / "podlogs"), "--log-port", str(KUBELET_PORT),
                        "--tls-cert", str(pki / "apiserver.crt"), "--tls-key", str(pki / "apiserver.key")])
    wait_for("the local pod runner", lambda: runner_up(runner_log_from), timeout=60)
    # kwok's stages write the nodes' conditions, never their daemon endpoints: this stays.
    endpoint = json.dumps({"status": {"daemonEndpoints": {"kubeletEndpoint": {"Port": KUBELET_PORT}}}})
    for name in node_names():
        kubectl(bin_dir, "patch", "node", name, "--subresource=status", "--type=merge", "-p", endpoint)
    # Up only once kube-controller-manager counts Argo's workflows: then a quota on them (the workflow quota
    # offhours installs) is counted as soon as it is made, whichever test makes it first.
    wait_for("kube-controller-manager to count Argo's workflows", lambda: workflows_counted(bin_dir), timeout=180)
    kubectl(bin_dir, "-n", "other", "delete", "resourcequota", PROBE_QUOTA)
    log(f"kube-controller-manager counts Argo's workflows ({time.monotonic() - t_crds:.0f} s after their CRDs)")
    (STATE / "env").write_text(f"KUBECONFIG={admin}\nOFFHOURS_CLUSTER_BIN={bin_dir}\n")
    log(f"control plane up in {time.monotonic() - t0:.1f} s ({time.monotonic() - t_start:.1f} s after the build)")
    measure.measured("cluster_up", time.monotonic() - t_start)
    log('for a shell: eval "$(python3 scripts/controlplane/lifecycle.py env)"  (KUBECONFIG; kubectl and argo on PATH)')


PROBE_QUOTA = "offhours-probe-workflows"
WORKFLOW_COUNT_PROBE = {"apiVersion": "v1", "kind": "ResourceQuota",
                        "metadata": {"name": PROBE_QUOTA, "namespace": "other"},
                        "spec": {"hard": {"count/workflows.argoproj.io": "1000000"}}}
"""A quota kube-controller-manager can count only once its discovery has seen Argo's CRDs (start_all waits on it)."""


def workflows_counted(bin_dir: Path) -> bool:
    """Tell whether kube-controller-manager has counted the probe quota's workflows (its status has their usage)."""
    probe = json.loads(kubectl(bin_dir, "-n", "other", "get", "resourcequota", PROBE_QUOTA, "-o", "json"))
    return "count/workflows.argoproj.io" in (probe.get("status") or {}).get("used", {})


def runner_up(log_from: int) -> bool:
    """Tell whether the pod runner just started says it is up; raise if it has exited (its log's tail says why)."""
    pid = live_pid(STATE / "pids" / "podrunner")
    with (STATE / "logs" / "podrunner.log").open("rb") as f:
        f.seek(log_from)
        text = f.read().decode(errors="replace")
    if pid is None:
        raise SystemExit(f"[cluster] the local pod runner exited at start: {text.strip()[-600:]}")
    return "local pod runner up" in text


def shell_env() -> str:
    """Return the shell lines that point kubectl, argo and offhours at the local control plane."""
    env = dict(line.split("=", 1) for line in (STATE / "env").read_text().split())
    return (f"export KUBECONFIG={env['KUBECONFIG']}\n"
            f"export OFFHOURS_CLUSTER_BIN={env['OFFHOURS_CLUSTER_BIN']}\n"
            f"export PATH=\"{env['OFFHOURS_CLUSTER_BIN']}:$PATH\"\n")


def is_ours(pid: int) -> bool:
    """Tell whether `pid` is a live process this cluster started: every command line names STATE (a pid may be reused).

    A process just started can show an empty command line for a moment (its exec under way): read again
    for up to a second before taking it for gone (a zombie's stays empty).
    """
    for _ in range(20):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False
        if cmdline:
            return str(STATE) in cmdline.replace(b"\0", b" ").decode(errors="replace")
        time.sleep(0.05)
    return False


def live_pid(path: Path) -> int | None:
    """Return the pid in the pid file `path` if that process is still the cluster's, else None."""
    text = path.read_text().strip()
    return int(text) if text.isdigit() and is_ours(int(text)) else None


def running_processes() -> list[str]:
    """List the names of the cluster's processes that are still running."""
    pids = STATE / "pids"
    if not pids.is_dir():
        return []
    return sorted(path.name for path in pids.iterdir() if live_pid(path) is not None)


def pause(name: str) -> None:
    """Freeze one of the cluster's processes (SIGSTOP to its group): to the API server it is gone, until `resume`.

    For the tests of what holds without a component (the Argo controller down: the backstop still
    restores serving); a frozen process keeps its state, so `resume` needs no restart.
    """
    _signal(name, signal.SIGSTOP)


def resume(name: str) -> None:
    """Let a process frozen by `pause` run again (SIGCONT)."""
    _signal(name, signal.SIGCONT)


def _signal(name: str, sig: signal.Signals) -> None:
    path = STATE / "pids" / name
    pid = live_pid(path) if path.exists() else None
    if pid is None:
        raise SystemExit(f"[cluster] {name} is not running (known: {', '.join(running_processes()) or 'none'})")
    os.killpg(pid, sig)
    log(f"{'paused' if sig == signal.SIGSTOP else 'resumed'} {name} (pid {pid})")


def down() -> None:
    pids = STATE / "pids"
    if not pids.exists():
        log("nothing to stop")
        return
    order = ["podrunner", "workflow-controller", "kwok", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"]
    for name in order + sorted(p.name for p in pids.iterdir() if p.name not in order):
        path = pids / name
        if not path.exists():
            continue
        pid = live_pid(path)
        if pid is None:
            path.unlink()  # its process is gone; never signal a pid that now belongs to someone else
            continue
        try:
            os.killpg(pid, signal.SIGTERM)
            os.killpg(pid, signal.SIGCONT)  # a process left paused ends too
            for _ in range(100):
                os.killpg(pid, 0)
                time.sleep(0.1)
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        path.unlink()
        log(f"stopped {name}")
    shutil.rmtree(STATE / "etcd", ignore_errors=True)
    shutil.rmtree(STATE / "podlogs", ignore_errors=True)  # the logs of pods that went with etcd
    (STATE / "env").unlink(missing_ok=True)


def main() -> None:
    command = sys.argv[1] if len(sys.argv) > 1 else "help"
    if command == "up":
        up()
    elif command == "down":
        down()
    elif command == "env":
        if not (STATE / "env").exists():
            raise SystemExit("[cluster] not up: `make cluster-up` first")
        print(shell_env(), end="")
    elif command == "build":
        print(build())
    elif command in ("pause", "resume") and len(sys.argv) == 3:
        (pause if command == "pause" else resume)(sys.argv[2])
    else:
        print(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
