"""Errors (Argo would refuse, or the run must fail) and warnings (likely mistakes Argo accepts); --strict."""

import json
from typing import Any

import yaml

from offhours.scripts.cli.main import main
from offhours.scripts.validate import validate_documents


def _template(kind: str, arg_name: str = "message", ref: str = "{{workflow.parameters.greeting}}") -> dict[str, Any]:
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": kind, "metadata": {"name": "hello"},
            "spec": {"entrypoint": "main", "templates": [
                {"name": "main", "steps": [[{"name": "say", "template": "echo",
                                             "arguments": {"parameters": [{"name": arg_name, "value": ref}]}}]]},
                {"name": "echo", "inputs": {"parameters": [{"name": "message"}]},
                 "container": {"image": "busybox", "command": ["echo", "{{inputs.parameters.message}}"]}}]}}


def _found(doc):
    return [(p.severity, p.path, p.message) for p in validate_documents([("f.yaml", 0, doc)], include_library=False)]


def test_a_workflow_template_may_take_workflow_parameters_at_submission():
    assert _found(_template("WorkflowTemplate")) == [
        ("warning", "spec.templates[0].steps[0][0].arguments.parameters[0].value",
         "workflow parameter 'greeting' is not declared in spec.arguments")]


def test_an_undeclared_workflow_parameter_in_a_workflow_is_an_error():
    assert [s for s, _, _ in _found(_template("Workflow"))] == ["error"]


def test_an_argument_the_template_does_not_declare_is_a_warning_and_the_missing_one_an_error():
    found = _found(_template("Workflow", arg_name="mesage", ref="hi"))
    assert found == [
        ("error", "spec.templates[0].steps[0][0].arguments", "template 'echo' needs input parameter(s) message"),
        ("warning", "spec.templates[0].steps[0][0].arguments.parameters[0]",
         "template 'echo' declares no input parameter 'mesage'")]


def test_cli_passes_warnings_and_strict_fails_on_them(tmp_path, capsys):
    path = tmp_path / "wt.yaml"
    path.write_text(yaml.safe_dump(_template("WorkflowTemplate")))
    assert main(["validate", "--offline", str(path)]) == 0
    out, err = capsys.readouterr()
    assert out == (f"{path}: document 0: spec.templates[0].steps[0][0].arguments.parameters[0].value: warning: "
                   "workflow parameter 'greeting' is not declared in spec.arguments\n")
    assert err == ("0 error(s), 1 warning(s) in 1 file(s)\nok: 1 document(s) pass the offline checks only (the Argo "
                   "v4.0.5 CRD schemas, the lint, the tenant boundary); not checked by an API server: --offline: no "
                   "cluster asked\n")
    assert "valid" not in err
    assert main(["validate", "--strict", str(path)]) == 1
    assert capsys.readouterr().err == "0 error(s), 1 warning(s) in 1 file(s) (--strict: warnings fail)\n"
    assert main(["validate", "-o", "json", str(path)]) == 0
    assert json.loads(capsys.readouterr().out) == [{
        "file": str(path), "document": 0, "path": "spec.templates[0].steps[0][0].arguments.parameters[0].value",
        "severity": "warning", "message": "workflow parameter 'greeting' is not declared in spec.arguments"}]


def test_argo_conditionals_example_passes_with_a_warning(capsys) -> None:
    """Argo's own examples/conditionals.yaml: a `when` names a workflow parameter given only at submit."""
    from pathlib import Path

    example = Path(__file__).parents[1] / "data" / "argo-examples" / "conditionals.yaml"
    assert main(["validate", str(example)]) == 0
    out = capsys.readouterr().out
    assert out.endswith("when: warning: workflow parameter 'json' is not declared in spec.arguments "
                        "(fine if given at submit: argo submit -p json=...)\n")


def test_a_when_or_an_expression_naming_an_undeclared_workflow_parameter_is_a_warning_elsewhere_an_error():
    when = _template("Workflow", ref="hi")
    when["spec"]["templates"][0]["steps"][0][0]["when"] = "{{workflow.parameters.go}} == true"
    assert [s for s, _, _ in _found(when)] == ["warning"]
    expression = _template("Workflow", ref="{{=workflow.parameters.greeting}}")
    assert [s for s, _, _ in _found(expression)] == ["warning"]
    assert [s for s, _, _ in _found(_template("Workflow"))] == ["error"]  # a plain tag Argo resolves at submit
