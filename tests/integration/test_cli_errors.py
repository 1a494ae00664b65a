"""Expected errors of the command line: one line naming what is wrong, an exit code, no traceback."""

import argparse
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes.client.exceptions import ApiException

from offhours.scripts.cli.errors import run_command
from offhours.scripts.cli.namespaces import gate_config, resolve
from offhours.scripts.cluster.errors import explain


def _kubeconfig(path: Path, server: str, namespace: str | None = None) -> Path:
    context: dict[str, str] = {"cluster": "c", "user": "u"}
    if namespace:
        context["namespace"] = namespace
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "ctx",
        "clusters": [{"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "ctx", "context": context}]}))
    return path


def _offhours(*args: str, kubeconfig: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    env["KUBECONFIG"] = kubeconfig
    return subprocess.run([sys.executable, "-m", "offhours.scripts.cli.main", *args], env=env, capture_output=True,
                          text=True, timeout=120)


def _api_error(status: int, reason: str, message: str) -> ApiException:
    err = ApiException(status=status, reason=reason)
    err.body = json.dumps({"kind": "Status", "status": "Failure", "message": message, "code": status})
    return err


def test_api_answers_become_one_line_with_the_servers_sentence() -> None:
    assert explain(_api_error(404, "Not Found", 'workflowtemplates.argoproj.io "nope" not found')) == (
        'not found: workflowtemplates.argoproj.io "nope" not found', 1)
    assert explain(_api_error(403, "Forbidden", 'workflows.argoproj.io is forbidden: User "x" cannot list')) == (
        'no rights: workflows.argoproj.io is forbidden: User "x" cannot list', 1)
    no_body = ApiException(status=500, reason="Internal Server Error")
    assert explain(no_body) == ("HTTP 500: Internal Server Error", 1)


def test_a_bug_keeps_its_traceback() -> None:
    assert explain(ValueError("bug")) is None

    def broken(args: argparse.Namespace) -> int:
        raise KeyError("bug")
    with pytest.raises(KeyError):
        run_command(broken, argparse.Namespace(command="x"))


def test_expected_error_is_printed_once_with_the_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    def missing(args: argparse.Namespace) -> int:
        raise _api_error(404, "Not Found", 'namespaces "lab" not found')
    assert run_command(missing, argparse.Namespace(command="submit")) == 1
    assert capsys.readouterr().err == 'offhours submit: not found: namespaces "lab" not found\n'


def test_no_kubeconfig_is_one_line_exit_2(tmp_path: Path) -> None:
    run = _offhours("submit", "offhours-job", "-n", "research", kubeconfig=str(tmp_path / "missing"))
    assert run.returncode == 2
    assert run.stderr.startswith(f"offhours submit: no cluster: no Kubernetes configuration in {tmp_path / 'missing'} ")
    assert "make cluster-up" in run.stderr  # how to get one
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr


def test_unreachable_api_server_is_one_line_exit_1(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = _kubeconfig(tmp_path / "kubeconfig", f"https://127.0.0.1:{port}")
    run = _offhours("submit", "offhours-job", "-n", "research", kubeconfig=str(config))
    assert run.returncode == 1
    assert run.stderr.startswith(f"offhours submit: no cluster: cannot reach the API server at https://127.0.0.1:{port} "
                                 "(connection refused); start the local one with `make cluster-up`")
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr


CLUSTER_VERBS = [["jobs"], ["why", "x"], ["logs", "x"], ["cancel", "x", "--yes"], ["usage"], ["report"], ["console"],
                 ["schedule", "list"], ["submit", "offhours-job"], ["check"]]


@pytest.mark.parametrize("verb", CLUSTER_VERBS, ids=lambda v: v[0])
def test_every_cluster_verb_without_a_cluster_is_one_line_saying_how_to_get_one(verb: list[str], tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = _kubeconfig(tmp_path / "kubeconfig", f"https://127.0.0.1:{port}", namespace="research")
    run = _offhours(*verb, kubeconfig=str(config))
    assert run.returncode == 1, run.stderr
    assert run.stderr == (f"offhours {verb[0]}: no cluster: cannot reach the API server at https://127.0.0.1:{port} "
                          "(connection refused); start the local one with `make cluster-up` and "
                          "`eval \"$(python3 scripts/controlplane/lifecycle.py env)\"`, or set KUBECONFIG to your "
                          "cluster's\n")
    missing = _offhours(*verb, kubeconfig=str(tmp_path / "none"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "make cluster-up" in missing.stderr


def test_namespace_defaults_to_the_context_then_the_gate_configs_research_namespace(tmp_path: Path) -> None:
    with_ns = _kubeconfig(tmp_path / "a", "https://127.0.0.1:1", namespace="team-a")
    without = _kubeconfig(tmp_path / "b", "https://127.0.0.1:1")
    gate = tmp_path / "gate.yaml"
    gate.write_text("namespace: inference\nworkflowNamespace: lab\nservices:\n  chat:\n"
                    "    capacity: {requestsPerSecond: 1}\n")

    def research(config: str | None, kubeconfig: Path) -> str:
        return resolve(None, None, gate_config(config), str(kubeconfig)).research

    assert research(None, with_ns) == "team-a"
    assert research(str(gate), with_ns) == "team-a"
    assert research(str(gate), without) == "lab"
    assert research(None, without) == "research"  # the bundled example's
    assert research(None, tmp_path / "missing") == "research"
