"""End to end: the console's authentication against the real API server, in headless Chromium, and `check` of its rights.

Real: the API server's TokenReview and SubjectAccessReview, the console's rendered RBAC applied with
kubectl (the console runs in this process with its own ServiceAccount's token, so the install's
rights are exactly what it has), service account tokens from the TokenRequest API, Chromium.
"""

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from kubernetes import client
from selenium.webdriver.common.by import By

from offhours.scripts.cli.check import Checker
from offhours.scripts.config.loader import parse_config
from offhours.scripts.console.app import create_app
from offhours.scripts.console.auth import KubernetesAuth
from offhours.scripts.console.manifests import console_manifests
from offhours.scripts.console.source import PoolSource
from offhours.scripts.pool.reader import PoolReader
from tests.support.browser import chromium, press, serving

from .conftest import RESEARCH, SERVING, gate_config_raw

SECRET_JOB = "private-run-e2e"
READER, NOBODY = "console-reader-e2e", "console-nobody-e2e"

def token(api: client.ApiClient, namespace: str, account: str) -> str:
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=900))
    return str(client.CoreV1Api(api).create_namespaced_service_account_token(account, namespace, request).status.token)


def as_account(api: client.ApiClient, bearer: str) -> client.ApiClient:
    """A client of the same API server that authenticates with `bearer` only (no admin certificate)."""
    config = client.Configuration()
    config.host, config.ssl_ca_cert, config.verify_ssl = (api.configuration.host, api.configuration.ssl_ca_cert,
                                                          api.configuration.verify_ssl)
    config.api_key = {"authorization": f"Bearer {bearer}"}
    return client.ApiClient(config)


def rbac(kind: str, name: str, namespace: str, **body: Any) -> dict[str, Any]:
    version = "v1" if kind == "ServiceAccount" else "rbac.authorization.k8s.io/v1"
    return {"apiVersion": version, "kind": kind, "metadata": {"name": name, "namespace": namespace}, **body}


@pytest.fixture(scope="module")
def console_rbac(installed: Path, kubectl: Callable[..., str], api: client.ApiClient) -> Iterator[dict[str, str]]:
    """The console's RBAC and NetworkPolicy (no Deployment: it runs here), two reader accounts and a private job."""
    config = parse_config(gate_config_raw(8000))
    docs = [m for m in console_manifests(config).values() if m["kind"] not in ("Deployment", "Service")]
    reader_rights = [
        rbac("ServiceAccount", READER, RESEARCH), rbac("ServiceAccount", NOBODY, RESEARCH),
        rbac("Role", READER, RESEARCH, rules=[{"apiGroups": ["argoproj.io"], "resources": ["workflows"],
                                                "verbs": ["list"]}]),
        rbac("RoleBinding", READER, RESEARCH, roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                       "name": READER},
             subjects=[{"kind": "ServiceAccount", "name": READER, "namespace": RESEARCH}]),
        rbac("Role", READER, SERVING, rules=[{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list"]}]),
        rbac("RoleBinding", READER, SERVING, roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                      "name": READER},
             subjects=[{"kind": "ServiceAccount", "name": READER, "namespace": RESEARCH}])]
    job = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
           "metadata": {"name": SECRET_JOB, "namespace": RESEARCH,
                        "labels": {"offhours.io/service": "chat", "offhours.io/replicas": "1"}},
           "spec": {"suspend": True, "entrypoint": "main",
                    "templates": [{"name": "main", "container": {"image": "busybox", "command": ["true"]}}]}}
    kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
            stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [*docs, *reader_rights, job]}))
    yield {"console": token(api, SERVING, "offhours-console"), "reader": token(api, RESEARCH, READER),
           "nobody": token(api, RESEARCH, NOBODY)}
    kubectl("-n", RESEARCH, "delete", "workflow", SECRET_JOB, "--ignore-not-found", "--wait=false")
    for doc in reversed([*docs, *reader_rights]):  # the next install's `check` finds no console unless it installs one
        kubectl("-n", doc["metadata"].get("namespace", SERVING), "delete", doc["kind"].lower(), doc["metadata"]["name"],
                "--ignore-not-found")


def test_chromium_without_a_token_is_refused_and_each_token_sees_what_it_may_list(
        console_rbac: dict[str, str], api: client.ApiClient) -> None:
    console = as_account(api, console_rbac["console"])  # the console's own rights, as installed
    app = create_app(PoolSource(PoolReader(SERVING, RESEARCH, console), interval=0), services=["chat"],
                     auth=KubernetesAuth(console, SERVING, RESEARCH))
    with serving(app) as url, chromium() as browser:
        # No token: a 401 with the sign-in form, and no job of anyone's on the page.
        assert requests.get(url + "/queue", timeout=10).status_code == 401
        browser.get(url + "/queue")
        assert browser.find_element(By.ID, "login-message").text == "This console needs a Kubernetes bearer token."
        assert SECRET_JOB not in browser.page_source

        # A token the API server never issued: refused the same way.
        browser.find_element(By.ID, "token").send_keys("not-a-token")
        press(browser, By.CSS_SELECTOR, "#login button")
        assert browser.find_element(By.ID, "login-message").text == "The API server does not accept this token."

        # A real token without rights: signed in, sees nothing of others, told why.
        browser.find_element(By.ID, "token").send_keys(console_rbac["nobody"])
        # Wait for the sign-in's answer: a navigation right after the click can abort it before its cookie is set.
        press(browser, By.CSS_SELECTOR, "#login button")
        browser.get(url + "/queue")
        assert browser.find_element(By.ID, "no-jobs").text == "No research job is waiting or running."
        assert SECRET_JOB not in browser.page_source
        assert f"system:serviceaccount:{RESEARCH}:{NOBODY}" in browser.find_element(By.ID, "problems").text
        browser.get(url + f"/jobs/{SECRET_JOB}")
        assert browser.find_element(By.ID, "error").text == f"no offhours job {SECRET_JOB!r}"

        # A token that may list workflows, sent as a header (as a proxy or a script would): it sees the job.
        browser.delete_all_cookies()
        browser.execute_cdp_cmd("Network.enable", {})
        browser.execute_cdp_cmd("Network.setExtraHTTPHeaders",
                                {"headers": {"Authorization": f"Bearer {console_rbac['reader']}"}})
        browser.get(url + "/queue")
        assert browser.find_element(By.CSS_SELECTOR, f"#queue tr[data-run='{SECRET_JOB}']")

    # /metrics asks for the non-resource URL right, as kube-rbac-proxy does; /healthz stays open for probes.
    with serving(app) as url:
        assert requests.get(url + "/metrics", timeout=10).status_code == 401
        nobody = requests.get(url + "/metrics", headers={"Authorization": f"Bearer {console_rbac['nobody']}"},
                              timeout=10)
        assert nobody.status_code == 403 and SECRET_JOB not in nobody.text
        assert requests.get(url + "/healthz", timeout=10).text == "ok"


def test_check_verifies_the_console_has_only_the_rights_it_uses(
        console_rbac: dict[str, str], api: client.ApiClient, kubectl: Callable[..., str]) -> None:
    config = parse_config(gate_config_raw(8000))
    lines = [c.line() for c in Checker(api, config).console(config)]
    assert all(line.startswith("✓") for line in lines), lines
    role = "offhours-console-research"
    patch = [{"op": "add", "path": "/rules/-", "value": {"apiGroups": [""], "resources": ["pods", "pods/log"],
                                                         "verbs": ["get", "list"]}}]
    kubectl("-n", RESEARCH, "patch", "role", role, "--type=json", "-p", json.dumps(patch))
    try:
        lines = [c.line() for c in Checker(api, config).console(config)]
        (extra,) = [line for line in lines if "has no right it does not use" in line]
        assert extra.startswith("✗") and "get pods in research" in extra and "pods/log" in extra, extra
    finally:
        kubectl("-n", RESEARCH, "patch", "role", role, "--type=json", "-p",
                json.dumps([{"op": "remove", "path": "/rules/1"}]))


def test_token_reviews_are_cached_in_a_bounded_table(console_rbac: dict[str, str], api: client.ApiClient) -> None:
    """Fault: a client floods the console with invented tokens; the cache stays bounded, real tokens still work."""
    auth = KubernetesAuth(as_account(api, console_rbac["console"]), SERVING, RESEARCH, entries=4)
    for i in range(12):
        assert auth.access(f"invented-{i}") is None
    assert len(auth._cache) == 4
    access = auth.access(console_rbac["reader"])
    assert access is not None and access.jobs and access.services and not access.metrics


def test_schedule_dry_run_checks_the_installed_template_when_a_cluster_answers(
        installed: Path, kubectl: Callable[..., str], cluster_env: dict[str, str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A template only the cluster has: the dry run reads it; one the library has: no note, nothing created."""
    from offhours.scripts.cli.main import main

    own = {"apiVersion": "argoproj.io/v1alpha1", "kind": "WorkflowTemplate",
           "metadata": {"name": "e2e-own-template", "namespace": RESEARCH},
           "spec": {"entrypoint": "main", "arguments": {"parameters": [
               {"name": "service"}, {"name": "replicas", "value": "1"}, {"name": "run-id", "value": "x"}]},
               # what offhours needs of any template it builds a job from (cluster/template_needs.py)
               "hooks": {"exit": {"template": "main"}},
               "workflowMetadata": {"labels": {"offhours.io/managed": "true"}},
               "templates": [{"name": "main", "container": {"image": "busybox", "command": ["true"]}}]}}
    kubectl("apply", "--server-side", "-f", "-", stdin=json.dumps(own))
    monkeypatch.setenv("KUBECONFIG", cluster_env["KUBECONFIG"])
    try:
        base = ["schedule", "e2e-dry", "--template", "e2e-own-template", "--cron", "0 1 * * *", "-n", RESEARCH,
                "--dry-run"]
        assert main([*base, "-p", "service=chat"]) == 0
        out = capsys.readouterr()
        assert "note:" not in out.err and "name: e2e-own-template" in out.out, out.err
        assert main([*base, "-p", "service=chat", "-p", "nope=1"]) == 2
        assert "e2e-own-template has no parameter nope (none of its 3 parameters is close)" in capsys.readouterr().err
        assert not kubectl("-n", RESEARCH, "get", "cronworkflow", "e2e-dry", "--ignore-not-found", "-o", "name").strip()
    finally:
        kubectl("-n", RESEARCH, "delete", "workflowtemplate", "e2e-own-template", "--ignore-not-found")

