"""The job page's resubmit, as the person: a fake person API over a pool it keeps, the Flask test client, no cluster.

What must hold, whatever the old workflow carries:
- a finished run is resubmitted as the workflow `offhours submit` would create for the same values (parked_workflow),
  labelled with the person as its creator, and the redirect opens its job page;
- while any copy of the run id it would carry is live, nothing is created (two live workflows never share a run id);
- a refusal of the person's identity, or a POST without this person's form key, creates nothing;
- a tenant-written parameter, label or annotation cannot make the new workflow differ from what the form's checks allow.
"""

import re
import string
from datetime import datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offhours.scripts.cluster.parked import parked_workflow
from offhours.scripts.console.app import create_app
from offhours.scripts.console.asperson import Person, Refused, creator_label
from offhours.scripts.console.auth import Access
from offhours.scripts.console.form import check_request
from offhours.scripts.console.source import PoolSource
from offhours.scripts.names import ARGO_CREATOR_LABEL
from offhours.scripts.pool.model import FINISHED, Pool
from tests.support.access import may_all
from tests.support.console_forms import csrf_token
from tests.support.pool_fixture import ts, workflow
from tests.support.tenant_pool import pool_of
from tests.unit.test_console_request_review import GOOD, TEMPLATE

SERVICES = ["chat"]
PARAMS = {**GOOD, "replicas": "2", "gpus": "8"}
DECLARED = [str(p["name"]) for p in TEMPLATE["spec"]["arguments"]["parameters"]]


def with_arguments(wf: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    wf["spec"]["arguments"] = {"parameters": [{"name": k, "value": v} for k, v in params.items()]}
    return wf


class Store:
    """The research namespace: the workflows the person sees, read by the console's pool and the person API alike."""

    namespace = "research"

    def __init__(self, *workflows: dict[str, Any], refuse: str = "") -> None:
        self.workflows = {w["metadata"]["name"]: w for w in workflows}
        self.refuse = refuse  # "create" / "read": the API server refuses the person that
        self.created: list[tuple[Person, dict[str, Any]]] = []

    def read(self, now: datetime | None = None, require_workflows: bool = False) -> Pool:
        return pool_of(*self.workflows.values())

    def templates(self, person: Person) -> list[dict[str, Any]]:
        return [TEMPLATE]

    def template(self, person: Person, name: str) -> dict[str, Any]:
        if self.refuse == "read":
            raise Refused(f"get workflowtemplate research/{name}: forbidden (HTTP 403)")
        return TEMPLATE

    def workflow(self, person: Person, name: str) -> dict[str, Any]:
        return self.workflows[name]

    def create(self, person: Person, body: dict[str, Any]) -> str:
        if self.refuse == "create":
            raise Refused(f"create workflow in research: {person.user} may not create workflows (HTTP 403)")
        self.created.append((person, body))
        name = f"{body['metadata']['generateName']}n{len(self.created)}"
        labels = body["metadata"]["labels"]
        self.workflows[name] = {**workflow(name, labels["offhours.io/service"], int(labels["offhours.io/replicas"]),
                                           labels["offhours.io/state"], created=0, suspend=True,
                                           run_id=labels["offhours.io/run-id"], labels=labels,
                                           annotations=body["metadata"]["annotations"]), "spec": body["spec"]}
        return name


class Grants:
    """Each bearer token is its own user, with every right the console reviews."""

    def access(self, token: str) -> Access | None:
        return Access(user=f"user:{token}", services=True, jobs=True, metrics=True, reviewer=may_all(f"user:{token}"))


def client_of(store: Store) -> Any:
    app = create_app(PoolSource(store, interval=0), services=SERVICES, auth=Grants(), person_api=store)
    client = app.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = "Bearer alice"
    return client


def key_on(client: Any, name: str) -> str:
    page = client.get(f"/jobs/{name}").get_data(as_text=True)
    found = re.search(r'name="form-key" value="([^"]+)"', page)
    assert found, "the job page carries no form key"
    assert 'id="resubmit-button"' in page or 'id="cancel-button"' in page
    return found.group(1)


def csrf_on(client: Any, name: str) -> str:
    """Return the CSRF token the job page carries (one per browser session, whoever signs in)."""
    return csrf_token(client.get(f"/jobs/{name}").get_data(as_text=True))


def resubmit(client: Any, name: str, key: str | None = None) -> Any:
    key = key if key is not None else key_on(client, name)
    return client.post(f"/jobs/{name}/resubmit", data={"form-key": key, "csrf_token": csrf_on(client, name)})


def finished_runs() -> dict[str, list[dict[str, Any]]]:
    """Each way a run ends, as the pool reads it: its workflows, the first carrying the submitted values."""
    cancelled = workflow("ft-1", "chat", 2, "parked", "Failed", created=90, run_id="run-1", suspend=False,
                         shutdown="Stop", finished=80, annotations={"offhours.io/cancelled-at": ts(80),
                                                                    "offhours.io/priority": "3"})
    preempted = workflow("ft-2", "chat", 2, "preempted", "Failed", created=300, started=290, run_id="run-1",
                         finished=249, annotations={"offhours.io/admitted-at": ts(290),
                                                    "offhours.io/preempted-at": ts(250), "offhours.io/priority": "3"})
    done_copy = workflow("ft-2-p1", "chat", 2, "admitted", "Succeeded", created=249, started=240, finished=100,
                         run_id="run-1", annotations={"offhours.io/preemptions": "1", "offhours.io/parked-from": "ft-2",
                                                      "offhours.io/admitted-at": ts(240)})
    failed = workflow("ft-3", "chat", 2, "admitted", "Failed", created=90, started=85, finished=30, run_id="run-1",
                      annotations={"offhours.io/admitted-at": ts(85), "offhours.io/priority": "3"})
    return {"cancelled": [with_arguments(cancelled, PARAMS)],
            "preempted-then-done": [with_arguments(preempted, PARAMS), with_arguments(done_copy, PARAMS)],
            "failed": [with_arguments(failed, PARAMS)]}


def submitted_as(params: dict[str, str], priority: int, user: str) -> dict[str, Any]:
    """What `offhours submit -p ... --priority` creates, with the creator label Argo's server would write."""
    body = parked_workflow(TEMPLATE, params, "research", priority, SERVICES)
    body["metadata"]["labels"][ARGO_CREATOR_LABEL] = creator_label(user)
    return in_one_order(body)


def in_one_order(body: dict[str, Any]) -> dict[str, Any]:
    """`body` with its arguments sorted by name: Argo reads parameters by name, their order means nothing."""
    arguments = sorted(body["spec"]["arguments"]["parameters"], key=lambda p: p["name"])
    return {**body, "spec": {**body["spec"], "arguments": {"parameters": arguments}}}


def test_a_finished_run_is_resubmitted_as_offhours_submit_would_create_it() -> None:
    for how, workflows in finished_runs().items():
        store = Store(*workflows)
        client = client_of(store)
        run = store.read().find(workflows[-1]["metadata"]["name"])
        assert run is not None and all(c.state in FINISHED for c in run.copies), (how, run and run.state)
        answer = resubmit(client, workflows[-1]["metadata"]["name"])
        assert answer.status_code == 302, (how, answer.get_data(as_text=True))
        assert len(store.created) == 1, how
        who, body = store.created[0]
        assert who == Person("user:alice", "alice"), how  # made with the person's own token
        assert in_one_order(body) == submitted_as(PARAMS, 3, "user:alice"), how
        page = client.get(answer.headers["Location"])
        assert page.status_code == 200, how
        text = page.get_data(as_text=True)
        assert body["metadata"]["generateName"] + "n1" in text and 'id="cancel-button"' in text, how


def test_resubmit_is_refused_while_a_copy_of_the_run_is_live_and_nothing_is_created() -> None:
    """The old run's parked copy waits: a resubmission would be a second live workflow of run-1."""
    first = with_arguments(workflow("ft-2", "chat", 2, "preempted", "Failed", created=300, started=290, run_id="run-1",
                                    finished=249, annotations={"offhours.io/admitted-at": ts(290),
                                                               "offhours.io/preempted-at": ts(250)}), PARAMS)
    waiting = with_arguments(workflow("ft-2-p1", "chat", 2, "parked", created=249, suspend=True, run_id="run-1",
                                      annotations={"offhours.io/preemptions": "1"}), PARAMS)
    store = Store(first, waiting)
    client = client_of(store)
    key = key_on(client, "ft-2-p1")
    for name in ("ft-2", "ft-2-p1", "run-1"):
        answer = resubmit(client, name, key)
        assert answer.status_code == 409, name
        assert "ft-2-p1" in answer.get_data(as_text=True), "the refusal does not name the live copy"
    assert store.created == []


def test_a_second_resubmit_of_the_same_finished_run_is_refused() -> None:
    """A double click: the first resubmission is live (parked), so the second finds a live copy of run-1."""
    store = Store(*finished_runs()["failed"])
    client = client_of(store)
    key = key_on(client, "ft-3")
    assert resubmit(client, "ft-3", key).status_code == 302
    assert resubmit(client, "ft-3", key).status_code == 409
    assert len(store.created) == 1


def test_a_run_id_parameter_edited_to_another_live_run_is_refused() -> None:
    """Fault: the live check read the run the page names (its run-id label), the new workflow took the run-id
    parameter. A finished workflow whose parameter a tenant set to another run's id (`kubectl patch`, or a
    workflow created by hand) was resubmitted into that live run: two live workflows of one run id, and the gate
    stops one of them as a duplicate, perhaps the other person's."""
    victim = with_arguments(workflow("victim-1", "chat", 1, "admitted", "Running", created=60, started=50,
                                     run_id="victim", annotations={"offhours.io/admitted-at": ts(50)}),
                            {**GOOD, "run-id": "victim"})
    mine = with_arguments(workflow("ft-3", "chat", 2, "admitted", "Failed", created=90, finished=30, run_id="run-1"),
                          {**PARAMS, "run-id": "victim"})
    store = Store(victim, mine)
    client = client_of(store)
    answer = resubmit(client, "ft-3")
    assert answer.status_code == 409, answer.get_data(as_text=True)
    assert "victim-1" in answer.get_data(as_text=True)
    assert store.created == []


def test_a_person_without_create_rights_gets_the_refusal_and_nothing_is_created() -> None:
    for refuse, said in (("create", "may not create workflows"), ("read", "get workflowtemplate")):
        store = Store(*finished_runs()["cancelled"], refuse=refuse)
        client = client_of(store)
        answer = resubmit(client, "ft-1")
        assert answer.status_code == 403, refuse
        assert said in answer.get_data(as_text=True), refuse
        assert store.created == [] and len(store.workflows) == 1, refuse


def test_a_post_without_this_persons_form_key_creates_nothing() -> None:
    store = Store(*finished_runs()["cancelled"])
    client = client_of(store)
    alices = key_on(client, "ft-1")
    client.environ_base["HTTP_AUTHORIZATION"] = "Bearer bob"
    bob_key = key_on(client, "ft-1")
    client.environ_base["HTTP_AUTHORIZATION"] = "Bearer alice"
    for key in ("", "0" * 64, bob_key, alices[:-1]):
        answer = resubmit(client, "ft-1", key)
        assert answer.status_code == 400, key
        assert "form key" in answer.get_data(as_text=True)
    no_field = client.post("/jobs/ft-1/resubmit", data={})
    assert no_field.status_code == 400
    assert store.created == []
    assert resubmit(client, "ft-1", alices).status_code == 302  # her own key does post


LABEL_TEXT = st.text(string.ascii_letters + string.digits + "-_./:", max_size=70)
HOSTILE_VALUE = st.one_of(
    st.sampled_from(["victim", "run-1", "chat", "other", "0", "-1", "99", "²", "true", "s3://x/y", "file:///etc",
                     '{"a": "b"}', '["sh", "-c", "id"]', "ghcr.io/evil/miner:latest", "", "x" * 70000, "None"]),
    st.text(max_size=30), st.integers(-5, 100), st.none(), st.booleans(),
    st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(params=st.dictionaries(st.one_of(st.sampled_from(DECLARED + ["serviceAccountName", "podSpecPatch"]),
                                        st.text(max_size=12)), HOSTILE_VALUE, max_size=8),
       labels=st.dictionaries(st.sampled_from(["offhours.io/service", "offhours.io/replicas", "offhours.io/state",
                                               "offhours.io/managed", "offhours.io/copy-of", ARGO_CREATOR_LABEL,
                                               "team"]), LABEL_TEXT, max_size=4),
       annotations=st.dictionaries(st.sampled_from(["offhours.io/priority", "offhours.io/estimate",
                                                    "offhours.io/admitted-at", "offhours.io/parked-from"]),
                                   st.one_of(st.sampled_from(["7", "-3", "1e9", "abc", "", '{"hours": 1e308}',
                                                             '{"hours": 2, "checkpointMinutes": 30}']),
                                             st.text(max_size=20)), max_size=3),
       run_id=st.sampled_from(["victim", "run-1", "other", "Run_1", "x" * 51, ""]),
       template_ref=st.sampled_from([{"name": "offhours-job"}, {"name": ""}, {}, {"name": "offhours-job",
                                                                                  "clusterScope": True}]))
def test_nothing_a_tenant_wrote_on_the_old_workflow_reaches_the_new_one_unchecked(
        params: dict[str, Any], labels: dict[str, str], annotations: dict[str, str], run_id: str,
        template_ref: dict[str, Any]) -> None:
    """Whatever the old workflow holds, a resubmission is either refused with nothing created, or a workflow
    `offhours submit` would create for declared values the form's checks accept, of a run id with no live copy,
    labelled with the person who asked (never the old creator)."""
    live = with_arguments(workflow("victim-1", "chat", 1, "admitted", "Running", created=60, started=50,
                                   run_id="victim", annotations={"offhours.io/admitted-at": ts(50)}),
                          {**GOOD, "run-id": "victim"})
    old = workflow("ft-3", "chat", 2, "admitted", "Failed", created=90, started=85, finished=30, run_id="run-1",
                   labels={k: v for k, v in labels.items() if k != "offhours.io/state"}, annotations=annotations)
    old["spec"]["workflowTemplateRef"] = template_ref
    written = {**PARAMS, "run-id": run_id, **params}
    old["spec"]["arguments"] = {"parameters": [{"name": k, "value": v} for k, v in written.items()]}
    store = Store(live, old)
    client = client_of(store)
    run = store.read().find("ft-3")
    if run is None or any(c.state not in FINISHED for c in run.copies):
        return  # a label made it another run, or a live one: resubmit is not offered for it
    answer = resubmit(client, run.name)
    if not store.created:
        assert answer.status_code in (400, 403, 409, 502), answer.status_code
        assert len(store.workflows) == 2
        return
    assert answer.status_code == 302
    who, body = store.created[0]
    assert who.user == "user:alice"
    assert set(body) == {"apiVersion", "kind", "metadata", "spec"}
    assert set(body["spec"]) == {"workflowTemplateRef", "arguments", "suspend"} and body["spec"]["suspend"] is True
    assert body["spec"]["workflowTemplateRef"] == {"name": "offhours-job"}
    args = {p["name"]: p["value"] for p in body["spec"]["arguments"]["parameters"]}
    assert set(args) <= set(DECLARED) and all(isinstance(v, str) for v in args.values())
    priority = int(body["metadata"]["annotations"]["offhours.io/priority"])
    values = {**{k: v for k, v in ((p["name"], p.get("value")) for p in TEMPLATE["spec"]["arguments"]["parameters"])
                 if v is not None}, **args}
    assert check_request(TEMPLATE, values, "research", priority, SERVICES).body is not None
    assert in_one_order(body) == submitted_as(args, priority, "user:alice")
    new_run_id = body["metadata"]["labels"]["offhours.io/run-id"]
    assert new_run_id == args["run-id"]
    others = next(r for r in store.read().runs if r.run_id == new_run_id)
    assert [c.name for c in others.copies if c.state not in FINISHED] == [f"{new_run_id}-n1"], "two live copies"
