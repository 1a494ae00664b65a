"""One namespace rule for every cluster verb: `-n`, else the kubeconfig context's, else the gate configuration's.

Invariants, in words:
- whichever of the three is present, the first present one in that order is the namespace a verb reads;
- every cluster verb takes `-n/--namespace` and, without it, asks the API about the namespace the rule
  chose (never a hard-coded `default`);
- an empty answer names the namespace it looked in and which rule chose it, and says differently
  whether finished jobs were included.
"""

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes import client

from offhours.scripts.cli import connect as connect_module
from offhours.scripts.cli import namespaces as ns_module
from offhours.scripts.cli.main import main, parser
from offhours.scripts.cli.namespaces import FROM_CONFIG, FROM_CONTEXT, FROM_FLAG, resolve
from offhours.scripts.config.loader import parse_config

NAME = st.from_regex(r"[a-z][a-z0-9-]{0,20}[a-z0-9]", fullmatch=True)


def _config(research: str = "lab", serving: str = "inference") -> Any:
    return parse_config({"namespace": serving, "workflowNamespace": research,
                         "services": {"chat": {"capacity": {"requestsPerSecond": 1}}}})


def _kubeconfig(path: Path, namespace: str | None) -> str:
    context: dict[str, str] = {"cluster": "c", "user": "u"}
    if namespace:
        context["namespace"] = namespace
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "ctx",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}], "contexts": [{"name": "ctx", "context": context}]}))
    return str(path)


@settings(max_examples=40, deadline=None)
@given(flag=st.none() | NAME, context=st.none() | NAME, research=NAME, serving=NAME)
def test_the_first_present_of_flag_context_configuration_decides(tmp_path_factory: pytest.TempPathFactory,
                                                                 flag: str | None, context: str | None,
                                                                 research: str, serving: str) -> None:
    kubeconfig = _kubeconfig(tmp_path_factory.mktemp("k") / "config", context)
    got = resolve(flag, None, _config(research, serving), kubeconfig)
    want = flag or context or research
    assert got.research == want
    assert got.where == (FROM_FLAG if flag else FROM_CONTEXT if context else FROM_CONFIG)
    assert got.serving == serving  # the serving namespace is the configuration's, whatever chose the research one
    assert want in got.described() and got.where in got.described()


def test_no_kubeconfig_at_all_falls_to_the_configuration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ns_module, "IN_CLUSTER_NAMESPACE", tmp_path / "no-such-file")
    got = resolve(None, "srv", _config(), str(tmp_path / "missing"))
    assert (got.research, got.serving, got.where) == ("lab", "srv", FROM_CONFIG)


CLUSTER_VERBS = [["jobs"], ["why", "x"], ["logs", "x"], ["cancel", "x"], ["usage"], ["console"], ["report"],
                 ["submit", "offhours-job"], ["schedule", "list"], ["check"]]


@pytest.mark.parametrize("verb", CLUSTER_VERBS, ids=lambda v: v[0])
@pytest.mark.parametrize("flag", ["-n", "--namespace"])
def test_every_cluster_verb_takes_the_namespace_flag(verb: list[str], flag: str) -> None:
    assert parser().parse_args([*verb, flag, "team-b"]).namespace == "team-b"


class RecordingApi(client.ApiClient):
    """The Kubernetes API as the generated client calls it: every call recorded, every answer empty."""

    def __init__(self, template: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.template = template

    def call_api(self, resource_path: str, method: str, path_params: Any = None, *args: Any, **kwargs: Any) -> Any:
        self.calls.append((method, resource_path, dict(path_params or {})))
        if (path_params or {}).get("plural") == "workflowtemplates" and self.template is not None:
            return self.template
        if method == "GET" and "{name}" in resource_path:
            from kubernetes.client.exceptions import ApiException

            raise ApiException(status=404, reason="Not Found")
        if method == "POST":
            return {"metadata": {"name": "made"}}
        return Listing()

    def namespaces(self) -> set[str]:
        return {p["namespace"] for _, _, p in self.calls if "namespace" in p}


class Listing(dict):  # type: ignore[type-arg]
    """An empty list answer, read either as the client's model (`.items`) or as JSON (`["items"]`)."""

    def __init__(self) -> None:
        super().__init__(items=[])

    @property
    def items(self) -> list[Any]:  # type: ignore[override]
        return []


def _template() -> dict[str, Any]:
    return {"metadata": {"name": "offhours-job"},
            "spec": {"arguments": {"parameters": [{"name": "service", "value": "chat"},
                                                  {"name": "replicas", "value": "1"},
                                                  {"name": "run-id", "value": "r"}]}}}


READ_VERBS = [["jobs"], ["why", "x"], ["logs", "x"], ["cancel", "x", "--yes"], ["usage"], ["report"],
              ["schedule", "list"], ["submit", "offhours-job"]]


@pytest.mark.parametrize("verb", READ_VERBS, ids=lambda v: v[0])
@pytest.mark.parametrize("flag", [None, "lab-b"])
def test_each_verb_reads_the_namespace_the_rule_chose(verb: list[str], flag: str | None, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KUBECONFIG", _kubeconfig(tmp_path / "config", "team-a"))
    api = RecordingApi(_template())
    monkeypatch.setattr(connect_module, "connect", lambda *a, **k: api)
    main([*verb, *(["-n", flag] if flag else [])])
    research = api.namespaces() - {"serving"}  # the bundled configuration's serving namespace: services, its ConfigMap
    assert research == {flag or "team-a"}, (api.calls, capsys.readouterr())


def test_an_empty_answer_names_where_it_looked_and_whether_finished_jobs_were_included(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KUBECONFIG", _kubeconfig(tmp_path / "config", "team-a"))
    monkeypatch.setattr(connect_module, "connect", lambda *a, **k: RecordingApi())
    assert main(["jobs"]) == 0
    plain = capsys.readouterr().out
    assert "no offhours jobs in namespace team-a (the kubeconfig context's)" in plain and "--all" in plain
    assert main(["jobs", "--all"]) == 0
    everything = capsys.readouterr().out
    assert "namespace team-a" in everything and "finished or not" in everything and everything != plain
    assert main(["jobs", "-n", "lab"]) == 0
    assert "namespace lab (from -n)" in capsys.readouterr().out
    assert main(["usage"]) == 0
    assert "no offhours workflows in namespace team-a" in capsys.readouterr().out
    assert main(["report"]) == 0
    assert "no offhours workflows in namespace team-a" in capsys.readouterr().out
    assert main(["schedule", "list"]) == 0
    assert "no schedules in namespace team-a" in capsys.readouterr().out
    assert main(["why", "nope"]) == 1
    assert "no offhours job 'nope' in namespace team-a (the kubeconfig context's)" in capsys.readouterr().err
