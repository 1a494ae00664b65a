"""`offhours render`: every manifest of the library, and a kustomization.yaml, into a folder."""

import argparse
import sys
from pathlib import Path
from typing import Any

from offhours.scripts.names import OFFHOURS_IMAGE


def _render(args: argparse.Namespace) -> int:
    from offhours.scripts.config.loader import CONFIG_LIMIT_BYTES
    from offhours.scripts.inputs.errors import InputError
    from offhours.scripts.inputs.text import read_text
    from offhours.scripts.policy.config import ConfigError
    from offhours.workflows.render import write

    try:
        text = read_text(args.gate_config, CONFIG_LIMIT_BYTES) if args.gate_config else None
    except OSError as err:
        print(f"render: cannot read {args.gate_config}: {err.strerror}", file=sys.stderr)
        return 2
    except InputError as err:
        print(f"render: {err}", file=sys.stderr)
        return 2
    try:
        paths = write(Path(args.out), text, args.image, args.console)
    except OSError as err:
        print(f"render: cannot write {args.out}: {err.strerror}", file=sys.stderr)
        return 2
    except ConfigError as err:
        print(err, file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    return 0


def register(subparsers: Any) -> None:
    """Add `render` to the `offhours` command."""
    render = subparsers.add_parser("render", help="write every manifest of the library and a kustomization.yaml")
    render.add_argument("--out", required=True, help="folder to write into (created if missing)")
    render.add_argument("--gate-config", help="gate configuration: installed as the gate's ConfigMap; its "
                        "Deployments and namespaces shape the RBAC (default: the bundled example)")
    render.add_argument("--image", default=OFFHOURS_IMAGE, help="offhours image of the launcher, the parameter "
                        f"check, the exit hook and the gate (default: {OFFHOURS_IMAGE})")
    render.add_argument("--console", action="store_true", help="also the web console: its Deployment, Service, "
                        "ServiceAccount and read-only Roles (in the serving namespace)")
    render.set_defaults(func=_render)
