#!/usr/bin/env python3
"""Run the pods whose program matters as local processes, on a cluster whose nodes are kwok fakes.

kwok runs no containers. The pods that opt in (label offhours.io/role=gate|exit-hook: the gate's
tick, the `return-gpus` exit hook and the parameter check: role gate|exit-hook|check-parameters;
the backstop CronJob's pass: role backstop;
offhours.io/local-run=true; or an Argo step whose image is
under offhours.local/, e.g. the demo's reference job; the cluster's kwok stages leave them alone)
are run here: the main container's command (what
Argo's emissary would exec) as a local process, with the pod's environment, its ConfigMap volumes
materialised, and a kubeconfig holding a token of the pod's ServiceAccount, so RBAC applies as in
a cluster. The pod's status follows the process: Running, then Succeeded or Failed with the exit
code. A pod being deleted gets SIGTERM, then SIGKILL after its grace period. Like a kubelet, the
runner can serve the logs of the pods it ran (`serve_logs`: the kubelet's `/containerLogs` path
over HTTPS; `make cluster-up` points the nodes' `status.daemonEndpoints.kubeletEndpoint.Port`
at it), so `kubectl logs` and `offhours logs` read them through the API
server. With a log folder each pod's output is kept there as it comes (`NS/POD/main.log`, the
kubelet's own layout in spirit): every runner that shares the folder serves every pod's log, and
a runner restarted serves the logs of the pods run before.

Each pod is claimed first (an annotation written with the pod's resourceVersion as precondition),
so two runners never run the same pod. A runner reports what goes wrong: an unreadable ConfigMap,
a token it cannot get, a program that cannot start fail the pod with the reason in its status;
errors are logged and kept in `errors`.

    python scripts/controlplane/podrunner.py --kubeconfig FILE [--journal FILE] [--pause-file FILE]
        [--log-dir DIR --log-port PORT --tls-cert FILE --tls-key FILE]

`make cluster-up` starts it as a daemon. The e2e tests run their own runner in-process (their
checkout's code, their records) and pause the daemon meanwhile: they write their pid to the pause
file and wait for the daemon's acknowledgement (the same pid in FILE.ack); see `take_over`.
"""

import argparse
import hashlib
import http.server
import json
import logging
import os
import re
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml
from kubernetes import client, config

SELECTORS = ("offhours.io/role in (exit-hook,gate,check-parameters,backstop)", "offhours.io/local-run=true",
             "workflows.argoproj.io/workflow")
# Research pods opt in by image: a step whose image is under this name runs here (its files come
# from the runner's path map, e.g. /app -> examples/reference-job). kwok's stages leave it alone.
LOCAL_IMAGE_PREFIX = "offhours.local/"
CLAIM = "offhours.io/local-runner"
STATUS_TRIES = 10
JOURNAL_CHARS = 20000  # what the journal keeps of each pod's output (the log folder keeps it all)
MESSAGE_BYTES = 2048  # what the kubelet keeps of a log as a termination message
# A namespace or pod name as Kubernetes allows them (DNS-1123): nothing else reaches the log folder.
_OBJECT_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
log = logging.getLogger("podrunner")


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class PodError(Exception):
    """A pod cannot be run as asked; the message says why (it becomes the pod's status message)."""


@dataclass
class Ran:
    """A pod that was run: its name, command, exit code and output."""

    namespace: str
    pod: str
    argv: list[str]
    exit_code: int
    output: str


@dataclass
class LocalPodRunner:
    """Watch namespaces (empty: all) for pods to run locally; run each once."""

    api: client.ApiClient
    server: str
    ca_file: str
    namespaces: tuple[str, ...] = ()
    journal: Path | None = None
    pause_file: Path | None = None
    poll_seconds: float = 0.5
    python: str = sys.executable
    path_map: dict[str, str] = field(default_factory=dict)
    ran: list[Ran] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    outputs: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # (namespace, pod): its lines so far
    log_dir: Path | None = None  # where each pod's output is kept (NS/POD/main.log); None: in memory only
    record_chars: int | None = None  # how much of each output `ran` keeps (None: all; a daemon lives for days)
    identity: str = field(default_factory=lambda: f"{os.uname().nodename}-{os.getpid()}-{time.monotonic_ns()}")
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _log_server: http.server.ThreadingHTTPServer | None = None

    def start(self) -> "LocalPodRunner":
        """Start watching in a background thread."""
        loop = threading.Thread(target=self._loop, daemon=True, name="podrunner")
        loop.start()
        self._threads.append(loop)
        return self

    def stop(self) -> None:
        """Stop watching; wait for the running pods to finish."""
        self._stop.set()
        if self._log_server is not None:
            self._log_server.shutdown()
            self._log_server.server_close()
        for t in self._threads:
            t.join(timeout=60)

    def serve_logs(self, cert_file: str, key_file: str, host: str = "127.0.0.1") -> int:
        """Serve `GET /containerLogs/NS/POD/CONTAINER[?tailLines=N]` over HTTPS, as a kubelet; return the port.

        The log of a pod this runner ran (or runs) is its main container's output so far; any
        other pod or container is a 404 naming why. A second call returns the same server's port.
        """
        return self.serve_logs_on(cert_file, key_file, 0, host)

    def serve_logs_on(self, cert_file: str, key_file: str, port: int, host: str = "127.0.0.1") -> int:
        """Serve the logs (see `serve_logs`) on `port` (0: any free one); return the port."""
        if self._log_server is not None:
            return int(self._log_server.server_address[1])
        lines_of = self.lines_of

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
                url = urlsplit(self.path)
                parts = url.path.strip("/").split("/")
                lines = lines_of(parts[1], parts[2]) if len(parts) == 4 and parts[0] == "containerLogs" else None
                if lines is None or parts[3] != "main":
                    self._answer(404, f"no log of {url.path}: only the main container of a pod the local runner ran\n")
                    return
                tail = parse_qs(url.query).get("tailLines", [""])[0]
                shown = lines[-int(tail):] if tail.isdigit() and int(tail) > 0 else [] if tail == "0" else lines
                self._answer(200, "".join(shown))

            def _answer(self, status: int, text: str) -> None:
                body = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
                log.debug("log server: " + format, *args)

        server = http.server.ThreadingHTTPServer((host, port), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_file, key_file)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        thread = threading.Thread(target=server.serve_forever, daemon=True, name="log server")
        thread.start()
        self._log_server = server
        return int(server.server_address[1])

    def lines_of(self, namespace: str, pod: str) -> list[str] | None:
        """Return the output of pod `namespace/pod` so far (None: no pod this runner or its log folder knows)."""
        lines = self.outputs.get((namespace, pod))
        if lines is not None:
            return list(lines)
        path = self._log_path(namespace, pod)
        if path is None or not path.is_file():
            return None
        return path.read_text(errors="replace").splitlines(keepends=True)

    def _log_path(self, namespace: str, pod: str) -> Path | None:
        if self.log_dir is None or not (_OBJECT_NAME.fullmatch(namespace) and _OBJECT_NAME.fullmatch(pod)):
            return None
        return self.log_dir / namespace / pod / "main.log"

    def _error(self, message: str) -> None:
        log.error(message)
        self.errors.append(message)

    def _paused(self) -> bool:
        if self.pause_file is None or not self.pause_file.exists():
            return False
        try:
            os.kill(int(self.pause_file.read_text().strip()), 0)
        except (ValueError, ProcessLookupError):
            return False  # the process that paused us is gone
        return True

    def _loop(self) -> None:
        core = client.CoreV1Api(self.api)
        was_paused = False
        while not self._stop.wait(self.poll_seconds):
            paused = self._paused()
            if paused != was_paused:
                log.info("paused: another runner has taken over" if paused else "resumed")
                was_paused = paused
            if paused:
                assert self.pause_file is not None
                ack = self.pause_file.with_suffix(".ack")
                if not ack.exists():  # tells the runner that took over that no poll of ours is in flight
                    ack.write_text(self.pause_file.read_text())
                continue
            for selector in SELECTORS:
                try:
                    pods = (core.list_pod_for_all_namespaces(label_selector=selector).items if not self.namespaces
                            else [p for ns in self.namespaces
                                  for p in core.list_namespaced_pod(ns, label_selector=selector).items])
                except Exception as err:  # noqa: BLE001 - logged; the next poll tries again
                    log.warning("listing pods (%s) failed: %s", selector, _short(err))
                    continue
                for pod in pods:
                    if selector == SELECTORS[2] and not _local_image(pod):
                        continue
                    if (not pod.spec.node_name or pod.status.phase not in ("Pending", "Running")
                            or pod.metadata.deletion_timestamp
                            or CLAIM in (pod.metadata.annotations or {})):
                        continue
                    if not self._claim(core, pod):
                        continue
                    worker = threading.Thread(target=self._run_reporting, args=(pod,), daemon=True,
                                              name=f"pod {pod.metadata.name}")
                    worker.start()
                    self._threads.append(worker)

    def _claim(self, core: client.CoreV1Api, pod: Any) -> bool:
        body = {"metadata": {"resourceVersion": pod.metadata.resource_version,
                             "annotations": {CLAIM: self.identity}}}
        try:
            core.patch_namespaced_pod(pod.metadata.name, pod.metadata.namespace, body)
            return True
        except client.ApiException as err:
            if err.status in (404, 409):  # deleted, or changed (claimed by another runner): look again next poll
                return False
            self._error(f"{pod.metadata.namespace}/{pod.metadata.name}: cannot claim: {_short(err)}")
            return False

    def _run_reporting(self, pod: Any) -> None:
        core = client.CoreV1Api(self.api)
        ns, name = pod.metadata.namespace, pod.metadata.name
        try:
            self._run(core, pod)
        except PodError as err:
            self._error(f"{ns}/{name}: {err}")
            self._status(core, ns, name, "Failed", 127, _now(), message=str(err))
        except Exception as err:  # noqa: BLE001 - a runner bug: logged with its traceback, the pod failed
            log.exception("%s/%s: runner error", ns, name)
            self._error(f"{ns}/{name}: runner error: {_short(err)}")
            self._status(core, ns, name, "Failed", 127, _now(), message=f"local runner error: {_short(err)}")

    def _kubeconfig(self, core: client.CoreV1Api, pod: Any, service_account: str, directory: Path) -> Path:
        namespace = pod.metadata.namespace
        # Bound to the pod, as kubelet binds a projected token: the API server then names the pod in the request's
        # user info (authentication.kubernetes.io/pod-name), which the gate-marks policy ties the exit hook to.
        bound = client.V1BoundObjectReference(api_version="v1", kind="Pod", name=pod.metadata.name,
                                              uid=pod.metadata.uid)
        try:
            token = core.create_namespaced_service_account_token(
                service_account, namespace, client.AuthenticationV1TokenRequest(
                    spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600,
                                                   bound_object_ref=bound))).status.token
        except client.ApiException as err:
            raise PodError(f"no token for ServiceAccount {namespace}/{service_account}: {_short(err)}") from None
        path = directory / "kubeconfig"
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "sa",
            "clusters": [{"name": "c", "cluster": {"server": self.server, "certificate-authority": self.ca_file}}],
            "users": [{"name": "sa", "user": {"token": token}}],
            "contexts": [{"name": "sa", "context": {"cluster": "c", "user": "sa", "namespace": namespace}}],
        }))
        return path

    def _run(self, core: client.CoreV1Api, pod: Any) -> None:
        ns, name = pod.metadata.namespace, pod.metadata.name
        main = next((c for c in pod.spec.containers if c.name == "main"), pod.spec.containers[0])
        argv = list(main.command or []) + list(main.args or [])
        if "--" in argv:  # /var/run/argo/argoexec emissary ... -- <program>
            argv = argv[argv.index("--") + 1:]
        if not argv:
            raise PodError(f"container {main.name} has no command to run locally (image {main.image})")
        with tempfile.TemporaryDirectory(prefix=f"pod-{name}-") as tmp:
            work = Path(tmp)
            env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYTHONPATH", "TMPDIR")}
            for var in main.env or []:
                if var.value is not None:
                    env[var.name] = var.value
                elif var.value_from and var.value_from.field_ref:
                    path = var.value_from.field_ref.field_path
                    env[var.name] = {"metadata.namespace": ns, "metadata.name": name}.get(path, "")
            # Argo's init container gets the resolved template (and writes the script where main reads it).
            argo_template = next((e.value for c in (*(pod.spec.init_containers or []), *pod.spec.containers)
                                  for e in c.env or [] if e.name == "ARGO_TEMPLATE" and e.value), "{}")
            template = json.loads(argo_template)
            mounts = self._config_map_mounts(core, pod, main, work)

            def local_paths(text: str) -> str:
                for mount_path, local_dir in (*mounts.items(), *self.path_map.items()):
                    text = text.replace(mount_path, local_dir)
                return text

            if "/argo/staging/script" in argv:
                if not template.get("script"):
                    raise PodError("the pod runs Argo's staged script but its template has none")
                script = work / "script"
                script.write_text(local_paths(template["script"]["source"]))
                argv = [str(script) if a == "/argo/staging/script" else a for a in argv]
            argv = [local_paths(a) for a in argv]
            if argv[0] in ("python", "python3"):
                argv[0] = self.python
            # A program the pod execs by name (e.g. through the launcher) finds this interpreter first.
            env["PATH"] = f"{Path(self.python).parent}:{env.get('PATH', os.defpath)}"
            env["KUBECONFIG"] = str(self._kubeconfig(core, pod, pod.spec.service_account_name or "default", work))
            started = _now()
            self._status(core, ns, name, "Running", None, started)
            try:
                proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        cwd=tmp, start_new_session=True)
            except OSError as err:
                raise PodError(f"cannot start {argv[0]}: {err.strerror or err}") from None
            log.info("%s/%s: running %s (pid %d)", ns, name, " ".join(argv)[:200], proc.pid)
            output = self.outputs.setdefault((ns, name), [])
            reader = threading.Thread(target=self._keep_output, args=(proc, output, self._log_path(ns, name)),
                                      daemon=True)
            reader.start()
            code = self._wait(core, proc, pod)
            reader.join(timeout=10)
        text = "".join(output)
        if self.log_dir is not None:  # kept on disk: a long-lived runner does not hold every pod's output
            self.outputs.pop((ns, name), None)
        kept = text if self.record_chars is None else text[-self.record_chars:]
        self.ran.append(Ran(ns, name, argv, code, kept))
        self._journal(Ran(ns, name, argv, code, text[-JOURNAL_CHARS:]))
        log.info("%s/%s: exit %d", ns, name, code)
        reason = None if code == 0 else (text.strip().splitlines() or [f"exit code {code}"])[-1][:500]
        # Like the kubelet: a failed container with FallbackToLogsOnError gets its log's tail as its message.
        tail = (text.encode()[-MESSAGE_BYTES:].decode(errors="replace").strip()
                if code and main.termination_message_policy == "FallbackToLogsOnError" else None)
        self._status(core, ns, name, "Succeeded" if code == 0 else "Failed", code, started, message=reason,
                     container_message=tail or reason)

    def _keep_output(self, proc: subprocess.Popen[str], output: list[str], path: Path | None) -> None:
        """Collect the process's output line by line, and append each line to its log file as it comes."""
        try:
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
            with (path.open("w") if path is not None else open(os.devnull, "w")) as log_file:
                for line in proc.stdout or []:
                    output.append(line)
                    log_file.write(line)
                    log_file.flush()
        except OSError as err:  # the log file, not the pod: the pod runs on and its output is still collected
            self._error(f"cannot keep the log at {path}: {err}")
            output.extend(proc.stdout or [])

    def _wait(self, core: client.CoreV1Api, proc: subprocess.Popen[str], pod: Any) -> int:
        """Wait for the process; SIGTERM it when its pod is being deleted, SIGKILL after the grace period."""
        ns, name = pod.metadata.namespace, pod.metadata.name
        grace = pod.spec.termination_grace_period_seconds or 30
        killed_at: float | None = None
        while True:
            try:
                return proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass
            if killed_at is None:
                try:
                    deleting = core.read_namespaced_pod(name, ns).metadata.deletion_timestamp is not None
                except client.ApiException as err:
                    deleting = err.status == 404
                    if not deleting:
                        log.warning("%s/%s: reading the pod failed: %s", ns, name, _short(err))
                if deleting:
                    log.info("%s/%s: pod deleted: SIGTERM to %d", ns, name, proc.pid)
                    os.killpg(proc.pid, signal.SIGTERM)
                    killed_at = time.monotonic()
            elif time.monotonic() - killed_at > grace:
                os.killpg(proc.pid, signal.SIGKILL)

    def _config_map_mounts(self, core: client.CoreV1Api, pod: Any, main: Any, work: Path) -> dict[str, str]:
        mounts: dict[str, str] = {}
        volumes = {v.name: v for v in pod.spec.volumes or []}
        for mount in main.volume_mounts or []:
            volume = volumes.get(mount.name)
            if volume is None or volume.config_map is None:
                continue
            source = volume.config_map.name
            try:
                data = core.read_namespaced_config_map(source, pod.metadata.namespace).data or {}
            except client.ApiException as err:
                if err.status == 404 and volume.config_map.optional:
                    data = {}
                else:
                    raise PodError(f"ConfigMap {pod.metadata.namespace}/{source} (volume {mount.name}) "
                                   f"unreadable: {_short(err)}") from None
            local = work / "mounts" / mount.name
            local.mkdir(parents=True)
            for key, text in data.items():
                (local / key).write_text(text)
            mounts[mount.mount_path] = str(local)
        return mounts

    def _journal(self, ran: Ran) -> None:
        if self.journal is not None:
            with self.journal.open("a") as out:
                out.write(json.dumps(asdict(ran)) + "\n")

    def _status(self, core: client.CoreV1Api, ns: str, name: str, phase: str, code: int | None, started: str,
                message: str | None = None, container_message: str | None = None) -> None:
        now = _now()
        main = "main"

        def state(container: str) -> dict[str, Any]:
            if code is None:
                return {"running": {"startedAt": started}}
            own = code if container == main else 0  # Argo's wait container ends well
            text = container_message or message
            return {"terminated": {"exitCode": own, "reason": "Completed" if own == 0 else "Error",
                                   "startedAt": started, "finishedAt": now, **({"message": text} if own and text else {})}}

        last: Exception | None = None
        for _ in range(STATUS_TRIES):
            try:
                pod = core.read_namespaced_pod(name, ns)
                if not any(c.name == "main" for c in pod.spec.containers):
                    main = pod.spec.containers[0].name
                body = {"status": {
                    "phase": phase,
                    **({"message": message} if message else {}),
                    "conditions": [{"type": "Ready", "status": "True" if code is None else "False",
                                    "lastTransitionTime": now}],
                    "containerStatuses": [{"name": c.name, "image": c.image, "imageID": local_image_id(c.image),
                                           "ready": code is None,
                                           "restartCount": 0, "state": state(c.name)} for c in pod.spec.containers],
                    "initContainerStatuses": [{"name": c.name, "image": c.image, "ready": True, "restartCount": 0,
                                               "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                                                                        "startedAt": now, "finishedAt": now}}}
                                              for c in pod.spec.init_containers or []],
                    "startTime": started,
                }}
                core.patch_namespaced_pod_status(name, ns, body)
                return
            except client.ApiException as err:
                if err.status == 404:
                    log.info("%s/%s: pod gone before its %s status was written", ns, name, phase)
                    return
                last = err
                time.sleep(0.5)
        self._error(f"{ns}/{name}: could not write status {phase} after {STATUS_TRIES} tries: {_short(last)}")
        if phase != "Failed":  # the pod must not look like it is still running: one last try at Failed
            try:
                core.patch_namespaced_pod_status(name, ns, {"status": {
                    "phase": "Failed", "message": f"local runner could not report {phase}: {_short(last)}"}})
            except client.ApiException as err:
                self._error(f"{ns}/{name}: could not mark it Failed either: {_short(err)}")


def local_image_id(image: str | None) -> str:
    """Return the `imageID` a kubelet would report for `image`, as this runner "pulls" it: `name@sha256:<digest>`.

    An image given by digest runs that digest; a tag resolves to the digest of its reference's text, so the
    same tag always reports the same digest here (a registry could move it; this runner never does).
    """
    ref = image or ""
    if "@sha256:" in ref:
        return ref
    slash, colon = ref.rfind("/"), ref.rfind(":")
    name = ref[:colon] if colon > slash else ref
    return f"{name}@sha256:{hashlib.sha256(ref.encode()).hexdigest()}"


def _local_image(pod: Any) -> bool:
    return any(c.name == "main" and (c.image or "").startswith(LOCAL_IMAGE_PREFIX) for c in pod.spec.containers)


def _short(err: BaseException | None) -> str:
    if isinstance(err, client.ApiException):
        try:
            return f"HTTP {err.status}: {json.loads(err.body or '')['message']}"
        except (ValueError, KeyError, TypeError):
            return f"HTTP {err.status} {err.reason}"
    return f"{type(err).__name__}: {err}"


def take_over(pause_file: Path, daemon_pid: int | None, timeout: float = 30.0) -> None:
    """Pause the daemon runner (if one runs) for this process; return once it has acknowledged."""
    ack = pause_file.with_suffix(".ack")
    ack.unlink(missing_ok=True)
    pause_file.write_text(str(os.getpid()))
    if daemon_pid is None:
        return
    try:
        os.kill(daemon_pid, 0)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ack.exists() and ack.read_text().strip() == str(os.getpid()):
            return
        time.sleep(0.1)
    raise TimeoutError(f"the local pod runner (pid {daemon_pid}) did not pause within {timeout:.0f} s")


def hand_back(pause_file: Path) -> None:
    """Let the daemon runner run pods again."""
    pause_file.unlink(missing_ok=True)
    pause_file.with_suffix(".ack").unlink(missing_ok=True)


def read_journal(path: Path) -> list[Ran]:
    """Return the pods a daemon runner recorded in its journal."""
    if not path.exists():
        return []
    return [Ran(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def from_kubeconfig(kubeconfig: str, **kw: Any) -> LocalPodRunner:
    """Return a runner for the cluster of `kubeconfig` (whose CA file the pods' kubeconfigs reuse)."""
    cluster = yaml.safe_load(Path(kubeconfig).read_text())["clusters"][0]["cluster"]
    return LocalPodRunner(config.new_client_from_config(kubeconfig), cluster["server"],
                          cluster["certificate-authority"], **kw)


def main(argv: list[str] | None = None) -> int:
    """Run as a daemon until SIGTERM."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", required=True, help="admin kubeconfig of the local cluster")
    parser.add_argument("--journal", type=Path, help="append a JSON line per pod run here")
    parser.add_argument("--pause-file", type=Path, help="while this file holds a live pid, run nothing")
    parser.add_argument("-n", "--namespace", action="append", default=[], help="watch only these (default: all)")
    parser.add_argument("--map", action="append", default=[], metavar="POD_PATH=LOCAL_PATH",
                        help="where a path of the pod's image is on this machine (repeatable)")
    parser.add_argument("--log-dir", type=Path, help="keep each pod's output here (NS/POD/main.log)")
    parser.add_argument("--log-port", type=int, help="serve the logs as a kubelet on this port (HTTPS)")
    parser.add_argument("--tls-cert", help="certificate of the log server (with --log-port)")
    parser.add_argument("--tls-key", help="its key")
    args = parser.parse_args(argv)
    if args.log_port is not None and not (args.tls_cert and args.tls_key):
        parser.error("--log-port needs --tls-cert and --tls-key: the API server reaches a kubelet over HTTPS")
    path_map = dict(item.split("=", 1) for item in args.map)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    runner = from_kubeconfig(args.kubeconfig, namespaces=tuple(args.namespace), journal=args.journal,
                             pause_file=args.pause_file, path_map=path_map, log_dir=args.log_dir,
                             record_chars=JOURNAL_CHARS)
    if args.log_port is not None:
        for attempt in range(30):  # a runner stopped just before may hold the port for a moment
            try:
                runner.serve_logs_on(args.tls_cert, args.tls_key, args.log_port)
                break
            except OSError as err:
                if attempt == 29:
                    log.error("cannot serve pod logs on 127.0.0.1:%d: %s", args.log_port, err)
                    return 1
                time.sleep(0.5)
        log.info("serving pod logs as a kubelet on 127.0.0.1:%d", args.log_port)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    runner.start()
    log.info("local pod runner up (%s); watching %s", runner.identity, ", ".join(args.namespace) or "all namespaces")
    stop.wait()
    runner.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
