"""The composition API: new pipelines from the steps, arguments checked when a step is added."""

import json

import pytest

from offhours.scripts.validate import validate_documents
from offhours.workflows.compose import CompositionError, Pipeline


def _distillation() -> Pipeline:
    # The README's worked example: a new kind of task (distillation, its own image) with no library change.
    p = Pipeline("distill-pipeline", description="SFT a teacher, distil it into a student, evaluate.")
    teacher = p.step("sft", name="teacher", image="ghcr.io/lab/train:3", command=["python", "-m", "sft"], gpus=8)
    student = p.step(
        "job",
        name="distill",
        image="ghcr.io/lab/distill:1.2",
        command=["python", "-m", "distill"],
        args=["--temperature", "2.0"],
        env={"HF_HUB_OFFLINE": "1"},
        input_from=teacher,
        gpus=4,
    )
    p.step("eval", image="ghcr.io/lab/train:3", command=["python", "-m", "evaluate"], input_from=student, suite="mmlu")
    return p


def test_composed_template_is_valid_and_chains_outputs() -> None:
    doc = _distillation().workflow_template().to_dict()
    assert validate_documents([("distill.yaml", 0, doc)]) == []
    tasks = {t["name"]: t for t in doc["spec"]["templates"][0]["dag"]["tasks"]}
    distill = {p["name"]: p["value"] for p in tasks["distill"]["arguments"]["parameters"]}
    assert tasks["distill"]["depends"] == "teacher"
    assert tasks["distill"]["templateRef"]["template"] == "job"
    assert distill["input-uri"] == "{{workflow.parameters.output-uri}}/{{workflow.parameters.run-id}}/teacher"
    assert json.loads(distill["command"]) == ["python", "-m", "distill"]
    assert json.loads(distill["env"]) == {"HF_HUB_OFFLINE": "1"}
    assert distill["gpus"] == "4"


def test_composed_workflow_takes_parameter_values() -> None:
    wf = _distillation().workflow({"service": "chat", "run-id": "r7", "output-uri": "s3://b/o",
                                   "checkpoint-uri": "s3://b/c", "replicas": 2}).to_dict()
    assert wf["kind"] == "Workflow" and wf["metadata"]["generateName"] == "distill-pipeline-"
    values = {p["name"]: p.get("value") for p in wf["spec"]["arguments"]["parameters"]}
    assert values["service"] == "chat" and values["replicas"] == "2"
    assert validate_documents([("wf.yaml", 0, wf)]) == []


def test_unknown_parameter_value_is_refused() -> None:
    with pytest.raises(CompositionError, match="no parameter 'servcie'"):
        _distillation().workflow({"servcie": "chat"})


def test_unknown_kind_is_named() -> None:
    with pytest.raises(CompositionError, match="unknown step kind 'distil'.*known kinds: preprocess"):
        Pipeline("p").step("distil", image="x", command=["x"])


def test_unknown_argument_is_named() -> None:
    with pytest.raises(CompositionError, match="step kind 'job' has no input 'gpu'"):
        Pipeline("p").step("job", image="x", command=["x"], gpu=4)


def test_missing_required_argument_is_named() -> None:
    with pytest.raises(CompositionError, match="missing required argument.*command"):
        Pipeline("p").step("job", image="x")


@pytest.mark.parametrize(
    "argument, value, needle",
    [
        ("command", "python train.py", "not valid JSON"),
        ("env", '["A=1"]', "must be a JSON object"),
        ("gpus", [1], "takes a string"),
        ("gpus", "abc", "input 'gpus' of 'job': 'abc' must be a whole number >= 0"),
        ("memory", "lots", "must be a Kubernetes quantity"),
        ("args", ["--epochs", 2], "must be a JSON list of strings"),
    ],
)
def test_malformed_argument_is_refused(argument: str, value: object, needle: str) -> None:
    p = Pipeline("p")
    with pytest.raises(CompositionError, match=needle):
        p.step("job", image="x", **{"command": ["x"], argument: value})
    assert p.steps == [], "a refused step leaves the pipeline unchanged"


def test_duplicate_step_name_is_refused() -> None:
    p = Pipeline("p")
    p.step("job", image="x", command=["x"])
    with pytest.raises(CompositionError, match="'job' is used twice"):
        p.step("job", image="y", command=["y"])


def test_empty_pipeline_is_refused() -> None:
    with pytest.raises(CompositionError, match="has no steps"):
        Pipeline("p").workflow_template()


def test_parameter_declared_twice_is_refused() -> None:
    with pytest.raises(CompositionError, match="'service' is declared twice"):
        Pipeline("p").add_parameter("service")


def test_a_parameter_takes_the_kind_of_the_input_it_feeds() -> None:
    p = Pipeline("p")
    gpus = p.add_parameter("student-gpus", "4", "GPUs of the student.")
    p.add_parameter("note", "", "Free text.")
    p.add_parameter("fast", "false", "Skip things.", kind="boolean")
    p.step("job", image=p.add_parameter("img", "ghcr.io/lab/x:1"), command=["x"], gpus=gpus)
    schema = p.parameter_schema()
    assert (schema["student-gpus"], schema["img"], schema["note"], schema["fast"]) == ("integer", "image", "text",
                                                                                       "boolean")
    assert schema["service"] == "service" and schema["replicas"] == "positive-integer"


def test_every_composed_pipeline_checks_its_parameters_first() -> None:
    doc = _distillation().workflow_template().to_dict()
    tasks = doc["spec"]["templates"][0]["dag"]["tasks"]
    assert tasks[0]["name"] == "check-parameters" and "depends" not in tasks[0]
    assert tasks[0]["templateRef"] == {"name": "offhours-steps", "template": "check-parameters"}
    assert {t["name"]: t["depends"] for t in tasks[1:]} == {"teacher": "check-parameters", "distill": "teacher",
                                                            "eval": "distill"}


def test_check_parameters_is_not_a_step_kind_nor_a_step_name() -> None:
    with pytest.raises(CompositionError, match="unknown step kind 'check-parameters'"):
        Pipeline("p").step("check-parameters", schema="{}", values="{}")
    with pytest.raises(CompositionError, match="'check-parameters' is reserved"):
        Pipeline("p").step("job", name="check-parameters", image="x", command=["x"])


def test_unknown_parameter_kind_is_refused() -> None:
    with pytest.raises(CompositionError, match="unknown kind 'number'"):
        Pipeline("p").add_parameter("n", "1", kind="number")
