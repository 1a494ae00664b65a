"""The console's request routes broken on purpose: a fake person API, the Flask test client, no cluster."""

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from offhours.scripts.cluster.parked import SubmitError, parked_workflow
from offhours.scripts.console.app import create_app
from offhours.scripts.console.asperson import Person, Refused
from offhours.scripts.console.auth import Access
from offhours.scripts.console.request_pages import queue_ahead
from offhours.scripts.console.source import PoolSource
from offhours.scripts.names import CONSOLE_TOKEN_COOKIE
from offhours.scripts.policy.estimate import JobAhead
from offhours.scripts.pool.usage import usage_by_month
from tests.support.access import may_all
from tests.support.console_forms import hidden
from tests.support.pool_fixture import ts, workflow
from tests.support.tenant_pool import Reader, pool_of

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
TEMPLATE = yaml.safe_load((GOLDEN / "workflowtemplate-offhours-job.yaml").read_text())
GOOD = {"service": "chat", "run-id": "run-1", "output-uri": "s3://b/out", "checkpoint-uri": "s3://b/ckpt"}


class FakePersonApi:
    """The research namespace as the person would see it: one template, the workflows given; records every write."""

    namespace = "research"

    def __init__(self, workflows: dict[str, dict[str, Any]] | None = None, refuse_stop: set[str] | None = None) -> None:
        self.workflows = workflows or {}
        self.refuse_stop = refuse_stop or set()
        self.created: list[tuple[Person, dict[str, Any]]] = []
        self.stopped: list[tuple[Person, str]] = []

    def templates(self, person: Person) -> list[dict[str, Any]]:
        return [TEMPLATE]

    def template(self, person: Person, name: str) -> dict[str, Any]:
        return TEMPLATE

    def workflow(self, person: Person, name: str) -> dict[str, Any]:
        return self.workflows[name]

    def create(self, person: Person, body: dict[str, Any]) -> str:
        self.created.append((person, body))
        return "run-1-abcde"

    def stop(self, person: Person, name: str, body: dict[str, Any]) -> None:
        if name in self.refuse_stop:
            raise Refused(f"stop workflow research/{name}: forbidden (HTTP 403)")
        self.stopped.append((person, name))


class Grants:
    """An authenticator that gives each token its own user, with every right."""

    def access(self, token: str) -> Access | None:
        return Access(user=f"user-{token}", services=True, jobs=True, metrics=True, reviewer=may_all(f"user-{token}"))


def form_key(page: str) -> str:
    found = re.search(r'name="form-key" value="([^"]+)"', page)
    assert found, "the page carries no form key"
    return found.group(1)


def fields(values: dict[str, str]) -> dict[str, str]:
    return {f"param:{k}": v for k, v in values.items()}


def local_client(api: FakePersonApi, *workflows: dict[str, Any]) -> Any:
    api.workflows.update({w["metadata"]["name"]: w for w in workflows})
    app = create_app(PoolSource(Reader(pool_of(*workflows)), interval=0), services=["chat"], person_api=api,
                     local_user="operator")
    return app.test_client()


@pytest.mark.parametrize("replicas", ["²", "³", "¹⁰"])
def test_a_superscript_digit_in_replicas_is_refused_not_a_crash(replicas: str) -> None:
    """Fault: `str.isdigit` is true of '²', `int('²')` raises: `offhours submit` crashed and the form answered 500."""
    with pytest.raises(SubmitError, match="replicas"):
        parked_workflow(TEMPLATE, {**GOOD, "replicas": replicas}, "research", 0, ["chat"])
    api = FakePersonApi()
    client = local_client(api)
    key = hidden(client.get("/request/offhours-job").get_data(as_text=True))
    answer = client.post("/request/offhours-job", data={**fields({**GOOD, "replicas": replicas}), **key,
                                                        "action": "submit"})
    assert answer.status_code == 400
    assert 'id="problem-replicas"' in answer.get_data(as_text=True)
    assert api.created == []


def test_one_persons_form_key_does_not_post_in_another_persons_name() -> None:
    """Fault: the form key is one value of the process, the same on every person's page.

    Any researcher who signs in reads it; a page of a sibling subdomain (same site: the SameSite=Strict
    cookie is sent) posts with it in the name of whoever opens that page.
    """
    api = FakePersonApi()
    client = create_app(PoolSource(Reader(pool_of()), interval=0), services=["chat"], auth=Grants(),
                        person_api=api).test_client()
    alices = hidden(client.get("/request/offhours-job", headers={"Authorization": "Bearer alice"})
                      .get_data(as_text=True))
    client.set_cookie(CONSOLE_TOKEN_COOKIE, "bob")
    answer = client.post("/request/offhours-job", data={**fields(GOOD), **alices, "action": "submit"})
    assert answer.status_code == 400
    assert api.created == []
    bobs = hidden(client.get("/request/offhours-job").get_data(as_text=True))
    assert client.post("/request/offhours-job", data={**fields(GOOD), **bobs, "action": "submit"}
                       ).status_code == 302
    assert [who.user for who, _ in api.created] == ["user-bob"]


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:8080", "10.0.0.7:8080"])
def test_a_local_console_answers_only_loopback_host_names(host: str) -> None:
    """Fault: `--auth local` (the operator's kubeconfig, no sign-in) answered any Host header.

    A page that rebinds its own DNS name to 127.0.0.1 reads the console as same-origin: the form key,
    then a request posted in the operator's name.
    """
    api = FakePersonApi()
    client = local_client(api)
    assert client.get("/request/offhours-job", headers={"Host": host}).status_code == 421
    key = hidden(client.get("/request/offhours-job").get_data(as_text=True))  # the operator's own browser
    answer = client.post("/request/offhours-job", headers={"Host": host},
                         data={**fields(GOOD), **key, "action": "submit"})
    assert answer.status_code == 421 and api.created == []
    for good in ("localhost:8080", "127.0.0.1:8080", "[::1]:8080"):
        assert client.get("/", headers={"Host": good}).status_code == 200, good


def test_a_cancel_refused_half_way_names_what_it_did_stop() -> None:
    """Fault: a run with two live copies, the first stopped, the second refused: the page said only 'refused'."""
    api = FakePersonApi(refuse_stop={"rl-x-p1"})
    first = workflow("rl-x", "chat", 1, "admitted", "Running", created=30, started=20, run_id="rl")
    copy = workflow("rl-x-p1", "chat", 1, "parked", created=10, suspend=True, run_id="rl")
    client = local_client(api, first, copy)
    key = hidden(client.get("/jobs/rl-x-p1").get_data(as_text=True))
    answer = client.post("/jobs/rl-x-p1/cancel", data=key)
    assert [name for _, name in api.stopped] == ["rl-x"]
    assert re.search(r"\brl-x\b(?!-)", answer.get_data(as_text=True)), "the page does not say rl-x was stopped"


def test_a_resubmitted_run_is_where_its_new_workflow_is() -> None:
    """Fault: copies were ordered by their preemptions count first, so a resubmission (count 0, same run id) sorted
    before the old run's parked copy: the run read `cancelled` while its new workflow waited, and its timeline
    called the resubmission "parked again after preemption 1"."""
    orig = workflow("rl-x", "chat", 1, "preempted", "Failed", created=300, started=290, run_id="rl", finished=249,
                    annotations={"offhours.io/admitted-at": ts(290), "offhours.io/preempted-at": ts(250)})
    parked_copy = workflow("rl-x-p1", "chat", 1, "parked", "Failed", created=249, run_id="rl", suspend=True,
                           finished=200, annotations={"offhours.io/preemptions": "1", "offhours.io/parked-from": "rl-x",
                                                      "offhours.io/cancelled-at": ts(200)},
                           labels={"offhours.io/copy-of": "uid-rl-x"})
    again = workflow("rl-abcde", "chat", 1, "parked", created=5, run_id="rl", suspend=True)
    run = pool_of(orig, parked_copy, again).find("rl-abcde")
    assert run is not None and run.name == "rl-abcde"
    assert run.state == "preempted→waiting" and run.preemptions == 1
    assert [c.name for c in run.copies] == ["rl-x", "rl-x-p1", "rl-abcde"]
    assert queue_ahead(pool_of(orig, parked_copy, again), "chat", 0) == [JobAhead(1, 0)]
    said = [e.what for e in run.timeline() if e.workflow == "rl-abcde"]
    assert said == ["resubmitted as rl-abcde"], said


def argo_resubmitted(original: dict[str, Any], name: str, created: float) -> dict[str, Any]:
    """What `argo resubmit` makes of `original`: its labels and annotations copied, a fresh status, no shutdown."""
    labels = {k: v for k, v in original["metadata"]["labels"].items() if not k.startswith("workflows.argoproj.io/")}
    wf = workflow(name, "chat", 1, labels["offhours.io/state"], "Running", created=created, started=created,
                  run_id=labels["offhours.io/run-id"], annotations=dict(original["metadata"]["annotations"]),
                  labels={**labels, "workflows.argoproj.io/resubmitted-from-workflow": original["metadata"]["name"]})
    return wf


def test_an_argo_resubmit_of_a_preempted_job_is_not_read_as_finished() -> None:
    """`argo resubmit` copies every label and annotation: the copy carries `state=preempted` and the original's
    admitted-at / preempted-at, from before it existed. Read as preempted (finished), it is hidden from `jobs`
    and the console has nothing to cancel while it runs."""
    first = workflow("ft-1", "chat", 1, "preempted", "Failed", created=300, started=290, run_id="ft", finished=200,
                     annotations={"offhours.io/admitted-at": ts(290), "offhours.io/preempted-at": ts(201)})
    again = argo_resubmitted(first, "ft-1-zq8rt", created=5)
    run = pool_of(first, again).find("ft-1-zq8rt")
    assert run is not None
    copy = next(c for c in run.copies if c.name == "ft-1-zq8rt")
    assert copy.state not in ("preempted", "stopped-unadmitted", "succeeded", "failed", "cancelled"), copy.state
    assert copy.admitted is None and copy.preempted is None  # the original's marks, from before it existed
    lent = [sum(r.lent for r in usage_by_month(pool)) for pool in (pool_of(first), pool_of(first, again))]
    assert lent[0] > 0 and lent[1] == lent[0], f"GPU-hours lent counted twice: {lent}"
