"""`offhours check-parameters`: the program of the `check-parameters` step.

It gets the calling template's parameter schema and the workflow's values (both JSON objects),
prints one line per bad value naming the parameter, and exits 64 (EX_USAGE) if there is any,
so the workflow fails before a GPU is used. Argo shows the last line (the termination message)
as the step's message. When the values pass and the step is handed its workflow's annotations
(`OFFHOURS_WORKFLOW_ANNOTATIONS`), it then keeps the run's provenance record in the run's store
(`offhours.scripts.runtime.provenance_store`); a record it cannot keep is a warning, never the check's failure.
"""

import argparse
import json
import os
import sys

from offhours.scripts.runtime.exit_codes import CHECK_FAILED_EXIT_CODE
from offhours.scripts.runtime.parameters import SchemaError, check_values, parse_schema
from offhours.scripts.runtime.provenance_store import ANNOTATIONS_ENV, record_from_step


def run(schema_text: str, values_text: str) -> tuple[int, list[str]]:
    """Check `values_text` against `schema_text`; return the exit code and the lines to print."""
    try:
        schema = parse_schema(schema_text)
    except SchemaError as err:
        return CHECK_FAILED_EXIT_CODE, [f"check-parameters: {err}"]
    try:
        values = json.loads(values_text)
    except json.JSONDecodeError as err:
        return CHECK_FAILED_EXIT_CODE, [f"check-parameters: the parameter values are not valid JSON: {err.msg}"]
    except RecursionError:
        return CHECK_FAILED_EXIT_CODE, ["check-parameters: the parameter values are JSON nested too deeply"]
    if not isinstance(values, dict):
        return CHECK_FAILED_EXIT_CODE, ["check-parameters: the parameter values must be a JSON object"]
    problems = check_values(schema, {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()})
    if problems:
        lines = [f"check-parameters: {p}" for p in problems]
        # Last, so it is the termination message: how many, and the first one named.
        summary = f"{len(problems)} bad parameter value(s); first: {problems[0]}"
        return CHECK_FAILED_EXIT_CODE, [*lines, summary] if len(problems) > 1 else lines
    return 0, [f"check-parameters: {len(schema)} parameter(s) ok"]


def _main(args: argparse.Namespace) -> int:
    code, lines = run(args.schema, args.values)
    annotations = os.environ.get(ANNOTATIONS_ENV)
    if code == 0 and annotations is not None:
        # Before the summary line: the last line stays the check's (the termination message Argo shows).
        lines.insert(0, f"check-parameters: {record_from_step(args.values, annotations, os.environ)}")
    for line in lines:
        print(line, file=sys.stderr if code else sys.stdout)
    return code


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add `offhours check-parameters` to the command line."""
    cmd = subparsers.add_parser("check-parameters", help="check workflow parameter values against their kinds "
                                "(the first step of every offhours pipeline)")
    cmd.add_argument("--schema", required=True, help="JSON object: parameter name -> kind")
    cmd.add_argument("--values", required=True, help="JSON object: parameter name -> value")
    cmd.set_defaults(func=_main)
