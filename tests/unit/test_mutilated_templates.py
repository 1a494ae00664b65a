"""A template lacking what offhours needs is one named refusal in submit, schedule and the console, never a crash.

Class: an output (or a crash) claiming more than is known of a tenant-written WorkflowTemplate: a template
missing its parameters, exit hook or labels, or with junk where they belong, reaching code that indexes
into it (a KeyError, a traceback, an HTTP 500).
Mechanism: template_needs.template_refusal is asked first, on every path that builds a job from a template
(parked_workflow, so `offhours submit` and `offhours schedule`; the console's request form and resubmit), and
names the template and every missing part.
Invariants (generated: the library's offhours-job with random parts deleted or replaced by junk):
- parked_workflow gives a Workflow body or one SubmitError, one line;
- research_cron_workflow gives a CronWorkflow or one ScheduleError;
- the console's request form, shown and posted, answers with a page (never a 500) and creates nothing
  unless the template is whole;
- a template refused for its shape is refused with its name and the words "cannot run as an offhours job".
"""

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offhours.cronworkflows.research_schedule import ScheduleError, research_cron_workflow
from offhours.scripts.cluster.parked import SubmitError, parked_workflow
from offhours.scripts.cluster.template_needs import template_problems, template_refusal
from offhours.workflows.render import manifests
from tests.support.console_forms import csrf_token
from tests.unit.test_console_resubmit import Store, client_of

JOB = manifests()["workflowtemplate-offhours-job.yaml"]
JUNK = st.one_of(st.none(), st.integers(-3, 3), st.text(max_size=4), st.just([]), st.just({}), st.just([1, "x"]),
                 st.just({"name": None}))


def paths(doc: Any, prefix: tuple[Any, ...] = (), depth: int = 0) -> list[tuple[Any, ...]]:
    """Every path into `doc` down to `depth` 6 (mapping keys and list indexes)."""
    out = [prefix] if prefix else []
    if depth >= 6:
        return out
    if isinstance(doc, dict):
        for key, value in doc.items():
            out += paths(value, (*prefix, key), depth + 1)
    elif isinstance(doc, list):
        for index, value in enumerate(doc[:4]):
            out += paths(value, (*prefix, index), depth + 1)
    return out


PATHS = [p for p in paths(JOB) if p[0] in ("metadata", "spec") and (len(p) < 3 or p[1] != "templates")]


@st.composite
def mutilated(draw: Any) -> dict[str, Any]:
    template = copy.deepcopy(JOB)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PATHS))
        node: Any = template
        try:
            for part in path[:-1]:
                node = node[part]
            if draw(st.booleans()) and isinstance(node, dict):
                node.pop(path[-1], None)
            else:
                node[path[-1]] = draw(JUNK)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutilation removed the way there
    return template


PARAMS = {"service": "chat", "run-id": "r1", "replicas": "1", "input-uri": "s3://in/x", "output-uri": "s3://out/x"}


def one_line(err: Exception) -> str:
    text = str(err)
    assert text and "\n" not in text and "Traceback" not in text
    return text


@settings(max_examples=150, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutilated())
def test_submit_and_schedule_give_a_body_or_one_named_refusal(template: dict[str, Any]) -> None:
    refusal = template_refusal(template)
    try:
        body = parked_workflow(template, dict(PARAMS), "research", 0, ["chat"])
    except SubmitError as err:
        text = one_line(err)
        if refusal is not None:
            assert text == refusal and "cannot run as an offhours job" in text
    else:
        assert refusal is None and body["spec"]["workflowTemplateRef"]["name"] == template["metadata"]["name"]
    try:
        research_cron_workflow("nightly", template, "0 2 * * *", {k: v for k, v in PARAMS.items() if k != "run-id"},
                               "research")
    except ScheduleError as err:
        one_line(err)
    else:
        assert refusal is None


class OneTemplate(Store):
    def __init__(self, template: dict[str, Any]) -> None:
        super().__init__()
        self.the_template = template

    def templates(self, person: Any) -> list[dict[str, Any]]:
        return [self.the_template]

    def template(self, person: Any, name: str) -> dict[str, Any]:
        return self.the_template


@settings(max_examples=60, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutilated())
def test_the_console_request_form_answers_a_page_never_a_500(template: dict[str, Any]) -> None:
    store = OneTemplate(template)
    client = client_of(store)
    shown = client.get("/request/offhours-job")
    assert shown.status_code in (200, 422), shown.status_code
    if template_problems(template):
        assert shown.status_code == 422 and "cannot run as an offhours job" in shown.get_data(as_text=True)
        return
    csrf = csrf_token(shown.get_data(as_text=True))
    posted = client.post("/request/offhours-job", data={**PARAMS, "csrf_token": csrf})
    assert posted.status_code < 500, posted.status_code


def test_a_template_without_its_exit_hook_or_parameters_is_refused_naming_each() -> None:
    template = copy.deepcopy(JOB)
    del template["spec"]["hooks"]
    template["spec"]["arguments"]["parameters"] = [p for p in template["spec"]["arguments"]["parameters"]
                                                   if p["name"] != "replicas"]
    refusal = template_refusal(template)
    assert refusal is not None and refusal.startswith("WorkflowTemplate offhours-job cannot run as an offhours job")
    assert "the parameter(s) replicas" in refusal and "exit hook" in refusal
    page = client_of(OneTemplate(template)).get("/request/offhours-job")
    assert page.status_code == 422 and "exit hook" in page.get_data(as_text=True)
