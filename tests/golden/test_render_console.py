"""`offhours render --console`: the install plus the web console's manifests, in one kustomization.

The console's manifests have their goldens in tests/golden/console, the rest of the install in
tests/golden; the kustomization that lists both is tests/golden/render-console/kustomization.yaml.
"""

from pathlib import Path

import pytest
import yaml

from offhours.scripts.cli.main import main
from offhours.workflows.render import rendered_files

GOLDEN = Path(__file__).parent
KUSTOMIZATION = GOLDEN / "render-console" / "kustomization.yaml"
RENDERED = rendered_files(console=True)


def test_kustomization_with_the_console_matches_golden(regen_golden: bool) -> None:
    if regen_golden and (not KUSTOMIZATION.exists() or KUSTOMIZATION.read_text() != RENDERED["kustomization.yaml"]):
        KUSTOMIZATION.parent.mkdir(exist_ok=True)
        KUSTOMIZATION.write_text(RENDERED["kustomization.yaml"])
        pytest.fail("render-console/kustomization.yaml rewritten: review `git diff tests/golden`")
    assert RENDERED["kustomization.yaml"] == KUSTOMIZATION.read_text()


def test_render_console_is_the_install_plus_the_console_goldens() -> None:
    # Every file but the kustomization is a committed golden: the install's or the console's, none changed.
    without = rendered_files()
    console = sorted(p.name for p in (GOLDEN / "console").glob("*.yaml"))
    assert sorted(RENDERED) == sorted([*without, *console])
    for name, text in RENDERED.items():
        if name == "kustomization.yaml":
            continue
        golden = GOLDEN / "console" / name if name in console else GOLDEN / name
        assert text == golden.read_text(), name
    # The kustomization installs the same install first, in the same order, then the console.
    listed = yaml.safe_load(RENDERED["kustomization.yaml"])["resources"]
    assert listed == yaml.safe_load(without["kustomization.yaml"])["resources"] + [
        "serviceaccount-offhours-console.yaml", "role-offhours-console.yaml", "rolebinding-offhours-console.yaml",
        "role-offhours-console-research.yaml", "rolebinding-offhours-console-research.yaml",
        "clusterrole-offhours-console-auth.yaml", "clusterrolebinding-offhours-console-auth.yaml",
        "deployment-offhours-console.yaml", "service-offhours-console.yaml", "networkpolicy-offhours-console.yaml"]


def test_render_command_with_console_writes_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "--out", str(tmp_path), "--console"]) == 0
    printed = capsys.readouterr().out.split()
    assert sorted(Path(p).name for p in printed) == sorted(RENDERED)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(RENDERED)
    for name, text in RENDERED.items():
        assert (tmp_path / name).read_text() == text


def test_render_without_console_has_no_console_manifest(tmp_path: Path) -> None:
    assert main(["render", "--out", str(tmp_path)]) == 0
    assert [p.name for p in tmp_path.iterdir() if "console" in p.name] == []
    assert "console" not in (tmp_path / "kustomization.yaml").read_text()


def test_render_console_follows_the_gate_config_and_image(tmp_path: Path) -> None:
    config = tmp_path / "gate.yaml"
    config.write_text("namespace: inference\nworkflowNamespace: lab\nmetrics: {source: direct}\n"
                      "services: {chat: {capacity: {requestsPerSecond: 1}}}\n")
    out = tmp_path / "out"
    assert main(["render", "--out", str(out), "--gate-config", str(config), "--image", "registry.lab/offhours:7",
                 "--console"]) == 0
    deployment = yaml.safe_load((out / "deployment-offhours-console.yaml").read_text())
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert deployment["metadata"]["namespace"] == "inference" and container["image"] == "registry.lab/offhours:7"
    assert container["command"][-6:] == ["-n", "lab", "--serving-namespace", "inference", "--auth", "kubernetes"]
    research_role = yaml.safe_load((out / "role-offhours-console-research.yaml").read_text())
    assert research_role["metadata"]["namespace"] == "lab"
    binding = yaml.safe_load((out / "rolebinding-offhours-console-research.yaml").read_text())
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "offhours-console", "namespace": "inference"}]


def test_render_console_with_a_bad_gate_config_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("namespace: ml\nmetrics: {source: direct}\nservices: {chat: {capacity: {requestsPerSecond: 1}}}\n")
    assert main(["render", "--out", str(tmp_path / "out"), "--gate-config", str(config), "--console"]) == 2
    assert capsys.readouterr().err.startswith("gate config: namespace and workflowNamespace are both 'ml'")
    assert not (tmp_path / "out").exists()
