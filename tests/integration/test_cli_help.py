"""`offhours --help`: every verb, in the order the root parser adds them; one module per verb."""

import argparse
import subprocess
import sys

from offhours.scripts.cli.main import parser

VERBS = ["render", "validate", "gate", "submit", "rerun", "simulate", "report", "check", "demo", "backstop", "jobs", "why",
         "logs", "cancel", "usage", "console", "schedule", "trace", "tune", "calibrate"]
IN_POD = ["check-parameters", "return-gpus"]  # they parse and run, out of a person's help
# The verbs whose module is named after them (jobs.py holds jobs, why, cancel and usage, and adds logs.py's logs).
OWN_MODULE = {"render": "render", "validate": "validate", "gate": "gate", "submit": "submit", "rerun": "rerun",
              "simulate": "simulate",
              "check": "check", "demo": "demo", "check-parameters": "check_parameters", "return-gpus": "return_gpus",
              "backstop": "backstop", "console": "console", "schedule": "schedule", "tune": "tune",
              "calibrate": "calibrate"}


def _verbs(root: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    [sub] = [a for a in root._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def test_help_lists_the_verbs_in_order() -> None:
    assert list(_verbs(parser())) == VERBS + IN_POD
    text = parser().format_help()
    assert "{" + ",".join(VERBS) + "}" in text
    listed = [line.split()[0] for line in text.splitlines() if line.startswith("    ") and line.split()[0] in VERBS]
    assert listed == VERBS


def test_each_verb_runs_from_its_own_module() -> None:
    for verb, module in OWN_MODULE.items():
        func = _verbs(parser())[verb].get_default("func")
        assert func.__module__ == f"offhours.scripts.cli.{module}", verb


def test_the_module_runs_as_a_program() -> None:
    run = subprocess.run([sys.executable, "-m", "offhours.scripts.cli.main", "--help"], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0 and "{" + ",".join(VERBS) + "}" in run.stdout.replace("\n", "").replace(" ", "")
