"""The console's optional install: golden YAML, and read-only rights only."""

from pathlib import Path

import pytest

from offhours.scripts.console.manifests import console_manifests
from offhours.workflows.render import example_gate_config, to_yaml

GOLDEN = Path(__file__).parents[1] / "golden" / "console"
RENDERED = {name: to_yaml(m) for name, m in console_manifests(example_gate_config()).items()}


@pytest.mark.parametrize("name", sorted(RENDERED))
def test_console_manifest_matches_golden(name: str, regen_golden: bool) -> None:
    if regen_golden:
        GOLDEN.mkdir(parents=True, exist_ok=True)
        (GOLDEN / name).write_text(RENDERED[name])
    assert (GOLDEN / name).read_text() == RENDERED[name], f"{name}: run pytest {__file__} --regen-golden and review"


def test_no_stale_console_goldens() -> None:
    assert sorted(p.name for p in GOLDEN.glob("*.yaml")) == sorted(RENDERED)


def test_the_console_can_only_read() -> None:
    verbs = {verb for m in console_manifests(example_gate_config()).values() if m["kind"] == "Role"
             for rule in m["rules"] for verb in rule["verbs"]}
    assert verbs == {"get", "list"}
