"""`offhours validate`: Argo manifests against the v4.0.5 CRD schemas, the reference lint, the tenant boundary.

The boundary: what the admission policies `offhours render` installs would refuse in the research namespace.

"valid" only when the API server accepted every document in a server-side dry run (nothing stored);
offline (--offline, or no cluster answers) it says the documents pass the offline checks only, and
why the API server was not asked. Exit 0: no problem found (warnings allowed unless --strict);
1: problems found (the API server's refusal in a dry run among them); 2: a file could not be read at all
(missing, empty, another encoding, binary, enormous; a folder without manifests), each named on its own line.
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
    refused, unchecked = ([], "--offline: no cluster asked") if args.offline else _server_check(args, docs)
    if refused:
        for problem in refused:
            print(printable(problem))
        print(f"{len(refused)} error(s): the API server refuses what the offline checks passed", file=sys.stderr)
        return 1
    if unchecked:
        # Never "valid" for what the API server was not asked about: its defaulting, webhooks and admission may refuse it.
        print(f"ok: {len(docs)} document(s) pass the offline checks only (the Argo v4.0.5 CRD schemas, the lint, the "
              f"tenant boundary); not checked by an API server: {printable(unchecked)}", file=sys.stderr)
        return 0
    print(f"ok: {len(docs)} document(s) valid: the API server accepted each in a server-side dry run", file=sys.stderr)
    return 0


def _server_check(args: argparse.Namespace, docs: list[Any]) -> tuple[list[Any], str]:
    """Dry-run every document on the cluster, if one answers: (the refusals, why some were not checked, or "")."""
    from offhours.scripts.cli.connect import NoCluster, connect
    from offhours.scripts.cluster.connection import context_namespace
    from offhours.scripts.cluster.dryrun import REFUSED, UNCHECKED, dry_run_create
    from offhours.scripts.inputs.errors import InputError
    from offhours.scripts.validate.problems import Problem

    try:
        api = connect(getattr(args, "kubeconfig", None))
        namespace = args.namespace or context_namespace() or "default"
    except (NoCluster, InputError, UnicodeDecodeError) as err:
        return [], f"no cluster answered ({str(err).splitlines()[0][:200]})"
    refused: list[Any] = []
    unchecked: list[str] = []
    for file, index, doc in docs:
        answer = dry_run_create(api, doc, namespace)
        if answer.verdict == REFUSED:
            refused.append(Problem(file, index, ".", f"the API server refuses it (dry run): {answer.reason}"))
        elif answer.verdict == UNCHECKED:
            unchecked.append(f"{file}: document {index}: {answer.reason}")
    more = f" (and {len(unchecked) - 1} more)" if len(unchecked) > 1 else ""
    return refused, (unchecked[0] + more) if unchecked else ""


def register(subparsers: Any) -> None:
    """Add `validate` to the `offhours` command."""
    validate = subparsers.add_parser("validate", help="check Argo manifests: v4.0.5 CRD schemas and reference lint")
    validate.add_argument("paths", nargs="+", help="YAML/JSON files or folders (multi-document YAML allowed)")
    validate.add_argument("--strict", action="store_true", help="fail on warnings too (likely mistakes Argo accepts)")
    validate.add_argument("--gate-config", help="gate configuration installed (the tolerations and RuntimeClasses "
                          "research pods may use; default: the bundled defaults)")
    validate.add_argument("--offline", action="store_true", help="ask no cluster: check the schemas, lint and boundary "
                          "only (the answer then says so, never 'valid')")
    validate.add_argument("-n", "--namespace", help="namespace of the server-side dry run for documents that name none "
                          "(default: the kubeconfig context's, else default)")
    validate.add_argument("-o", "--output", choices=["text", "json"], default="text", help="text (default) or JSON")
    validate.set_defaults(func=_validate)
