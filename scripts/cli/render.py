"""`offhours render`: every manifest of the library, and a kustomization.yaml, into a folder."""

import argparse
import sys
from pathlib import Path
from typing import Any

from offhours.scripts.names import OFFHOURS_IMAGE


def _render(args: argparse.Namespace) -> int:
    from offhours.scripts.cluster.log_archive import ArchiveError, parse_archive_uri
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
    archive = None
    if args.log_archive:
        try:
            parse_archive_uri(args.log_archive)
        except ArchiveError as err:
            print(f"render: {err}", file=sys.stderr)
            return 2
        archive = (args.log_archive, args.log_archive_endpoint or "", args.log_archive_secret or "",
                   bool(args.log_archive_insecure))
    elif args.log_archive_endpoint or args.log_archive_secret or args.log_archive_insecure:
        print("render: --log-archive-endpoint, --log-archive-secret and --log-archive-insecure need --log-archive",
              file=sys.stderr)
        return 2
    try:
        paths = write(Path(args.out), text, args.image, args.console, archive)
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
    render.add_argument("--log-archive", metavar="s3://BUCKET/PREFIX",
                        help="have Argo keep every research pod's main log there (archiveLogs, an artifact "
                        "repository ConfigMap in the research namespace), so a stopped attempt's log stays readable "
                        "to `offhours logs` once its pod is gone")
    render.add_argument("--log-archive-endpoint", metavar="HOST[:PORT]",
                        help="the S3 endpoint as Argo's executor reaches it (default: AWS S3)")
    render.add_argument("--log-archive-secret", metavar="NAME",
                        help="Secret in the research namespace with keys accessKey and secretKey (default: the pods' "
                        "own cloud identity)")
    render.add_argument("--log-archive-insecure", action="store_true", help="plain HTTP to the endpoint")
    render.set_defaults(func=_render)
