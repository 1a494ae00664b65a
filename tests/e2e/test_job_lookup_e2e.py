"""End to end: whose job a lookup touches, asked of the real API server with two researchers' identities.

Real: the API server's RBAC, SelfSubjectAccessReview, SubjectAccessReview and TokenReview; two researchers'
ServiceAccounts with their tokens from the TokenRequest API; `offhours` run as a separate process with a
kubeconfig holding only the researcher's token; Argo's controller (the workflows are suspended: no pod runs).

alice may act (get, list, patch) on workflows in her namespace and only read them in bob's; bob may act in
his. bob labels his own job with alice's name as its creator (a tenant-writable label): alice can see it,
but `offhours cancel` as alice refuses it and patches nothing; a name that is one run's workflow and another
run's id is refused with both named.
"""

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from offhours.scripts.cluster.access import CANCEL_JOB, READ_JOBS, PersonAccess, SelfAccess, token_review
from offhours.scripts.names import ARGO_CREATOR_LABEL

from .test_console_auth_e2e import as_account, rbac, token

A, B = "lookup-a-e2e", "lookup-b-e2e"
ALICE_USER = f"system:serviceaccount:{A}:alice"


def suspended(name: str, namespace: str, run_id: str, creator: str = "") -> dict[str, Any]:
    labels = {"offhours.io/service": "chat", "offhours.io/replicas": "1", "offhours.io/run-id": run_id,
              "offhours.io/state": "parked", "offhours.io/managed": "true"}
    if creator:
        labels[ARGO_CREATOR_LABEL] = creator
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"suspend": True, "entrypoint": "main",
                     "templates": [{"name": "main", "container": {"image": "busybox", "command": ["true"]}}]}}


def role(name: str, namespace: str, verbs: list[str], account: str, account_ns: str) -> list[dict[str, Any]]:
    rules = [{"apiGroups": ["argoproj.io"], "resources": ["workflows"], "verbs": verbs},
             {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]}]
    return [rbac("Role", name, namespace, rules=rules),
            rbac("RoleBinding", name, namespace,
                 roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                 subjects=[{"kind": "ServiceAccount", "name": account, "namespace": account_ns}])]


@pytest.fixture(scope="module")
def researchers(kubectl: Callable[..., str], api: client.ApiClient) -> Iterator[dict[str, str]]:
    namespaces = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in (A, B)]
    kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": namespaces}))
    acting = "get list watch patch update create"
    docs = [rbac("ServiceAccount", "alice", A), rbac("ServiceAccount", "bob", B),
            *role("alice-acts", A, acting.split(), "alice", A), *role("alice-reads", B, ["get", "list"], "alice", A),
            *role("bob-acts", B, acting.split(), "bob", B),
            # bob's job, labelled as alice's; in alice's namespace, a workflow named as another run's id
            suspended("train-e2e", B, "train-e2e", creator=f"system-serviceaccount-{A}-alice"),
            suspended("mine-1", A, "r-shared"), suspended("r-shared", A, "r-other")]
    kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
            stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
    yield {"alice": token(api, A, "alice"), "bob": token(api, B, "bob")}
    for ns in (A, B):
        kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=false")


def kubeconfig_of(api: client.ApiClient, bearer: str, path: Path) -> Path:
    """A kubeconfig holding only `bearer` (no admin certificate): the CLI runs as that researcher."""
    cluster: dict[str, Any] = {"server": api.configuration.host}
    if api.configuration.ssl_ca_cert:
        cluster["certificate-authority"] = api.configuration.ssl_ca_cert
    else:
        cluster["insecure-skip-tls-verify"] = True
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "r",
                                    "clusters": [{"name": "c", "cluster": cluster}],
                                    "users": [{"name": "u", "user": {"token": bearer}}],
                                    "contexts": [{"name": "r", "context": {"cluster": "c", "user": "u"}}]}))
    return path


def offhours(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "offhours.scripts.cli.main", *args],
                          env={"KUBECONFIG": str(kubeconfig), "PATH": "/usr/bin:/bin", "HOME": str(kubeconfig.parent)},
                          capture_output=True, text=True, timeout=120)


def shutdown_of(api: client.ApiClient, namespace: str, name: str) -> Any:
    wf = client.CustomObjectsApi(api).get_namespaced_custom_object("argoproj.io", "v1alpha1", namespace, "workflows",
                                                                   name)
    return (wf.get("spec") or {}).get("shutdown")


def test_the_api_server_answers_what_each_researcher_may_do(api: client.ApiClient,
                                                             researchers: dict[str, str]) -> None:
    alice = SelfAccess(as_account(api, researchers["alice"]))
    assert alice.may(A, CANCEL_JOB) and alice.may(B, READ_JOBS) and not alice.may(B, CANCEL_JOB)
    subject = token_review(api, researchers["alice"])  # as the console reviews a signed-in person
    assert subject is not None and subject.user == ALICE_USER
    person = PersonAccess(api, subject)
    assert person.may(A, CANCEL_JOB) and not person.may(B, CANCEL_JOB)
    assert token_review(api, "not-a-token") is None


def test_a_forged_creator_label_does_not_let_alice_cancel_bobs_job(api: client.ApiClient, researchers: dict[str, str],
                                                                   tmp_path: Path) -> None:
    alice = kubeconfig_of(api, researchers["alice"], tmp_path / "alice")
    seen = offhours(alice, "why", "train-e2e", "-n", B)
    assert seen.returncode == 0, seen.stderr  # she may read it: shown, with its (forged) submitter as information
    run = offhours(alice, "cancel", "train-e2e", "-n", B, "--yes")
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"{ALICE_USER} may patch workflows.argoproj.io" in run.stderr or "may patch workflows" in run.stderr
    assert "nothing was touched" in run.stderr
    assert shutdown_of(api, B, "train-e2e") is None  # not acted on
    logs = offhours(alice, "logs", "train-e2e", "-n", B)  # she may read its pods' logs: resolved, it has none yet
    assert "has no pods" in logs.stderr and "matches no offhours job" not in logs.stderr, logs.stderr


def test_an_ambiguous_name_is_refused_with_every_candidate_named(api: client.ApiClient, researchers: dict[str, str],
                                                                  tmp_path: Path) -> None:
    alice = kubeconfig_of(api, researchers["alice"], tmp_path / "alice")
    run = offhours(alice, "cancel", "r-shared", "-n", A, "--yes")
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"{A}/r-shared (workflows mine-1" in run.stderr and f"{A}/r-other (workflows r-shared" in run.stderr
    assert shutdown_of(api, A, "mine-1") is None and shutdown_of(api, A, "r-shared") is None
