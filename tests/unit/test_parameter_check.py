"""The parameter kinds and `offhours check-parameters`, the program of every pipeline's first step."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offhours.scripts.cli.check_parameters import run
from offhours.scripts.cli.main import main
from offhours.scripts.runtime.parameters import KINDS, SchemaError, check_values, parse_schema, value_problem
from offhours.workflows import llm_pipeline

PIPELINE_SCHEMA = llm_pipeline.pipeline().parameter_schema()


@pytest.mark.parametrize("kind, good, bad", [
    ("integer", ["0", "8", "43200"], ["", "-1", "abc", "8.0", "1e3", " 8", "120,\"x\":1"]),
    ("positive-integer", ["1", "12"], ["0", "", "two"]),
    ("quantity", ["8", "500m", "64Gi", "0.5", "1e3", "128974848", "1.5Ki"], ["", "lots", "-1", "64 Gi", "64GB", "1.2.3"]),
    ("command", ['["python"]', '["python", "-m", "x"]'], ["[]", '"python"', "python train.py", '["x", 1]']),
    ("string-list", ["[]", '["--epochs", "2"]'], ['["--epochs", 2', '["--epochs", 2]', "{}"]),
    ("string-map", ["{}", '{"pool": "h100"}'], ["[]", '{"a": 1}', "{"]),
    ("object-list", ["[]", '[{"key": "k"}]'], ['["k"]', "{}"]),
    ("uri", ["s3://b/o", "gs://b", "file:///tmp/x"], ["", "s3:/b", "http://x", "s3://b o"]),
    ("optional-uri", ["", "s3://b"], ["b"]),
    ("checkpoint-uri", ["s3://lab/ckpt", "s3://lab", "file:///data/ckpt", "s3://lab/données"],
     ["gs://lab/ckpt", "s3://lab/ckpt/", "file://data/ckpt", "s3://lab/a#b", "s3://lab/a?x=1", "s3://lab/a%2Fb",
      "s3://lab//a", "s3://lab/../a", "s3://Lab/a", "s3://lab_1/a", "S3://lab/a", "s3://lab/step-000000000001",
      "s3://lab/cafe\u0301", "s3://lab/a\u200bb", "file:///"]),
    ("env", ["{}", '{"WANDB_MODE": "offline", "OFFHOURS_S3_ENDPOINT_URL": "http://minio:9000"}'],
     ['{"": "x"}', '{"A=B": "x"}', '{"A": "x\\u0000"}', '{"OFFHOURS_CHECKPOINT_URI": "s3://x/y"}', '{"A": 1}']),
    ("boolean", ["true", "false"], ["True", "yes", ""]),
    ("image", ["ghcr.io/lab/train:3.1", "busybox", "localhost:5000/a/b@sha256:" + "0" * 64], ["Not An Image", "", "a b"]),
    ("run-id", ["llama-sft-0412"], ["Run_7", "-x", "a" * 51]),
    ("service", ["chat-llama", "Chat.v2"], ["", "a b", "x" * 64]),
])
def test_each_kind_accepts_and_refuses(kind: str, good: list[str], bad: list[str]) -> None:
    assert [v for v in good if value_problem(kind, v)] == []
    assert [v for v in bad if value_problem(kind, v) is None] == []


@given(st.text())
def test_every_kind_answers_any_text_without_raising(value: str) -> None:
    # Invariant: a check never raises on a value; it says fine (None) or why not (a non-empty line).
    for kind in KINDS:
        problem = value_problem(kind, value)
        assert problem is None or (problem and "\n" not in problem)


@given(st.integers(min_value=0, max_value=999_999_999))
def test_whole_numbers_are_integers_and_quantities(n: int) -> None:
    assert value_problem("integer", str(n)) is None and value_problem("quantity", str(n)) is None


def test_the_bad_values_of_issue_12_each_name_their_parameter() -> None:
    values = {"sft-gpus": "abc", "sft-args": '["--epochs", 2', "service": "nope"}
    assert check_values(PIPELINE_SCHEMA, values, services={"chat-llama"}) == [
        "parameter service='nope' is not a service of the gate configuration (known: chat-llama)",
        "parameter sft-args='[\"--epochs\", 2' is not valid JSON (Expecting ',' delimiter at character 14)",
        "parameter sft-gpus='abc' must be a whole number >= 0",
    ]


def test_check_step_program_exits_64_naming_the_parameter() -> None:
    schema = json.dumps(PIPELINE_SCHEMA)
    code, lines = run(schema, json.dumps({"sft-gpus": "abc", "service": "chat"}))
    assert (code, lines) == (64, ["check-parameters: parameter sft-gpus='abc' must be a whole number >= 0"])
    code, lines = run(schema, json.dumps({"sft-gpus": "8", "termination-grace-seconds": '120,"serviceAccountName":"x"'}))
    assert code == 64 and lines[-1].startswith("check-parameters: parameter termination-grace-seconds=")
    code, lines = run(schema, json.dumps({"sft-gpus": "x", "rl-gpus": "y"}))
    assert code == 64 and lines[-1] == ("2 bad parameter value(s); first: parameter sft-gpus='x' must be a whole "
                                        "number >= 0")
    assert run(schema, json.dumps({"sft-gpus": "8", "service": "chat"})) == (0, [
        f"check-parameters: {len(PIPELINE_SCHEMA)} parameter(s) ok"])


@pytest.mark.parametrize("schema, values, line", [
    ('{"a": "number"}', "{}", "check-parameters: parameter schema names unknown kind(s): number"),
    ("[1]", "{}", "check-parameters: parameter schema must be a JSON object of parameter name -> kind"),
    ('{"a": "integer"}', "{", "check-parameters: the parameter values are not valid JSON: Expecting property name "
                              "enclosed in double quotes"),
    ('{"a": "integer"}', "[]", "check-parameters: the parameter values must be a JSON object"),
])
def test_check_step_program_refuses_malformed_input_in_one_line(schema: str, values: str, line: str) -> None:
    assert run(schema, values) == (64, [line])


def test_check_parameters_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-parameters", "--schema", '{"gpus": "integer"}', "--values", '{"gpus": "abc"}']) == 64
    assert capsys.readouterr().err == "check-parameters: parameter gpus='abc' must be a whole number >= 0\n"
    assert main(["check-parameters", "--schema", '{"gpus": "integer"}', "--values", '{"gpus": "4"}']) == 0


def test_parse_schema_round_trips() -> None:
    assert parse_schema(json.dumps(PIPELINE_SCHEMA)) == PIPELINE_SCHEMA
    with pytest.raises(SchemaError):
        parse_schema("{")
