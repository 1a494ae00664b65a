"""`offhours validate`: accepts valid manifests, rejects each planted defect with one named problem."""

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from offhours.scripts.cli.main import main
from offhours.scripts.validate import validate_documents, validate_paths
from offhours.workflows import llm_pipeline
from offhours.workflows.render import manifests

EXAMPLES = Path(__file__).parents[1] / "data" / "argo-examples"
PIPELINE = llm_pipeline.workflow_template().to_dict()

DIAMOND: dict[str, Any] = yaml.safe_load((EXAMPLES / "dag-diamond.yaml").read_text())
STEPS: dict[str, Any] = yaml.safe_load((EXAMPLES / "loops-param-result.yaml").read_text())
CRON: dict[str, Any] = yaml.safe_load((EXAMPLES / "cron-workflow-multiple-schedules.yaml").read_text())


def _problems(doc: dict[str, Any]) -> list[str]:
    return [f"{p.path}: {p.message}" for p in validate_documents([("f.yaml", 0, doc)])]


def test_library_manifests_are_valid() -> None:
    assert validate_documents([(name, 0, doc) for name, doc in manifests().items()]) == []


def test_argo_examples_are_accepted() -> None:
    assert len(list(EXAMPLES.glob("*.yaml"))) >= 15
    # Argo accepts them all: no error; the one warning is conditionals.yaml's parameter given at submit.
    assert [(Path(p.file).name, p.severity, p.path) for p in validate_paths([EXAMPLES])] == [
        ("conditionals.yaml", "warning", "spec.templates[0].steps[0][2].when")]


def _set(path: list[Any], value: Any) -> Callable[[dict[str, Any]], None]:
    def plant(doc: dict[str, Any]) -> None:
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return plant


DIAMOND_TASKS = ["spec", "templates", 0, "dag", "tasks"]
PIPE_TASKS = ["spec", "templates", 0, "dag", "tasks"]

DEFECTS: list[tuple[str, dict[str, Any], Callable[[dict[str, Any]], None], str]] = [
    ("unknown field", DIAMOND, _set([*DIAMOND_TASKS, 0, "dependsOn"], ["x"]),
     "spec.templates[0].dag.tasks[0]: unknown field 'dependsOn'"),
    ("wrong type", DIAMOND, _set(["spec", "parallelism"], "many"),
     "spec.parallelism: 'many' is not of type 'integer'"),
    ("enum", DIAMOND, _set(["spec", "templates", 1, "retryStrategy"], {"retryPolicy": "Sometimes"}),
     "spec.templates[1].retryStrategy.retryPolicy: 'Sometimes' is not one of"),
    ("int-or-string", DIAMOND, _set(["spec", "templates", 1, "activeDeadlineSeconds"], [60]),
     "spec.templates[1].activeDeadlineSeconds: [60] is neither an integer nor a string"),
    ("cron syntax", CRON, _set(["spec", "schedules"], ["every five minutes"]),
     "spec.schedules[0]: 'every five minutes' does not match"),
    ("singular schedule removed in v4", CRON, _set(["spec", "schedule"], "*/5 * * * *"),
     "spec: unknown field 'schedule'"),
    ("templateRef to unknown WorkflowTemplate", PIPELINE, _set([*PIPE_TASKS, 0, "templateRef", "name"], "no-such"),
     "spec.templates[0].dag.tasks[0].templateRef.name: WorkflowTemplate 'no-such' is not known"),
    ("templateRef to unknown template", PIPELINE, _set([*PIPE_TASKS, 1, "templateRef", "template"], "distill"),
     "spec.templates[0].dag.tasks[1].templateRef.template: WorkflowTemplate 'offhours-steps' has no template"),
    ("argument not declared", DIAMOND,
     _set([*DIAMOND_TASKS, 0, "arguments", "parameters"], [{"name": "message", "value": "a"},
                                                          {"name": "colour", "value": "red"}]),
     "spec.templates[0].dag.tasks[0].arguments.parameters[1]: template 'echo' declares no input parameter 'colour'"),
    ("required argument missing", DIAMOND, _set([*DIAMOND_TASKS, 0, "arguments"], {}),
     "spec.templates[0].dag.tasks[0].arguments: template 'echo' needs input parameter(s) message"),
    ("unresolved inputs.parameters", DIAMOND,
     _set(["spec", "templates", 1, "container", "command"], ["echo", "{{inputs.parameters.mesage}}"]),
     "spec.templates[1].container.command[1]: input parameter 'mesage' is not declared by template 'echo'"),
    ("unresolved workflow.parameters", PIPELINE,
     _set([*PIPE_TASKS, 0, "when"], "{{workflow.parameters.run-preproces}} == true"),
     "spec.templates[0].dag.tasks[0].when: workflow parameter 'run-preproces' is not declared in spec.arguments"),
    ("unresolved workflow.parameters in an expression", PIPELINE,
     _set([*PIPE_TASKS, 1, "arguments", "parameters", 0, "value"], "{{=workflow.parameters['run_id']}}"),
     "workflow parameter 'run_id' is not declared in spec.arguments"),
    ("unknown task in a reference", DIAMOND,
     _set([*DIAMOND_TASKS, 1, "arguments", "parameters", 0, "value"], "{{tasks.foo.outputs.parameters.x}}"),
     "tasks.foo: no such task in this template"),
    ("undeclared task output", DIAMOND,
     _set([*DIAMOND_TASKS, 1, "arguments", "parameters", 0, "value"],
          "{{tasks.foo-bar-longname-A.outputs.parameters.x}}"),
     "declares no output parameter 'x'"),
    ("unknown step in a reference", STEPS,
     _set(["spec", "templates", 0, "steps", 1, 0, "withParam"], "{{steps.generator.outputs.result}}"),
     "steps.generator: no such step in this template"),
    ("item outside a loop", DIAMOND, _set([*DIAMOND_TASKS, 0, "arguments", "parameters", 0, "value"], "{{item}}"),
     "{{item}} is used outside a withItems/withParam/withSequence loop"),
    ("depends on unknown task", PIPELINE, _set([*PIPE_TASKS, 2, "depends"], "pretrian"),
     "spec.templates[0].dag.tasks[2].depends: depends on unknown task 'pretrian'"),
    ("dependencies name unknown task", DIAMOND, _set([*DIAMOND_TASKS, 3, "dependencies"], ["foo-bar-longname-E"]),
     "depends on unknown task 'foo-bar-longname-E'"),
    ("dependency cycle", DIAMOND, _set([*DIAMOND_TASKS, 0, "dependencies"], ["foo-bar-longname-D"]),
     "spec.templates[0].dag.tasks: dependency cycle: foo-bar-longname-A -> foo-bar-longname-D"),
    ("missing entrypoint", DIAMOND, _set(["spec", "entrypoint"], "diamant"),
     "spec.entrypoint: entrypoint 'diamant' is not a template of this workflow"),
    ("missing exit template", DIAMOND, _set(["spec", "onExit"], "return-gpus"),
     "spec.onExit: exit template 'return-gpus' is not a template of this workflow"),
    ("exit hook to unknown template", PIPELINE, _set(["spec", "hooks", "exit", "templateRef", "template"], "give-back"),
     "spec.hooks.exit.templateRef.template: WorkflowTemplate 'offhours-steps' has no template 'give-back'"),
    ("parameter inside resources", DIAMOND,
     _set(["spec", "templates", 1, "container", "resources"], {"limits": {"nvidia.com/gpu": "{{inputs.parameters.message}}"}}),
     "a {{...}} tag inside resources is rejected by Argo at submit"),
]


def test_every_defect_passes_unplanted() -> None:
    for _, doc, _, _ in DEFECTS:
        assert _problems(copy.deepcopy(doc)) == []


@pytest.mark.parametrize("name, doc, plant, expected", DEFECTS, ids=[d[0] for d in DEFECTS])
def test_planted_defect_is_rejected(name: str, doc: dict[str, Any], plant: Callable[[dict[str, Any]], None],
                                    expected: str) -> None:
    planted = copy.deepcopy(doc)
    plant(planted)
    problems = _problems(planted)
    assert any(expected in p for p in problems), problems


def test_int_or_string_accepts_both() -> None:
    for value in (60, "60", "{{inputs.parameters.message}}"):
        doc = copy.deepcopy(DIAMOND)
        doc["spec"]["templates"][1]["activeDeadlineSeconds"] = value
        assert _problems(doc) == []


def test_cli_prints_one_line_per_problem_and_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = copy.deepcopy(DIAMOND)
    bad["spec"]["entrypoint"] = "nope"
    bad["spec"]["templates"][0]["dag"]["tasks"][0]["bogus"] = 1
    (tmp_path / "wf.yaml").write_text(yaml.safe_dump(DIAMOND) + "---\n" + yaml.safe_dump(bad))
    (tmp_path / "broken.yaml").write_text("kind: Workflow\n  bad: [indent\n")
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    assert main(["validate", str(tmp_path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert f"{tmp_path / 'wf.yaml'}: document 1: spec.entrypoint: entrypoint 'nope' is not a template of this workflow" \
        in lines
    assert f"{tmp_path / 'wf.yaml'}: document 1: spec.templates[0].dag.tasks[0]: unknown field 'bogus'" in lines
    assert any(line.startswith(f"{tmp_path / 'broken.yaml'}: document 0: .: not valid YAML") for line in lines)
    assert f"{tmp_path / 'list.yaml'}: document 0: .: a manifest must be a mapping" in lines
    assert len(lines) == 4


def test_cli_accepts_rendered_library(tmp_path: Path) -> None:
    assert main(["render", "--out", str(tmp_path)]) == 0
    assert main(["validate", str(tmp_path), str(EXAMPLES)]) == 0


def test_templates_found_among_the_given_files(tmp_path: Path) -> None:
    # A workflow that refers to a WorkflowTemplate in another given file resolves.
    assert validate_paths([EXAMPLES / "cluster-wftmpl-dag.yaml", EXAMPLES / "clustertemplates.yaml"]) == []
    problems = validate_paths([EXAMPLES / "cluster-wftmpl-dag.yaml"])
    assert problems and all("ClusterWorkflowTemplate" in p.message for p in problems)
