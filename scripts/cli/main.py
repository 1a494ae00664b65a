"""The `offhours` command line: the root parser, each verb's `register` in help order, the dispatch.

Each verb lives in its own module of this package (render.py, gate.py, ...) with a
`register(subparsers)` that adds its parser and sets `func`; the order of the calls below is the
order of `offhours --help`.
"""

import argparse
import sys
from collections.abc import Callable, Sequence

from offhours.scripts.cli import (
    backstop,
    calibrate,
    check,
    check_parameters,
    console,
    demo,
    gate,
    jobs,
    logs,
    render,
    report,
    rerun,
    return_gpus,
    schedule,
    simulate,
    submit,
    trace,
    tune,
    validate,
)

Command = Callable[[argparse.Namespace], int]


def parser() -> argparse.ArgumentParser:
    """Build the argument parser of `offhours`."""
    root = argparse.ArgumentParser(
        prog="offhours",
        description="Lend idle LLM-inference GPUs to research jobs; give them back when traffic returns.",
    )
    sub = root.add_subparsers(dest="command", required=True)

    render.register(sub)
    validate.register(sub)
    gate.register(sub)
    submit.register(sub)
    rerun.register(sub)
    simulate.register(sub)
    report.register(sub)
    check.register(sub)
    demo.register(sub)
    backstop.register(sub)
    jobs.register(sub)
    logs.register(sub)
    jobs.register_actions(sub)
    console.register(sub)
    schedule.register(sub)
    trace.register(sub)
    tune.register(sub)
    calibrate.register(sub)
    # The in-pod verbs run inside offhours' own pods (the check-parameters step, the exit hook): they stay
    # callable by name, and out of a person's help.
    shown = list(sub.choices)
    check_parameters.register(sub)
    return_gpus.register(sub)
    hide(sub, shown)
    return root


def hide(sub: "argparse._SubParsersAction[argparse.ArgumentParser]", shown: list[str]) -> None:
    """Leave only the verbs `shown` in the help's list and summary; every other verb still parses and runs."""
    sub.metavar = "{" + ",".join(shown) + "}"
    sub._choices_actions = [a for a in sub._choices_actions if a.dest in shown]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `offhours` command line; return its exit code."""
    from offhours.scripts.cli.errors import run_command

    args = parser().parse_args(argv)
    func: Command = args.func
    return run_command(func, args)


if __name__ == "__main__":
    sys.exit(main())
