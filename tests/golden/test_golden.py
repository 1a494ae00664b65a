"""Every rendered manifest matches its committed golden YAML (regenerate with --regen-golden)."""

from pathlib import Path

import pytest

from offhours.workflows.render import rendered_files

GOLDEN = Path(__file__).parent
RENDERED = rendered_files()


@pytest.mark.parametrize("name", sorted(RENDERED))
def test_rendered_manifest_matches_golden(name: str, regen_golden: bool) -> None:
    golden = GOLDEN / name
    before = golden.read_text() if golden.exists() else None
    if regen_golden and before != RENDERED[name]:
        # Rewritten, so not compared: this run fails; the next one compares the new file.
        GOLDEN.mkdir(exist_ok=True)
        golden.write_text(RENDERED[name])
        pytest.fail(f"{name}: golden {'written' if before is None else 'rewritten'}: review `git diff tests/golden`")
    assert before is not None, f"no golden for {name}: run `make golden`"
    assert RENDERED[name] == before, f"{name} differs from its golden: run `make golden` and review"


def test_no_stale_goldens(regen_golden: bool) -> None:
    stale = sorted(p.name for p in GOLDEN.glob("*.yaml") if p.name not in RENDERED)
    if regen_golden and stale:
        for name in stale:
            (GOLDEN / name).unlink()
        pytest.fail(f"removed stale goldens {stale}: review `git status tests/golden`")
    assert stale == []
    assert sorted(p.name for p in GOLDEN.glob("*.yaml")) == sorted(RENDERED)


def test_render_command_writes_the_goldens(tmp_path: Path) -> None:
    from offhours.scripts.cli.main import main

    assert main(["render", "--out", str(tmp_path)]) == 0
    for name in RENDERED:
        assert (tmp_path / name).read_text() == (GOLDEN / name).read_text()


def test_render_refuses_a_bad_gate_config_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from offhours.scripts.cli.main import main

    config = tmp_path / "one-namespace.yaml"
    config.write_text("namespace: ml\nmetrics: {source: direct}\nservices: {chat: {capacity: {requestsPerSecond: 1}}}\n")
    assert main(["render", "--out", str(tmp_path / "out"), "--gate-config", str(config)]) == 2
    assert capsys.readouterr().err.startswith("gate config: namespace and workflowNamespace are both 'ml'")
    assert not (tmp_path / "out").exists()
    assert main(["render", "--out", str(tmp_path / "out"), "--gate-config", str(tmp_path / "missing.yaml")]) == 2
    assert capsys.readouterr().err == f"render: cannot read {tmp_path / 'missing.yaml'}: No such file or directory\n"


def test_render_with_a_gate_config_and_an_image(tmp_path: Path) -> None:
    from offhours.scripts.cli.main import main

    config = tmp_path / "gate.yaml"
    config.write_text("namespace: inference\nworkflowNamespace: lab\nmetrics: {source: direct}\n"
                      "services: {chat: {deployment: chat-v2, capacity: {requestsPerSecond: 1}}}\n")
    assert main(["render", "--out", str(tmp_path / "out"), "--gate-config", str(config),
                 "--image", "registry.lab/offhours:7"]) == 0
    out = tmp_path / "out"
    assert (out / "configmap-offhours-gate-config.yaml").read_text().count("workflowNamespace: lab") == 1
    assert (out / "namespace-inference.yaml").exists() and (out / "namespace-lab.yaml").exists()
    text = "".join(p.read_text() for p in out.glob("*.yaml"))
    # Ten uses: the templates, the gate's CronWorkflow and the backstop's CronJob.
    assert "ghcr.io/offhours/offhours" not in text and text.count("registry.lab/offhours:7") == 10
    assert "resourceNames:\n  - chat-v2" in (out / "role-inference-offhours-gate.yaml").read_text()
