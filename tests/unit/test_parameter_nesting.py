"""Parameter values, values objects and schemas nested past the recursion limit: one line naming them, never the wrong file."""

import json

import pytest

from offhours.scripts.cli.check_parameters import run
from offhours.scripts.cli.main import main
from offhours.scripts.runtime.exit_codes import CHECK_FAILED_EXIT_CODE
from offhours.scripts.runtime.parameters import SchemaError, check_values, parse_schema

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("kind", ["command", "string-list", "string-map", "env", "object-list"])
def test_a_value_nested_too_deeply_is_a_problem_of_its_parameter(kind: str) -> None:
    """Fault: a JSON-kind value nested 100,000 deep raised RecursionError out of the check instead of naming it."""
    (problem,) = check_values({"x": kind}, {"x": DEEP})
    assert problem.startswith("parameter x=") and "nested too deeply" in problem


def test_check_parameters_step_names_the_parameter_and_exits_64(capsys: pytest.CaptureFixture[str]) -> None:
    """Fault: the step printed 'an input file is not valid YAML ... the kubeconfig read' and exited 2, not 64."""
    code = main(["check-parameters", "--schema", json.dumps({"command": "command"}),
                 "--values", json.dumps({"command": DEEP})])
    err = capsys.readouterr().err
    assert code == CHECK_FAILED_EXIT_CODE
    assert "parameter command=" in err and "kubeconfig" not in err and err.count("\n") == 1


def test_values_or_schema_nested_too_deeply_are_one_line() -> None:
    """Fault: the values object or the schema itself nested too deeply was a RecursionError."""
    code, lines = run(json.dumps({"x": "text"}), DEEP)
    assert code == CHECK_FAILED_EXIT_CODE and "nested too deeply" in lines[0]
    code, lines = run(DEEP, "{}")
    assert code == CHECK_FAILED_EXIT_CODE and "nested too deeply" in lines[0]
    with pytest.raises(SchemaError):
        parse_schema(DEEP)
