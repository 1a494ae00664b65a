"""Run the pods whose program matters as real local processes, on a cluster whose nodes are kwok fakes.

kwok runs no containers. The pods of the `return-gpus` exit hook, of the gate's tick and of the
parameter check (labels offhours.io/role=exit-hook|gate|check-parameters; the cluster's kwok
stages leave them alone, or a workflow annotated offhours.io/e2e-run-for keeps them Running) are run here: their
main container's command (what Argo's emissary would exec) as a local process, with the pod's
environment, its ConfigMap volumes materialised, and a kubeconfig holding a token of the pod's
ServiceAccount, so RBAC applies as in the cluster. The pod's status follows the process: Running,
then Succeeded or Failed with the exit code on the main container (Argo's wait container exits 0);
like the kubelet, a failed main container with terminationMessagePolicy FallbackToLogsOnError gets
the tail of its output as its termination message.
"""

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kubernetes import client

ROLES = ("exit-hook", "gate", "check-parameters")
_MESSAGE_BYTES = 2048  # what the kubelet keeps of a log as a termination message


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Ran:
    """A pod that was run: its name, command and exit code."""

    namespace: str
    pod: str
    argv: list[str]
    exit_code: int
    output: str


@dataclass
class LocalPodRunner:
    """Watch namespaces for pods to run locally; run each once."""

    api: client.ApiClient
    server: str
    ca_file: str
    namespaces: tuple[str, ...]
    ran: list[Ran] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> "LocalPodRunner":
        loop = threading.Thread(target=self._loop, daemon=True)
        loop.start()
        self._threads.append(loop)
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=60)

    def _loop(self) -> None:
        core = client.CoreV1Api(self.api)
        selector = f"offhours.io/role in ({','.join(ROLES)})"
        while not self._stop.wait(0.5):
            for ns in self.namespaces:
                try:
                    pods = core.list_namespaced_pod(ns, label_selector=selector).items
                except Exception:  # noqa: BLE001 - the API may be briefly unavailable
                    continue
                for pod in pods:
                    key = f"{ns}/{pod.metadata.name}"
                    if key in self._seen or not pod.spec.node_name or pod.status.phase not in ("Pending", "Running"):
                        continue
                    self._seen.add(key)
                    worker = threading.Thread(target=self._run, args=(pod,), daemon=True)
                    worker.start()
                    self._threads.append(worker)

    def _kubeconfig(self, namespace: str, service_account: str, directory: Path) -> Path:
        core = client.CoreV1Api(self.api)
        token = core.create_namespaced_service_account_token(
            service_account, namespace, client.AuthenticationV1TokenRequest(
                spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600))).status.token
        path = directory / "kubeconfig"
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "sa",
            "clusters": [{"name": "c", "cluster": {"server": self.server, "certificate-authority": self.ca_file}}],
            "users": [{"name": "sa", "user": {"token": token}}],
            "contexts": [{"name": "sa", "context": {"cluster": "c", "user": "sa", "namespace": namespace}}],
        }))
        return path

    def _run(self, pod: Any) -> None:
        core = client.CoreV1Api(self.api)
        ns, name = pod.metadata.namespace, pod.metadata.name
        main = next(c for c in pod.spec.containers if c.name == "main")
        argv = list(main.command or []) + list(main.args or [])
        if "--" in argv:  # /var/run/argo/argoexec emissary ... -- <program>
            argv = argv[argv.index("--") + 1:]
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYTHONPATH")}
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
            mounts: dict[str, str] = {}
            volumes = {v.name: v for v in pod.spec.volumes or []}
            for mount in main.volume_mounts or []:
                volume = volumes.get(mount.name)
                if volume is None or volume.config_map is None:
                    continue
                local = work / "mounts" / mount.name
                local.mkdir(parents=True)
                try:
                    data = core.read_namespaced_config_map(volume.config_map.name, ns).data or {}
                except client.ApiException:
                    data = {}
                for key, text in data.items():
                    (local / key).write_text(text)
                mounts[mount.mount_path] = str(local)

            def local_paths(text: str) -> str:
                for mount_path, local_dir in mounts.items():
                    text = text.replace(mount_path, local_dir)
                return text

            if "/argo/staging/script" in argv and template.get("script"):
                script = work / "script"
                script.write_text(local_paths(template["script"]["source"]))
                argv = [str(script) if a == "/argo/staging/script" else a for a in argv]
            argv = [local_paths(a) for a in argv]
            if argv and argv[0] == "python":
                argv[0] = sys.executable
            env["KUBECONFIG"] = str(self._kubeconfig(ns, pod.spec.service_account_name or "default", work))
            started = _now()
            self._status(core, ns, name, "Running", None, started)
            try:
                done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, cwd=tmp)
                code, output = done.returncode, done.stdout + done.stderr
            except (OSError, subprocess.TimeoutExpired) as err:
                code, output = 127, str(err)
        self.ran.append(Ran(ns, name, argv, code, output))
        message = ""
        if code and main.termination_message_policy == "FallbackToLogsOnError":
            message = output.encode()[-_MESSAGE_BYTES:].decode(errors="replace").strip()
        self._status(core, ns, name, "Succeeded" if code == 0 else "Failed", code, started, message)

    @staticmethod
    def _status(core: client.CoreV1Api, ns: str, name: str, phase: str, code: int | None, started: str,
                message: str = "") -> None:
        now = _now()

        def state(container: str) -> dict[str, Any]:
            if code is None:
                return {"running": {"startedAt": started}}
            own = code if container == "main" else 0
            return {"terminated": {"exitCode": own, "reason": "Completed" if own == 0 else "Error",
                                   "startedAt": started, "finishedAt": now,
                                   **({"message": message} if own and message else {})}}

        try:
            pod = core.read_namespaced_pod(name, ns)
        except client.ApiException:
            return  # the pod is gone (its workflow was deleted): nothing to report
        body = {"status": {
            "phase": phase,
            "conditions": [{"type": "Ready", "status": "True" if code is None else "False", "lastTransitionTime": now}],
            "containerStatuses": [{"name": c.name, "image": c.image, "ready": code is None, "restartCount": 0,
                                   "state": state(c.name)} for c in pod.spec.containers],
            "initContainerStatuses": [{"name": c.name, "image": c.image, "ready": True, "restartCount": 0,
                                       "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now,
                                                                "finishedAt": now}}}
                                      for c in pod.spec.init_containers or []],
            "startTime": started,
        }}
        for _ in range(10):
            try:
                core.patch_namespaced_pod_status(name, ns, body)
                return
            except client.ApiException:
                time.sleep(0.5)
