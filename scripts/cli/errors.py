"""Expected errors of the `offhours` command line, each turned into one line and an exit code.

A missing object (404), missing rights (403), no kubeconfig, an API server that cannot be
reached, a bad configuration or an unreadable file is something a user does or meets, not a
bug: it gets one line naming what is wrong, never a traceback (the translation is
`offhours.scripts.cluster.errors.explain`, which the gate's CronWorkflow step shares).
"""

import argparse
import sys
from collections.abc import Callable

from offhours.scripts.cluster.errors import run_explained


def run_command(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a subcommand; print an expected error as one line on stderr and return its exit code.

    A file that some library reads on the verb's behalf (a kubeconfig named by $KUBECONFIG or
    --kubeconfig) in another encoding, binary or nested past the YAML parser's limit is a wrong
    input too: one line, exit 2.
    """
    import yaml

    from offhours.scripts.cli.connect import NoCluster

    try:
        return run_explained(args.command, lambda: func(args))
    except NoCluster as err:
        print(f"offhours {args.command}: {err}", file=sys.stderr)
        return err.exit_code
    except UnicodeDecodeError as err:
        print(f"offhours {args.command}: an input file is not UTF-8 text (byte 0x{err.object[err.start]:02x} at "
              f"offset {err.start}); the kubeconfig read: {_kubeconfig(args)}", file=sys.stderr)
        return 2
    except (yaml.YAMLError, RecursionError) as err:
        what = "nested too deeply" if isinstance(err, RecursionError) else str(err).splitlines()[0]
        print(f"offhours {args.command}: an input file is not valid YAML ({what}); the kubeconfig read: "
              f"{_kubeconfig(args)}", file=sys.stderr)
        return 2


def _kubeconfig(args: argparse.Namespace) -> str:
    import os

    return str(getattr(args, "kubeconfig", None) or os.environ.get("KUBECONFIG") or "~/.kube/config")
