"""One translation of the Kubernetes API's errors into the one line a person reads.

An `ApiException` carries the HTTP status, its reason and, as its body, usually a Status object
whose `message` is the API server's own sentence; a connection that fails is a urllib3 error whose
text embeds the connection objects' reprs. Everything here reads those the same way; the lines
differ only by who reads them:

- `failed_call`: the gate's line for a call that failed (in its errors, Events and records):
  `{what}: HTTP {status} {reason}: {the server's sentence}`;
- `describe_api_error`: a person's line naming the call (`offhours jobs`, `cancel`, `logs`, the
  console): the statuses a person acts on (401, 403, 404) named in words first, with what to do;
- `explain_api_error`: the command line's last resort, where no call is named (the subcommand is):
  `{no rights|not found|not authenticated|HTTP status}: {the server's sentence}`;
- `explain` and `run_explained`: every expected error of a program (`offhours` verbs, the gate's
  CronWorkflow step) as one line and an exit code: 2 for what the user must fix locally
  (configuration, kubeconfig, files), 1 for what the cluster answered; anything else is a bug and
  keeps its traceback.

A server that cannot be reached is named by its address and why, never by a repr.
"""

import json
import logging
import re
import sys
from collections.abc import Callable

import urllib3
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from offhours.scripts.cluster.base import ClusterError
from offhours.scripts.inputs.errors import InputError
from offhours.scripts.policy.config import ConfigError

STATUS_WORDS = {401: "not authenticated", 403: "no rights", 404: "not found"}
MESSAGE_LIMIT = 300  # a longer Status message is a dump (a whole invalid object), not a sentence
# Connection objects in urllib3's texts: `<...HTTPSConnection object at 0x7f...>: ` (1.x) and
# `HTTPSConnection(host='h', port=443): ` or `HTTPSConnectionPool(host='h', port=443): ` (2.x).
_OBJECT_REPR = re.compile(r"<[^>]*>: |\b\w+\(host=[^)]*\): ")


def server_message(err: ApiException) -> str:
    """Return the API server's own sentence (its Status `message`) on one line, '' without one.

    A body that is not JSON is kept when it is plain text ("404 page not found"), dropped when it
    is markup (a proxy's error page).
    """
    body = err.body.decode("utf-8", "replace") if isinstance(err.body, bytes) else str(err.body or "")
    try:
        status = json.loads(body) if body.strip() else None
    except ValueError:
        text = "" if body.lstrip().startswith("<") else body
    else:
        text = str(status.get("message") or "") if isinstance(status, dict) else ""
    return " ".join(text.split())[:MESSAGE_LIMIT]


def failed_call(what: str, err: BaseException) -> str:
    """Return the gate's line for the call `what` that failed with `err`: its HTTP answer, or why it got none."""
    if isinstance(err, ApiException):
        return _joined(f"{what}: HTTP {err.status} {err.reason}", server_message(err))
    if isinstance(err, urllib3.exceptions.HTTPError):
        return f"{what}: {_unreachable(err)}"
    return f"{what}: {type(err).__name__}: {str(err)[:200]}"


def describe_api_error(what: str, err: BaseException, write: bool = False) -> str:
    """Return a person's line for the call `what` that failed with `err` (`write`: the call changes something).

    Missing rights and credentials say what to do instead of the server's sentence (which names
    the account and the verb, already known to the person); the rest reads as `failed_call`.
    """
    if isinstance(err, ApiException) and err.status in (401, 403):
        if err.status == 401:
            hint = "your kubeconfig's credentials were refused"
        elif write:
            hint = "your account may read but not change it"
        else:
            hint = "ask for read access, see `offhours render --console` for the Role"
        done = "; nothing was changed" if write else ""
        return f"{what}: {STATUS_WORDS[err.status]} (HTTP {err.status}): {hint}{done}"
    if isinstance(err, ApiException) and err.status == 404:
        return _joined(f"{what}: not found (HTTP 404)", server_message(err))
    return failed_call(what, err)


def explain_api_error(err: BaseException) -> str | None:
    """Return the line for an API answer or connection failure where no call is named; None for anything else."""
    if isinstance(err, ApiException):
        word = STATUS_WORDS.get(err.status or 0, f"HTTP {err.status}")
        return f"{word}: {server_message(err) or err.reason or 'no message'}"
    if isinstance(err, urllib3.exceptions.HTTPError):
        where = _address(err)
        return f"cannot reach the Kubernetes API{f' at {where}' if where else ''}: {_detail(err)}"
    return None


def explain(err: BaseException) -> tuple[str, int] | None:
    """Return (one line, exit code) for an expected error, None for a bug."""
    api = explain_api_error(err)  # an API answer or an unreachable API server: what the cluster said
    if api is not None:
        return api, 1
    if isinstance(err, ConfigException):
        return (f"no Kubernetes configuration: {err} (set KUBECONFIG, or write ~/.kube/config)", 2)
    if isinstance(err, ConfigError):
        return str(err), 2
    if isinstance(err, InputError):  # a file, stream or answer the input layer refused: it names which
        return f"an input file is not usable: {err}", 2
    if isinstance(err, ClusterError):
        return str(err), 1
    if isinstance(err, OSError) and err.filename is not None:
        return f"{err.filename}: {err.strerror or err}", 2
    return None


def run_explained(command: str, run: Callable[[], int]) -> int:
    """Run `offhours {command}`'s body; print an expected error as one line on stderr and return its exit code."""
    # The client retries a refused connection and logs each retry through the root logger's last
    # resort handler: the one line below says it once.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    try:
        return run()
    except KeyboardInterrupt:
        return 130
    except Exception as err:  # noqa: BLE001 - re-raised unless it is an expected error
        explained = explain(err)
        if explained is None:
            raise
        message, code = explained
        print(f"offhours {command}: {message}", file=sys.stderr)
        return code


def _joined(head: str, sentence: str) -> str:
    return f"{head}: {sentence}" if sentence else head


def _address(err: urllib3.exceptions.HTTPError) -> str:
    """Return `scheme://host:port` of the server tried, '' when the error does not say."""
    pool = getattr(err, "pool", None)
    return f"{pool.scheme}://{pool.host}:{pool.port}" if pool is not None else ""


def _detail(err: urllib3.exceptions.HTTPError) -> str:
    """Return the failure's own text, without connection reprs (for a retried request: its last cause's)."""
    cause = err.reason if isinstance(err, urllib3.exceptions.MaxRetryError) and err.reason is not None else err
    return _OBJECT_REPR.sub("", str(cause)).strip() or type(cause).__name__


def _unreachable(err: urllib3.exceptions.HTTPError) -> str:
    """Return `cannot reach the API server at <address> (<why>)`, why in a few words."""
    cause = err.reason if isinstance(err, urllib3.exceptions.MaxRetryError) else err
    refused = isinstance(cause, urllib3.exceptions.NewConnectionError) and (
        isinstance(cause.__cause__, ConnectionRefusedError) or "connection refused" in str(cause).lower())
    why = "connection refused" if refused else _detail(err)
    where = _address(err)
    return f"cannot reach the API server{f' at {where}' if where else ''} ({why[:1].lower()}{why[1:]})"
