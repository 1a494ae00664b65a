"""`offhours validate` says before submission what the admission policies would refuse, with the path and the fix."""

from pathlib import Path

import pytest

from offhours.scripts.cli.main import main

POD = """apiVersion: v1
kind: Pod
metadata: {name: mine}
spec:
  priorityClassName: offhours-best-effort
  nodeName: gpu-07
  tolerations: [{key: pool.example.com/gpu, operator: Exists}]
  containers: [{name: main, image: busybox}]
"""


def test_a_pod_outside_the_boundary_is_refused_with_each_field_and_its_fix(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pod.yaml").write_text(POD)
    assert main(["validate", str(tmp_path / "pod.yaml")]) == 1
    out = capsys.readouterr().out
    assert "spec.nodeName: nodeName is set (gpu-07), which skips the scheduler" in out
    assert "spec.tolerations[0]: tolerations may tolerate only the taint keys nvidia.com/gpu" in out


def test_the_installed_gate_configuration_says_which_tolerations_are_allowed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pod.yaml").write_text(POD.replace("  nodeName: gpu-07\n", ""))
    config = tmp_path / "gate.yaml"
    config.write_text("namespace: serving\nworkflowNamespace: research\nmetrics: {source: direct}\n"
                      "services: {chat: {capacity: {requestsPerSecond: 1}}}\n"
                      "research: {tolerationKeys: [pool.example.com/gpu]}\n")
    assert main(["validate", "--gate-config", str(config), str(tmp_path / "pod.yaml")]) == 0
    capsys.readouterr()
    config.write_text("research: {tolerationKeys: 3}\n")
    assert main(["validate", "--gate-config", str(config), str(tmp_path / "pod.yaml")]) == 2
    assert capsys.readouterr().err == "validate: gate config: (top level): 'services' is a required property\n"


def test_a_workflow_carrying_the_gates_marks_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "wf.yaml").write_text(
        "apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata:\n  generateName: x-\n"
        "  labels: {offhours.io/state: admitted}\nspec:\n  entrypoint: m\n  templates:\n"
        "  - {name: m, container: {image: busybox}}\n")
    assert main(["validate", str(tmp_path / "wf.yaml")]) == 1
    assert "metadata.labels.offhours.io/state: label offhours.io/state is admitted" in capsys.readouterr().out
