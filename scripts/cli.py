"""The `offhours` command line."""

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

Command = Callable[[argparse.Namespace], int]


def _render(args: argparse.Namespace) -> int:
    from offhours.workflows.render import write

    for path in write(Path(args.out)):
        print(path)
    return 0


def _validate(args: argparse.Namespace) -> int:
    from offhours.scripts.validate import load_documents, validate_documents

    docs, problems = load_documents(args.paths)
    problems += validate_documents(docs)
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} problem(s) in {len({p.file for p in problems})} file(s)", file=sys.stderr)
        return 1
    print(f"ok: {len(docs)} document(s) valid", file=sys.stderr)
    return 0


def parser() -> argparse.ArgumentParser:
    """Build the argument parser of `offhours`."""
    root = argparse.ArgumentParser(
        prog="offhours",
        description="Lend idle LLM-inference GPUs to research jobs; give them back when traffic returns.",
    )
    sub = root.add_subparsers(dest="command", required=True)

    render = sub.add_parser("render", help="write every manifest of the library and a kustomization.yaml")
    render.add_argument("--out", required=True, help="folder to write into (created if missing)")
    render.set_defaults(func=_render)

    validate = sub.add_parser("validate", help="check Argo manifests: v4.0.5 CRD schemas and reference lint")
    validate.add_argument("paths", nargs="+", help="YAML/JSON files or folders (multi-document YAML allowed)")
    validate.set_defaults(func=_validate)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `offhours` command line; return its exit code."""
    args = parser().parse_args(argv)
    func: Command = args.func
    return func(args)


if __name__ == "__main__":
    sys.exit(main())
