"""Test helpers: a fleet of emulated vLLM servers on loopback, wired into a MemoryCluster."""

import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import requests

from offhours.scripts.cluster.memory import MemoryCluster
from offhours.scripts.metrics.emulator import EmulatedServer, Fleet
from tests.support.templates import install_library_templates


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class EmulatedService:
    """One inference service: its emulated pods on <ip_prefix>.<subnet>.<i>, all on one port."""

    name: str
    replicas: int
    subnet: int
    port: int
    ip_prefix: str = "127.0"
    servers: list[EmulatedServer] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.servers = [EmulatedServer(engines=2) for _ in range(self.replicas)]

    @property
    def ips(self) -> list[str]:
        return [f"{self.ip_prefix}.{self.subnet}.{i + 1}" for i in range(self.replicas)]

    def feed(self, rps: float, seconds: float, serving: int | None = None, waiting: float = 0.0) -> None:
        """Spread `rps` over the first `serving` pods (those in service) for `seconds`."""
        serving = serving or self.replicas
        for server in self.servers[:serving]:
            server.feed(rps * seconds / serving, rps * seconds * 122 / serving, rps * seconds * 15 / serving, seconds,
                        waiting=waiting / serving)


def start_fleet(services: list[EmulatedService]) -> Fleet:
    return Fleet([(ip, s.port, server) for s in services for ip, server in zip(s.ips, s.servers)]).start()


def cluster_for(services: list[EmulatedService], namespace: str = "serving",
                workflow_namespace: str | None = None) -> MemoryCluster:
    """An in-memory cluster with the services' Deployments, and the library's WorkflowTemplates where workflows run."""
    cluster = install_library_templates(MemoryCluster(), workflow_namespace or namespace)
    for s in services:
        cluster.add_deployment(namespace, s.name, s.replicas, pod_ips=s.ips)
    return cluster


def wait_until_serving(proc: "subprocess.Popen[bytes]", url: str, log: Path, what: str, timeout: float,
                       ready: Callable[["requests.Response"], bool] = lambda r: True) -> None:
    """Wait until `url` answers (and `ready` accepts the answer); fail with the log if the process dies."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, log.read_text()[-2000:]
        try:
            if ready(requests.get(url, timeout=1)):
                return
        except requests.RequestException:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{what} did not answer at {url} in {timeout:.0f} s")
