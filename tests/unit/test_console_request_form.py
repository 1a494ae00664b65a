"""The console's request form: fields from the installed template, the submit's checks, each problem at its field."""

from pathlib import Path

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from offhours.scripts.cluster.parked import SubmitError, parked_workflow
from offhours.scripts.console.form import MAX_VALUE_BYTES, check_request, fields_of, submitted_values
from offhours.scripts.console.form import given as set_values

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
TEMPLATE = yaml.safe_load((GOLDEN / "workflowtemplate-offhours-job.yaml").read_text())
GOOD = {"service": "chat", "run-id": "run-1", "output-uri": "s3://b/out", "checkpoint-uri": "s3://b/ckpt"}


def form(values: dict[str, str]) -> dict[str, str]:
    return {f"param:{k}": v for k, v in values.items()}


def ordered(body: dict | None) -> dict | None:
    """The workflow with its parameters by name: the form lists them in the template's order, -p in the given one."""
    if body is None:
        return None
    params = sorted(body["spec"]["arguments"]["parameters"], key=lambda p: p["name"])
    return {**body, "spec": {**body["spec"], "arguments": {"parameters": params}}}


def test_fields_carry_each_parameters_kind_description_and_default() -> None:
    fields = {f.name: f for f in fields_of(TEMPLATE)}
    assert list(fields)[:3] == ["service", "replicas", "run-id"]
    assert fields["replicas"].kind == "positive-integer" and fields["replicas"].default == "1"
    assert fields["service"].default is None and "borrowed from" in fields["service"].description
    assert fields["env"].long and fields["env"].value == "{}"


def test_every_bad_value_is_named_at_its_field_and_nothing_is_built() -> None:
    values = submitted_values(TEMPLATE, form({**GOOD, "replicas": "0", "env": '{"A": 1}', "service": "nope"}))
    checked = check_request(TEMPLATE, values, "research", 0, ["chat"])
    assert checked.body is None
    assert set(checked.problems) == {"replicas", "env", "service"}
    assert checked.problems["service"].startswith("is not a service of the gate configuration (known: chat)")


def test_a_good_request_is_the_workflow_offhours_submit_builds() -> None:
    values = submitted_values(TEMPLATE, form({**GOOD, "replicas": "2"}))
    checked = check_request(TEMPLATE, values, "research", 3, ["chat"])
    assert checked.problems == {} and checked.general is None
    assert ordered(checked.body) == ordered(parked_workflow(TEMPLATE, {**GOOD, "replicas": "2"}, "research", 3,
                                                            ["chat"]))


def test_a_missing_required_value_and_a_huge_one_are_refused() -> None:
    values = submitted_values(TEMPLATE, form({k: v for k, v in GOOD.items() if k != "output-uri"}))
    checked = check_request(TEMPLATE, values, "research", 0, None)
    assert checked.body is None and "output-uri" in (checked.general or "")
    huge = submitted_values(TEMPLATE, form({**GOOD, "args": "[" + '"x",' * MAX_VALUE_BYTES + '"x"]'}))
    assert set(check_request(TEMPLATE, huge, "research", 0, None).problems) == {"args"}


def test_names_a_template_does_not_declare_never_reach_the_workflow() -> None:
    values = submitted_values(TEMPLATE, {**form(GOOD), "param:serviceAccountName": "admin", "podSpecPatch": "{}"})
    assert "serviceAccountName" not in values
    body = check_request(TEMPLATE, values, "research", 0, None).body
    assert body is not None and set(body["spec"]) == {"workflowTemplateRef", "arguments", "suspend"}


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from([n for n in (p["name"] for p in TEMPLATE["spec"]["arguments"]["parameters"])]),
       value=st.text(max_size=80))
def test_the_form_accepts_exactly_what_offhours_submit_accepts(name: str, value: str) -> None:
    """Whatever one field holds, the form builds a workflow if and only if `parked_workflow` does, and the same one."""
    values = submitted_values(TEMPLATE, form({**GOOD, name: value}))
    checked = check_request(TEMPLATE, values, "research", 0, ["chat"])
    try:
        expected = parked_workflow(TEMPLATE, set_values(TEMPLATE, values), "research", 0, ["chat"])
    except SubmitError:
        expected = None
    assert ordered(checked.body) == ordered(expected)
    assert (checked.body is None) == bool(checked.problems or checked.general)


def test_a_problem_placed_at_its_field_is_not_said_again_above_the_form() -> None:
    """Fault: replicas=0 showed at its field and again, as the submit words it, above the form."""
    for bad in ({"replicas": "0"}, {"replicas": "0", "env": '{"A": 1}', "service": "nope"}):
        checked = check_request(TEMPLATE, submitted_values(TEMPLATE, form({**GOOD, **bad})), "research", 0, ["chat"])
        assert set(checked.problems) == set(bad) and checked.general is None, checked
    # A problem no field shows (a required value missing) stays above the form, with the rest.
    values = submitted_values(TEMPLATE, form({**{k: v for k, v in GOOD.items() if k != "output-uri"}, "replicas": "0"}))
    checked = check_request(TEMPLATE, values, "research", 0, ["chat"])
    assert set(checked.problems) == {"replicas"} and "output-uri" in (checked.general or "")
