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


def test_the_console_reads_no_pods_nor_logs_and_may_only_review_tokens_cluster_wide() -> None:
    docs = console_manifests(example_gate_config()).values()
    resources = {r for m in docs if m["kind"] == "Role" for rule in m["rules"] for r in rule["resources"]}
    assert resources == {"configmaps", "deployments", "workflows"}
    (cluster_role,) = [m for m in docs if m["kind"] == "ClusterRole"]
    assert [(rule["resources"], rule["verbs"]) for rule in cluster_role["rules"]] == [
        (["tokenreviews"], ["create"]), (["subjectaccessreviews"], ["create"])]


def test_the_console_authenticates_and_ships_a_network_policy() -> None:
    docs = console_manifests(example_gate_config())
    command = docs["deployment-offhours-console.yaml"]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[command.index("--auth") + 1] == "kubernetes"
    policy = docs["networkpolicy-offhours-console.yaml"]["spec"]
    assert policy["policyTypes"] == ["Ingress"]
    assert policy["ingress"][0]["from"] == [{"namespaceSelector": {},
                                             "podSelector": {"matchLabels": {"offhours.io/console-client": "true"}}}]
