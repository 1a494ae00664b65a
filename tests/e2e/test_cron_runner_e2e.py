"""The gate CronWorkflow's step, run as Argo runs it (Hera's runner with an inputs file), against the real API server.

The offline suite checks its error exit (tests/test_cron.py); this is its success path: a dry run
reads the Deployment and the workflows, prints the tick's plan, exits 0 and writes nothing.
"""

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import yaml
from kubernetes import client

from .conftest import SERVING, gate_config_raw


def test_the_runner_entrypoint_runs_a_dry_run_tick_and_exits_0(
        chat_service: Callable[[int], None], api: client.ApiClient, cluster_env: dict[str, str], tmp_path: Path) -> None:
    chat_service(3)
    core = client.CoreV1Api(api)
    core.delete_collection_namespaced_config_map(SERVING, field_selector="metadata.name=offhours-state-chat")
    config = tmp_path / "gate.yaml"
    config.write_text(yaml.safe_dump(gate_config_raw(8000)))
    inputs = tmp_path / "inputs.json"  # Argo writes {{inputs.parameters}} to a file and appends its path
    inputs.write_text(json.dumps([{"name": "config", "value": str(config)}, {"name": "dry_run", "value": "true"},
                                  {"name": "seconds", "value": "0"}, {"name": "created", "value": ""},
                                  {"name": "metrics_port", "value": "0"}]))
    run = subprocess.run([sys.executable, "-m", "hera.workflows.runner", "-e", "offhours.cronworkflows.gate:gate_tick",
                          str(inputs)], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "KUBECONFIG": cluster_env["KUBECONFIG"]})
    assert run.returncode == 0, run.stderr
    # The kwok pods serve no metrics: the reading fails, and the plan is to hold with nothing lent.
    line = next(line for line in run.stdout.splitlines() if line.startswith("level=info service=chat "))
    assert 'msg="hold lent 0 -> 0 of baseline 3;' in line and "no lending" in line, run.stdout
    assert client.AppsV1Api(api).read_namespaced_deployment("chat", SERVING).spec.replicas == 3
    assert not core.list_namespaced_config_map(SERVING, field_selector="metadata.name=offhours-state-chat").items
