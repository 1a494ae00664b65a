"""`offhours submit` catches a person's mistakes at once, all of them, with what they probably meant.

Invariants, in words:
- a parameter the template does not declare is refused, naming the declared ones closest to it (never
  the whole list), and nothing is created;
- every bad value of one submission is named in the one error, not only the first;
- without --config, the service is checked against the gate configuration installed on the cluster
  (the ConfigMap offhours-gate-config in the serving namespace); with none installed a note says the
  service was not checked, and the submission goes ahead for the gate to judge.
"""

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from offhours.scripts.cli import connect as connect_module
from offhours.scripts.cli.main import main
from offhours.scripts.cluster.parked import SubmitError, declared_arguments, parked_workflow
from offhours.scripts.names import GATE_CONFIG_KEY, GATE_CONFIG_MAP
from offhours.scripts.runtime.parameters import near_misses
from offhours.workflows.render import manifests

TEMPLATE = manifests()["workflowtemplate-offhours-llm-pipeline.yaml"]
REQUIRED = {"service": "chat", "run-id": "llama-sft-7", "image": "ghcr.io/lab/t:1", "output-uri": "s3://o",
            "checkpoint-uri": "s3://c"}
DECLARED = list(declared_arguments(TEMPLATE))


def test_a_typo_of_a_declared_parameter_names_what_it_probably_meant() -> None:
    with pytest.raises(SubmitError) as caught:
        parked_workflow(TEMPLATE, {**REQUIRED, "sft-gpu": "4"}, "research")
    assert str(caught.value) == "offhours-llm-pipeline has no parameter sft-gpu (did you mean sft-gpus?)"
    assert len(DECLARED) > 20 and "pretrain-gpus" not in str(caught.value)  # not the whole list


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(DECLARED), cut=st.integers(0, 40))
def test_a_declared_name_with_one_letter_dropped_is_suggested_first(name: str, cut: int) -> None:
    if len(name) < 5:
        return  # a two-letter typo of a four-letter name is another word, not a near miss
    typo = name[:cut % len(name)] + name[cut % len(name) + 1:]
    if typo in DECLARED:
        return
    assert name in near_misses(typo, DECLARED)


def test_every_bad_value_is_named_at_once() -> None:
    bad = {**REQUIRED, "sft-gpus": "x", "replicas": "two", "sft-gpu": "4", "image": "Not An Image"}
    with pytest.raises(SubmitError) as caught:
        parked_workflow(TEMPLATE, bad, "research")
    text = str(caught.value)
    assert text.startswith("4 problems: ")
    for part in ("no parameter sft-gpu (did you mean sft-gpus?)", "replicas must be a whole number >= 1, got 'two'",
                 "parameter sft-gpus='x'", "parameter image='Not An Image'"):
        assert text.count(part) == 1, text


class ClusterApi(client.ApiClient):
    """The API answers submit needs: the template, the installed gate ConfigMap (or 404), the created workflow."""

    def __init__(self, installed: str | None, workflows: list[dict[str, Any]] | None = None,
                 list_error: int | None = None) -> None:
        super().__init__()
        self.installed = installed
        self.workflows = workflows or []
        self.list_error = list_error
        self.created: list[dict[str, Any]] = []

    def call_api(self, resource_path: str, method: str, path_params: Any = None, query_params: Any = None,
                 header_params: Any = None, body: Any = None, *args: Any, **kwargs: Any) -> Any:
        if (path_params or {}).get("plural") == "workflowtemplates":
            return TEMPLATE
        if (path_params or {}).get("plural") == "workflows" and method == "GET":
            if self.list_error is not None:
                raise ApiException(status=self.list_error, reason="Forbidden")
            return {"items": self.workflows, "metadata": {}}
        if "configmaps" in resource_path:
            if self.installed is None or path_params["name"] != GATE_CONFIG_MAP:
                raise ApiException(status=404, reason="Not Found")
            assert path_params["namespace"] == "serving"  # the bundled configuration's serving namespace
            return {"data": {GATE_CONFIG_KEY: self.installed}}
        if method == "POST":
            self.created.append(body)
            return {"metadata": {"name": "llama-sft-7-abcde"}}
        raise AssertionError(f"unexpected call {method} {resource_path}")


GATE = json.dumps({"namespace": "serving", "workflowNamespace": "research",
                   "services": {"chat": {"capacity": {"requestsPerSecond": 1}}}})


def _submit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api: ClusterApi, service: str) -> int:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(json.dumps({"apiVersion": "v1", "kind": "Config", "current-context": "c",
                                      "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                                      "users": [{"name": "u", "user": {"token": "t"}}],
                                      "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u",
                                                                             "namespace": "research"}}]}))
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.setattr(connect_module, "connect", lambda *a, **k: api)
    params = [x for k, v in {**REQUIRED, "service": service}.items() for x in ("-p", f"{k}={v}")]
    return main(["submit", "offhours-llm-pipeline", *params])


def test_a_service_the_installed_configuration_lacks_is_refused_without_config(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    api = ClusterApi(GATE)
    assert _submit(tmp_path, monkeypatch, api, "code") == 2
    err = capsys.readouterr().err
    assert "parameter service='code' is not a service of the gate configuration (known: chat)" in err
    assert api.created == []  # nothing was created
    assert _submit(tmp_path, monkeypatch, api, "chat") == 0
    assert len(api.created) == 1


def test_without_an_installed_configuration_the_service_is_not_checked_and_a_note_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    api = ClusterApi(None)
    assert _submit(tmp_path, monkeypatch, api, "code") == 0
    err = capsys.readouterr().err
    assert "note: the service is not checked (no ConfigMap serving/offhours-gate-config)" in err
    assert len(api.created) == 1


def test_an_invalid_installed_configuration_is_a_note_not_a_crash(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    api = ClusterApi("services: [not, a, map")
    assert _submit(tmp_path, monkeypatch, api, "chat") == 0
    assert "is invalid" in capsys.readouterr().err


def _live(name: str, run_id: str, phase: str | None) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "research", "uid": f"uid-{name}",
                         "creationTimestamp": "2026-12-01T10:00:00Z",
                         "labels": {"offhours.io/service": "chat", "offhours.io/run-id": run_id,
                                    "offhours.io/state": "parked", "offhours.io/replicas": "1"}},
            "spec": {"suspend": True, "arguments": {"parameters": [{"name": "run-id", "value": run_id}]}},
            "status": {"phase": phase} if phase else {}}


def test_a_run_id_with_a_live_workflow_is_refused_and_nothing_is_created(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Fault: a second `offhours submit` of a run id still parked created a second workflow of that run."""
    api = ClusterApi(GATE, workflows=[_live("llama-sft-7-abcde", "llama-sft-7", None)])
    assert _submit(tmp_path, monkeypatch, api, "chat") == 2
    err = capsys.readouterr().err
    assert "run id llama-sft-7 is still running or parked (its live workflow llama-sft-7-abcde)" in err
    assert "Nothing was created" in err and api.created == []


def test_a_finished_run_id_may_be_submitted_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    api = ClusterApi(GATE, workflows=[_live("llama-sft-7-abcde", "llama-sft-7", "Succeeded")])
    assert _submit(tmp_path, monkeypatch, api, "chat") == 0
    assert len(api.created) == 1


def test_a_run_id_that_cannot_be_checked_is_not_submitted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Fault guarded: workflows that cannot be listed would hide a live copy; nothing is created unchecked."""
    api = ClusterApi(GATE, list_error=403)
    assert _submit(tmp_path, monkeypatch, api, "chat") == 2
    assert "llama-sft-7: cannot check it for a live workflow" in capsys.readouterr().err
    assert api.created == []


@pytest.mark.parametrize("flag", [None, "team-x"])
def test_a_namespace_the_gate_does_not_admit_from_is_refused_and_nothing_is_created(
        flag: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Fault: the context's namespace (or -n) was not the configuration's workflowNamespace: the job was parked where
    no gate looks, and waited for ever."""
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(json.dumps({"apiVersion": "v1", "kind": "Config", "current-context": "c",
                                      "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                                      "users": [{"name": "u", "user": {"token": "t"}}],
                                      "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u",
                                                                             "namespace": "default"}}]}))
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    api = ClusterApi(GATE)
    monkeypatch.setattr(connect_module, "connect", lambda *a, **k: api)
    params = [x for k, v in REQUIRED.items() for x in ("-p", f"{k}={v}")]
    assert main(["submit", "offhours-llm-pipeline", *params, *(["-n", flag] if flag else [])]) == 2
    err = capsys.readouterr().err
    looked = flag or "default"
    assert err.count("\n") == 1 and f"namespace {looked} (" in err and "workflowNamespace research" in err, err
    assert "-n research" in err and api.created == []
    assert main(["submit", "offhours-llm-pipeline", *params, "-n", "research"]) == 0
    assert len(api.created) == 1


def test_a_parameter_given_twice_with_two_values_is_refused_naming_both() -> None:
    """Fault: `-p replicas=1 ... -p replicas=4` took the last silently; which one was meant is the person's to say."""
    from offhours.scripts.cluster.parked import parse_params

    with pytest.raises(SubmitError) as caught:
        parse_params(["replicas=1", "service=chat", "replicas=4", "bad", "service=chat"])
    text = str(caught.value)
    assert "-p replicas given twice ('1', then '4')" in text and "-p 'bad': expected name=value" in text, text
    assert "service" not in text  # the same value twice is no ambiguity
    assert parse_params(["a=1", "a=1", "b=x=y"]) == {"a": "1", "b": "x=y"}
