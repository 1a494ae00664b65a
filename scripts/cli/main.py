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
    render,
    report,
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
    simulate.register(sub)
    report.register(sub)
    check.register(sub)
    demo.register(sub)
    check_parameters.register(sub)
    return_gpus.register(sub)
    backstop.register(sub)
    jobs.register(sub)
    console.register(sub)
    schedule.register(sub)
    trace.register(sub)
    tune.register(sub)
    calibrate.register(sub)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `offhours` command line; return its exit code."""
    from offhours.scripts.cli.errors import run_command

    args = parser().parse_args(argv)
    func: Command = args.func
    return run_command(func, args)


if __name__ == "__main__":
    sys.exit(main())
