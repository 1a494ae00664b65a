"""What the console does for a person, done with the person's own identity, never with the console's rights.

Every read of templates and every write (create, stop) goes to the API server with the bearer token
the person signed in with: the API server itself authenticates and authorises it, so a person who
may not create workflows in the research namespace is refused there and nothing is created, and the
console's ServiceAccount needs no write right at all. Without authentication (`--auth local`, an
operator's laptop) the person is whoever the console's own kubeconfig names (SelfSubjectReview).

Every call is time-boxed; an answer is turned into one line naming what was asked (cluster/errors.py).
"""

import re
from dataclasses import dataclass
from typing import Any

from offhours.scripts.cluster.access import AccessUnknown, self_review
from offhours.scripts.cluster.connection import as_bearer
from offhours.scripts.cluster.errors import describe_api_error
from offhours.scripts.cluster.handles import ApiError as ApiException
from offhours.scripts.cluster.handles import handles
from offhours.scripts.cluster.workflow import PLURAL
from offhours.scripts.names import ARGO_GROUP, ARGO_VERSION

CALL_TIMEOUT = 10.0
TEMPLATES_LISTED = 200  # the request page lists at most this many templates, whatever the namespace holds
_NOT_LABEL = re.compile(r"[^A-Za-z0-9_.-]+")


class Refused(RuntimeError):
    """The API server refused the person (401, 403): nothing was changed."""


class CallFailed(RuntimeError):
    """The call failed for another reason (unreachable, 404, 409, ...): one line naming it."""


@dataclass(frozen=True)
class Person:
    """Who asks: the name the API server gave, and the token to act with (None: the console's kubeconfig)."""

    user: str
    token: str | None


def creator_label(user: str) -> str:
    """Return `user` as a label value the way Argo's server writes its creator label (invalid runs to '-', 63 at most)."""
    text = _NOT_LABEL.sub("-", user)[:63].strip("-_.")
    return text


class PersonApi:
    """The research namespace's templates and workflows, as a person."""

    def __init__(self, api_client: Any, research_namespace: str, timeout: float = CALL_TIMEOUT) -> None:
        self.api = api_client
        self.namespace = research_namespace
        self.timeout = timeout

    def _custom(self, person: Person) -> Any:
        if person.token is None:
            return handles(self.api).custom
        return handles(as_bearer(self.api, person.token)).custom  # only the person's token: no client certificate

    def _call(self, what: str, write: bool, fn: Any) -> Any:
        try:
            return fn()
        except ApiException as err:
            line = describe_api_error(what, err, write=write)
            if err.status in (401, 403):
                raise Refused(line) from None
            raise CallFailed(line) from None
        except Exception as err:  # noqa: BLE001 - whatever failed is this request's, one line
            raise CallFailed(describe_api_error(what, err, write=write)) from None

    def templates(self, person: Person) -> list[dict[str, Any]]:
        """Return the WorkflowTemplates of the research namespace the person may list (at most TEMPLATES_LISTED)."""
        custom = self._custom(person)
        answer = self._call(f"list workflowtemplates in {self.namespace}", False, lambda: custom.list_namespaced_custom_object(
            ARGO_GROUP, ARGO_VERSION, self.namespace, "workflowtemplates", limit=TEMPLATES_LISTED,
            _request_timeout=self.timeout))
        items = [t for t in (answer or {}).get("items") or [] if isinstance(t, dict)]
        return sorted(items, key=lambda t: str((t.get("metadata") or {}).get("name", "")))

    def template(self, person: Person, name: str) -> dict[str, Any]:
        """Return one WorkflowTemplate, read as the person."""
        custom = self._custom(person)
        return dict(self._call(f"get workflowtemplate {self.namespace}/{name}", False,
                               lambda: custom.get_namespaced_custom_object(
                                   ARGO_GROUP, ARGO_VERSION, self.namespace, "workflowtemplates", name,
                                   _request_timeout=self.timeout)))

    def workflow(self, person: Person, name: str) -> dict[str, Any]:
        """Return one workflow, read as the person."""
        custom = self._custom(person)
        return dict(self._call(f"get workflow {self.namespace}/{name}", False, lambda: custom.get_namespaced_custom_object(
            ARGO_GROUP, ARGO_VERSION, self.namespace, PLURAL, name, _request_timeout=self.timeout)))

    def create(self, person: Person, body: dict[str, Any]) -> str:
        """Create a workflow as the person; return its name."""
        custom = self._custom(person)
        created = self._call(f"create workflow in {self.namespace}", True, lambda: custom.create_namespaced_custom_object(
            ARGO_GROUP, ARGO_VERSION, self.namespace, PLURAL, body, _request_timeout=self.timeout))
        return str(created["metadata"]["name"])

    def stop(self, person: Person, name: str, body: dict[str, Any]) -> None:
        """Patch a workflow (a graceful stop) as the person."""
        custom = self._custom(person)
        self._call(f"stop workflow {self.namespace}/{name}", True, lambda: custom.patch_namespaced_custom_object(
            ARGO_GROUP, ARGO_VERSION, self.namespace, PLURAL, name, body, _request_timeout=self.timeout))


def whoami(api_client: Any, timeout: float = CALL_TIMEOUT) -> str:
    """Return the user the console's own credentials are (SelfSubjectReview); "" when the API server does not say."""
    try:
        return self_review(api_client, timeout)
    except AccessUnknown:  # an older API server: the workflow then carries no creator label
        return ""
