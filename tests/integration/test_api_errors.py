"""One translation of Kubernetes API errors: the gate's line, a person's line naming the call, the CLI's last resort."""

import json
import socket

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from offhours.scripts.cluster.base import ClusterError
from offhours.scripts.cluster.errors import describe_api_error, explain, explain_api_error, failed_call, server_message
from offhours.scripts.cluster.kube import KubeCluster
from offhours.scripts.pool.reader import PoolReader

REASONS = {401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 409: "Conflict", 422: "Unprocessable Entity",
           500: "Internal Server Error", 503: "Service Unavailable"}


def api_error(status: int, message: str | None = None, body: str | bytes | None = None) -> ApiException:
    err = ApiException(status=status, reason=REASONS[status])
    if message is not None:
        err.body = json.dumps({"kind": "Status", "status": "Failure", "message": message, "code": status})
    elif body is not None:
        err.body = body
    return err


def refused() -> urllib3.exceptions.MaxRetryError:
    """A real refused connection, as the client raises it (the port was free a moment ago: nothing listens)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = client.Configuration()
    config.host, config.retries = f"https://127.0.0.1:{port}", 0
    try:
        client.CoreV1Api(client.ApiClient(config)).list_namespace()
    except urllib3.exceptions.MaxRetryError as err:
        return err
    raise AssertionError("something listens on a port that was free")


def unresolved() -> urllib3.exceptions.MaxRetryError:
    pool = urllib3.HTTPSConnectionPool("api.lab.invalid", 6443)
    conn = urllib3.connection.HTTPSConnection("api.lab.invalid", 6443)
    cause = urllib3.exceptions.NameResolutionError("api.lab.invalid", conn, socket.gaierror(-2, "Name or service not known"))
    return urllib3.exceptions.MaxRetryError(pool, "/api/v1/namespaces", cause)


# -- the server's sentence ------------------------------------------------------------------------
def test_the_servers_sentence_is_its_status_message_on_one_line() -> None:
    assert server_message(api_error(422, 'Workflow.argoproj.io "x" is invalid:\n  spec.templates: Required value')) == (
        'Workflow.argoproj.io "x" is invalid: spec.templates: Required value')
    assert server_message(api_error(500, "x" * 1000)) == "x" * 300


@pytest.mark.parametrize(("body", "sentence"), [
    (None, ""), ("", ""), ("404 page not found\n", "404 page not found"), (b'{"message": "bytes"}', "bytes"),
    ("<html><body>502 Bad Gateway</body></html>", ""), ("[1, 2]", ""), ('{"message": null}', ""), ('"text"', ""),
    ('{"message": 7}', "7"),
])
def test_a_body_that_is_no_status_never_breaks_the_translation(body: str | bytes | None, sentence: str) -> None:
    assert server_message(api_error(503, body=body)) == sentence


# -- the gate's line ------------------------------------------------------------------------------
@pytest.mark.parametrize("status", [401, 403, 404, 409, 422, 500, 503])
def test_the_gates_line_is_the_http_answer_and_the_servers_sentence(status: int) -> None:
    assert failed_call("stop workflow research/a", api_error(status, "the sentence")) == (
        f"stop workflow research/a: HTTP {status} {REASONS[status]}: the sentence")
    assert failed_call("stop workflow research/a", api_error(status)) == (
        f"stop workflow research/a: HTTP {status} {REASONS[status]}")


def test_kube_cluster_raises_the_gates_line_once_retries_are_spent() -> None:
    cluster = KubeCluster(client.ApiClient(client.Configuration()), retries=1, backoff=0, sleep=lambda _: None)

    def forbidden() -> None:
        raise api_error(403, 'workflows.argoproj.io "a" is forbidden: User "x" cannot patch')
    with pytest.raises(ClusterError) as raised:
        cluster._call("stop workflow research/a", forbidden)
    assert str(raised.value) == ('stop workflow research/a: HTTP 403 Forbidden: workflows.argoproj.io "a" is forbidden: '
                                 'User "x" cannot patch')
    err = refused()

    def unreachable() -> None:
        raise err
    with pytest.raises(ClusterError) as raised:
        cluster._call("scale deployment serving/chat to 8", unreachable)
    assert str(raised.value) == (f"scale deployment serving/chat to 8: cannot reach the API server at "
                                 f"https://127.0.0.1:{err.pool.port} (connection refused)")


# -- a person's line naming the call --------------------------------------------------------------
def test_missing_rights_say_what_to_do_for_a_read_and_for_a_write() -> None:
    err = api_error(403, 'workflows.argoproj.io "a" is forbidden')
    assert describe_api_error("list workflows in research", err) == (
        "list workflows in research: no rights (HTTP 403): ask for read access, see `offhours render --console` "
        "for the Role")
    assert describe_api_error("stop workflow research/a", err, write=True) == (
        "stop workflow research/a: no rights (HTTP 403): your account may read but not change it; nothing was changed")


def test_refused_credentials_are_not_authenticated_not_missing_rights() -> None:
    err = api_error(401, "Unauthorized")
    assert describe_api_error("list workflows in research", err) == (
        "list workflows in research: not authenticated (HTTP 401): your kubeconfig's credentials were refused")
    assert describe_api_error("stop workflow research/a", err, write=True) == (
        "stop workflow research/a: not authenticated (HTTP 401): your kubeconfig's credentials were refused; "
        "nothing was changed")


def test_not_found_and_other_answers_keep_the_servers_sentence() -> None:
    assert describe_api_error("list pods of a", api_error(404, 'namespaces "lab" not found')) == (
        'list pods of a: not found (HTTP 404): namespaces "lab" not found')
    assert describe_api_error("list pods of a", api_error(404)) == "list pods of a: not found (HTTP 404)"
    assert describe_api_error("stop workflow research/a", api_error(409, "the object has been modified"), write=True) == (
        "stop workflow research/a: HTTP 409 Conflict: the object has been modified")
    assert describe_api_error("list pods of a", api_error(500)) == "list pods of a: HTTP 500 Internal Server Error"


def test_an_unreachable_server_is_named_by_address_and_why() -> None:
    err = refused()
    assert describe_api_error("list workflows in research", err) == (
        f"list workflows in research: cannot reach the API server at https://127.0.0.1:{err.pool.port} "
        "(connection refused)")
    assert describe_api_error("list workflows in research", unresolved()) == (
        "list workflows in research: cannot reach the API server at https://api.lab.invalid:6443 "
        "(failed to resolve 'api.lab.invalid' ([Errno -2] Name or service not known))")


def test_a_broken_answer_is_named_without_the_connections_repr() -> None:
    pool = urllib3.HTTPSConnectionPool("api.lab", 6443)
    err = urllib3.exceptions.ReadTimeoutError(pool, "/api", "Read timed out. (read timeout=5)")
    assert describe_api_error("list pods of a", err) == (
        "list pods of a: cannot reach the API server at https://api.lab:6443 (read timed out. (read timeout=5))")
    assert describe_api_error("list pods of a", urllib3.exceptions.ProtocolError("Connection aborted.")) == (
        "list pods of a: cannot reach the API server (connection aborted.)")


def test_anything_else_is_named_by_its_type() -> None:
    assert describe_api_error("list pods of a", ValueError("x" * 300)) == f"list pods of a: ValueError: {'x' * 200}"


def test_the_pool_reader_shows_a_failed_list_as_its_problem() -> None:
    reader = PoolReader("serving", "research", client.ApiClient(client.Configuration()))

    def refuse(*args: object, **kwargs: object) -> None:
        raise api_error(403, "forbidden")
    reader.custom.list_namespaced_custom_object = refuse
    problems: list[str] = []
    assert reader.workflows(problems) == []
    assert problems == ["list workflows in research: no rights (HTTP 403): ask for read access, see "
                        "`offhours render --console` for the Role"]


# -- the command line's last resort ---------------------------------------------------------------
@pytest.mark.parametrize(("status", "word"), [(401, "not authenticated"), (403, "no rights"), (404, "not found"),
                                              (409, "HTTP 409"), (503, "HTTP 503")])
def test_the_cli_names_the_status_class_then_the_servers_sentence(status: int, word: str) -> None:
    assert explain_api_error(api_error(status, "the sentence")) == f"{word}: the sentence"
    assert explain(api_error(status, "the sentence")) == (f"{word}: the sentence", 1)
    assert explain_api_error(api_error(status)) == f"{word}: {REASONS[status]}"


def test_the_cli_says_no_message_when_there_is_neither_sentence_nor_reason() -> None:
    assert explain_api_error(ApiException(status=500)) == "HTTP 500: no message"


def test_the_cli_names_an_unreachable_server_with_the_failures_own_text() -> None:
    err = refused()
    line, code = explain(err) or ("", 0)
    assert code == 1 and line.startswith(f"cannot reach the Kubernetes API at https://127.0.0.1:{err.pool.port}: "
                                         "Failed to establish a new connection: [Errno ")
    assert line.endswith("Connection refused") and "HTTPSConnection" not in line
    assert explain_api_error(urllib3.exceptions.ProtocolError("Connection aborted.")) == (
        "cannot reach the Kubernetes API: Connection aborted.")


def test_other_errors_are_not_api_errors() -> None:
    assert explain_api_error(ValueError("bug")) is None
    assert explain_api_error(ClusterError("scale: HTTP 503")) is None
