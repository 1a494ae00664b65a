"""`offhours --help` lists a person's verbs only; the in-pod verbs (the check-parameters step, the exit hook) still run."""

import pytest

from offhours.scripts.cli.main import main, parser

IN_POD = ("check-parameters", "return-gpus")


def test_the_in_pod_verbs_are_not_in_a_persons_help() -> None:
    text = parser().format_help()
    for verb in IN_POD:
        assert verb not in text, text
    assert "submit" in text and "jobs" in text and "calibrate" in text  # the person's verbs are all there


def test_the_in_pod_verbs_still_parse_and_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-parameters", "--schema", '{"n": "integer"}', "--values", '{"n": "3"}']) == 0
    assert "1 parameter(s) ok" in capsys.readouterr().out
    args = parser().parse_args(["return-gpus", "--workflow", "w", "--status", "Succeeded", "--namespace", "r"])
    assert args.command == "return-gpus" and args.workflow_name == "w"
