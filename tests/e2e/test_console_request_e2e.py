"""End to end: a researcher requests a job from the console in headless Chromium, as themselves.

Real: the API server (TokenReview, SubjectAccessReview, and the authorisation of the create itself),
the installed `offhours-job` WorkflowTemplate, the Argo controller, the console's rendered RBAC
(the console runs in this process with its own ServiceAccount's token: it has no right to create
workflows, so whatever is created was created with the person's token), Chromium. The estimate
replays the bundled trace (scaled to the e2e service's capacity) through the gate's policy.
No pod is run for real: the request is parked and stays so (no gate ticks here).
"""

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from kubernetes import client
from selenium.webdriver.common.by import By

from offhours.scripts.cluster.parked import parked_workflow
from offhours.scripts.config.loader import parse_config
from offhours.scripts.console.app import create_app
from offhours.scripts.console.asperson import PersonApi
from offhours.scripts.console.auth import KubernetesAuth
from offhours.scripts.console.manifests import console_manifests
from offhours.scripts.console.source import PoolSource
from offhours.scripts.names import ANNOTATION_ESTIMATE, ARGO_CREATOR_LABEL, LABEL_RUN_ID
from offhours.scripts.pool.reader import PoolReader
from offhours.scripts.simulate.estimate import HistoryEstimator, trace_history
from offhours.scripts.simulate.trace import Trace, load_trace
from tests.support.browser import chromium, press, serving

from .conftest import RESEARCH, SERVING, gate_config_raw
from .test_console_auth_e2e import as_account, rbac, token

RESEARCHER, VIEWER = "console-researcher-e2e", "console-viewer-e2e"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "console"
GOOD = {"service": "chat", "run-id": "e2e-console-run", "output-uri": "s3://e2e-results/out",
        "checkpoint-uri": "s3://e2e-results/ckpt"}


def role(name: str, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [rbac("ServiceAccount", name, RESEARCH), rbac("Role", name, RESEARCH, rules=rules),
            rbac("RoleBinding", name, RESEARCH, roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                         "name": name},
                 subjects=[{"kind": "ServiceAccount", "name": name, "namespace": RESEARCH}])]


@pytest.fixture(scope="module")
def accounts(installed: Path, kubectl: Callable[..., str], api: client.ApiClient) -> Iterator[dict[str, str]]:
    """The console's RBAC as installed; a researcher who may create workflows, a viewer who may only look."""
    config = parse_config(gate_config_raw(8000))
    docs = [m for m in console_manifests(config).values() if m["kind"] not in ("Deployment", "Service")]
    look = [{"apiGroups": ["argoproj.io"], "resources": ["workflows", "workflowtemplates"], "verbs": ["get", "list"]}]
    people = [*role(RESEARCHER, [*look, {"apiGroups": ["argoproj.io"], "resources": ["workflows"],
                                         "verbs": ["create", "patch"]}]), *role(VIEWER, look),
              # The estimate replays the service's replicas: the researcher may see the pool's services.
              rbac("Role", RESEARCHER, SERVING, rules=[{"apiGroups": ["apps"], "resources": ["deployments"],
                                                       "verbs": ["list"]}]),
              rbac("RoleBinding", RESEARCHER, SERVING, roleRef={"apiGroup": "rbac.authorization.k8s.io",
                                                                "kind": "Role", "name": RESEARCHER},
                   subjects=[{"kind": "ServiceAccount", "name": RESEARCHER, "namespace": RESEARCH}])]
    kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
            stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [*docs, *people]}))
    yield {"console": token(api, SERVING, "offhours-console"), RESEARCHER: token(api, RESEARCH, RESEARCHER),
           VIEWER: token(api, RESEARCH, VIEWER)}
    kubectl("-n", RESEARCH, "delete", "workflows", "-l", f"{LABEL_RUN_ID}={GOOD['run-id']}", "--ignore-not-found",
            "--wait=false")
    for doc in reversed([*docs, *people]):
        kubectl("-n", doc["metadata"].get("namespace", SERVING), "delete", doc["kind"].lower(), doc["metadata"]["name"],
                "--ignore-not-found")


def requested(api: client.ApiClient) -> list[dict[str, Any]]:
    answer = client.CustomObjectsApi(api).list_namespaced_custom_object(
        "argoproj.io", "v1alpha1", RESEARCH, "workflows", label_selector=f"{LABEL_RUN_ID}={GOOD['run-id']}")
    return list(answer["items"])


def fill(browser: Any, values: dict[str, str]) -> None:
    for name, value in values.items():
        box = browser.find_element(By.CSS_SELECTOR, f"tr[data-param='{name}'] input, tr[data-param='{name}'] textarea")
        box.clear()
        box.send_keys(value)


def sign_in(browser: Any, url: str, bearer: str) -> None:
    browser.delete_all_cookies()
    browser.get(url + "/login")
    browser.find_element(By.ID, "token").send_keys(bearer)
    press(browser, By.CSS_SELECTOR, "#login button")


def test_a_researcher_requests_a_job_as_themselves_and_a_viewer_is_refused(
        accounts: dict[str, str], api: client.ApiClient, chat_service: Callable[[int], None]) -> None:
    chat_service(4)
    console = as_account(api, accounts["console"])
    may_create = client.AuthorizationV1Api(api).create_subject_access_review(client.V1SubjectAccessReview(
        spec=client.V1SubjectAccessReviewSpec(user="system:serviceaccount:serving:offhours-console",
                                              resource_attributes=client.V1ResourceAttributes(
                                                  namespace=RESEARCH, group="argoproj.io", resource="workflows",
                                                  verb="create")))).status.allowed
    assert not may_create, "the console's own account must not be able to create workflows"
    config = parse_config(gate_config_raw(8000))
    bundled = load_trace()
    scale = 0.9 * 4 * 10 * 60 / float(np.max(bundled.requests))  # the trace's peak needs 90% of chat's 4 replicas
    trace = Trace(bundled.requests * scale, bundled.input_tokens * scale, bundled.output_tokens * scale, "m-small")
    source = PoolSource(PoolReader(SERVING, RESEARCH, console), interval=0)
    app = create_app(source, services=["chat"], auth=KubernetesAuth(console, SERVING, RESEARCH),
                     person_api=PersonApi(console, RESEARCH),
                     estimator=HistoryEstimator(config, trace_history(trace), "the bundled trace m-small, scaled"))
    assert requested(api) == []
    with serving(app) as url, chromium() as browser:
        sign_in(browser, url, accounts[RESEARCHER])
        browser.get(url + "/request")
        press(browser, By.CSS_SELECTOR, "#templates li[data-template='offhours-job'] a")

        # A bad value: its error next to its field, the rest kept, nothing created.
        fill(browser, {**GOOD, "replicas": "0"})
        press(browser, By.ID, "submit-button")
        assert browser.find_element(By.ID, "problem-replicas").text == "must be a whole number >= 1"
        assert browser.find_element(By.CSS_SELECTOR, "tr[data-param='run-id'] input").get_attribute("value") == \
            GOOD["run-id"]
        assert requested(api) == []
        DOCS.mkdir(parents=True, exist_ok=True)
        browser.execute_script("document.getElementById('problem-replicas').scrollIntoView({block: 'center'})")
        browser.save_screenshot(str(DOCS / "request-field-error.png"))

        # A good one, estimated first: the numbers and what they assume are on the page, still nothing created.
        fill(browser, {"replicas": "1"})
        press(browser, By.ID, "estimate-button")
        missing = browser.find_elements(By.ID, "no-estimate")
        assert not missing, missing[0].text
        median = browser.find_element(By.CSS_SELECTOR, "#estimate [data-field='start-median']").text
        assert median and "what this estimate assumes" in browser.find_element(By.ID, "assumptions").text.lower()
        assert requested(api) == []
        browser.execute_script("document.getElementById('estimate').scrollIntoView()")
        browser.save_screenshot(str(DOCS / "request.png"))

        press(browser, By.ID, "submit-button")
        (workflow,) = requested(api)
        name = workflow["metadata"]["name"]
        assert browser.current_url.endswith(f"/jobs/{name}")
        # Parked exactly as `offhours submit` parks it, plus the person as its creator and the estimate kept.
        template = client.CustomObjectsApi(api).get_namespaced_custom_object("argoproj.io", "v1alpha1", RESEARCH,
                                                                            "workflowtemplates", "offhours-job")
        # replicas=1 is the template's default: the form passes what differs from a default, as `-p` would.
        expected = parked_workflow(template, GOOD, RESEARCH, 0, ["chat"])
        labels = dict(workflow["metadata"]["labels"])
        assert labels.pop(ARGO_CREATOR_LABEL) == f"system-serviceaccount-{RESEARCH}-{RESEARCHER}"
        assert {k: labels[k] for k in expected["metadata"]["labels"]} == expected["metadata"]["labels"]
        assert workflow["spec"]["suspend"] is True
        assert workflow["spec"]["workflowTemplateRef"] == expected["spec"]["workflowTemplateRef"]
        assert sorted(workflow["spec"]["arguments"]["parameters"], key=lambda p: p["name"]) == \
            sorted(expected["spec"]["arguments"]["parameters"], key=lambda p: p["name"])
        assert ANNOTATION_ESTIMATE in workflow["metadata"]["annotations"]
        # The job page keeps the estimate beside what happened (not admitted: no gate runs here).
        assert browser.find_element(By.CSS_SELECTOR, "#estimate-vs-actual [data-field='actual-start']").text == \
            "not admitted yet"
        assert browser.find_element(By.CSS_SELECTOR, "#estimate-vs-actual [data-field='estimated-start']").text \
            .startswith(median)
        browser.save_screenshot(str(DOCS / "job-request.png"))

        # The same run id again while it is parked (a second click, a second tab): refused, still one workflow.
        browser.get(url + "/request/offhours-job")
        fill(browser, GOOD)
        press(browser, By.ID, "submit-button")
        again = browser.find_element(By.ID, "general-problem").text
        assert again.startswith(f"run id {GOOD['run-id']} is still running or parked (its live workflow {name})"), \
            again
        assert [w["metadata"]["name"] for w in requested(api)] == [name]
        browser.get(url + f"/jobs/{name}")

        # Cancel from the job page, as the person: a graceful stop.
        press(browser, By.ID, "cancel-button")
        (stopped,) = requested(api)
        assert stopped["spec"].get("shutdown") == "Stop"

        # A viewer may look at the form but may not create: the API server refuses them, nothing is created.
        sign_in(browser, url, accounts[VIEWER])
        browser.get(url + "/request/offhours-job")
        fill(browser, {**GOOD, "run-id": "e2e-console-viewer"})
        press(browser, By.ID, "submit-button")
        refusal = browser.find_element(By.ID, "general-problem").text
        assert refusal.startswith(f"create workflow in {RESEARCH}: no rights (HTTP 403)"), refusal
        assert "nothing was changed" in refusal
        browser.execute_script("document.getElementById('general-problem').scrollIntoView({block: 'center'})")
        browser.save_screenshot(str(DOCS / "request-refused.png"))
        viewer_made = client.CustomObjectsApi(api).list_namespaced_custom_object(
            "argoproj.io", "v1alpha1", RESEARCH, "workflows", label_selector=f"{LABEL_RUN_ID}=e2e-console-viewer")
        assert viewer_made["items"] == []
