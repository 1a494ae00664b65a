"""`offhours validate`: Argo manifests against the v4.0.5 CRD schemas, the reference lint, the tenant boundary.

The boundary: what the admission policies `offhours render` installs would refuse in the research namespace.

Exit 0: valid (warnings allowed unless --strict); 1: problems found; 2: a file could not be read at
all (missing, empty, another encoding, binary, enormous; a folder without manifests), each named on
its own line.
"""

import argparse
import sys
from typing import Any


def _validate(args: argparse.Namespace) -> int:
    import json

    from offhours.scripts.cli.text import printable
    from offhours.scripts.validate import load_documents, validate_documents

    boundary = None
    if args.gate_config:
        from offhours.scripts.config.loader import load_config
        from offhours.scripts.policy.config import ConfigError

        try:
            boundary = load_config(args.gate_config).research
        except ConfigError as err:
            print(f"validate: {err}", file=sys.stderr)
            return 2
    docs, problems = load_documents(args.paths)
    problems += validate_documents(docs, boundary=boundary)
    failing = [p for p in problems if p.severity == "error" or args.strict]
    if args.output == "json":
        print(json.dumps([{"file": p.file, "document": p.document, "path": p.path, "severity": p.severity,
                           "message": p.message} for p in problems], indent=2))
    else:
        for problem in problems:
            print(printable(problem))
    errors = sum(p.severity == "error" for p in problems)
    if problems:
        print(f"{errors} error(s), {len(problems) - errors} warning(s) in {len({p.file for p in problems})} file(s)"
              + (" (--strict: warnings fail)" if args.strict and len(problems) > errors else ""), file=sys.stderr)
    if any(p.unreadable for p in problems):
        return 2  # a file that cannot be read at all is a wrong argument, not a manifest with problems
    if failing:
        return 1
    print(f"ok: {len(docs)} document(s) valid", file=sys.stderr)
    return 0


def register(subparsers: Any) -> None:
    """Add `validate` to the `offhours` command."""
    validate = subparsers.add_parser("validate", help="check Argo manifests: v4.0.5 CRD schemas and reference lint")
    validate.add_argument("paths", nargs="+", help="YAML/JSON files or folders (multi-document YAML allowed)")
    validate.add_argument("--strict", action="store_true", help="fail on warnings too (likely mistakes Argo accepts)")
    validate.add_argument("--gate-config", help="gate configuration installed (the tolerations and RuntimeClasses "
                          "research pods may use; default: the bundled defaults)")
    validate.add_argument("-o", "--output", choices=["text", "json"], default="text", help="text (default) or JSON")
    validate.set_defaults(func=_validate)
