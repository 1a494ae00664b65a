"""What a caller may do in a namespace, asked of the API server (or of the in-memory cluster's modelled RBAC).

Kubernetes' authorization boundary is the namespace: a workflow's labels (its submitter among them) are
anyone's to write who may patch it, so no label ever decides whose job a lookup may touch. A lookup asks
instead, per namespace, whether the caller may do the verb's action there:

- the CLI asks as itself: a SelfSubjectAccessReview with its own credentials (`SelfAccess`);
- the console acting for a signed-in person asks a SubjectAccessReview naming that person, their groups,
  uid and extra, with the console's own client (`PersonAccess`), or, without authentication, as the
  console's kubeconfig (`SelfAccess`).

An access review the API server cannot answer is a refusal (`AccessUnknown`), never a permission.
"""

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from offhours.scripts.names import ARGO_GROUP

REVIEW_TIMEOUT = 5.0
# The answer of a POST as plain JSON (the client's `call_api` deserialises to the type each status maps to).
ANY_ANSWER = {200: "object", 201: "object"}
ANSWER_SECONDS = 60.0  # as long as the console keeps a token's review (console/auth.py CACHE_SECONDS)


@dataclass(frozen=True)
class Action:
    """One thing a verb does, as RBAC names it: a verb on a resource (and subresource) of an API group."""

    verb: str
    resource: str
    group: str = ""
    subresource: str = ""

    def described(self) -> str:
        """Return the action as a refusal names it: `patch workflows.argoproj.io`, `get pods/log`."""
        what = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        return f"{self.verb} {what}.{self.group}" if self.group else f"{self.verb} {what}"


# What each lookup verb does to the job it resolves: asked before it is resolved, per namespace.
READ_JOBS = Action("list", "workflows", ARGO_GROUP)  # jobs, why, the console's job page
CANCEL_JOB = Action("patch", "workflows", ARGO_GROUP)  # cancel (a stop is a patch)
READ_LOGS = Action("get", "pods", "", "log")  # logs
RESUBMIT_JOB = Action("create", "workflows", ARGO_GROUP)  # the console's resubmit


class AccessUnknown(RuntimeError):
    """The API server could not answer an access review: nothing is resolved on it."""


class AccessReviewer(Protocol):
    """Answers whether the caller may do `action` in `namespace` (AccessUnknown when it cannot say)."""

    def may(self, namespace: str, action: Action) -> bool:
        """Whether the caller may do `action` in `namespace`."""
        ...

    def who(self) -> str:
        """Whom the answers are about, for a refusal's text ("" when unknown)."""
        ...


def resource_attributes(namespace: str, action: Action) -> dict[str, str]:
    """Return the review's resourceAttributes for `action` in `namespace`."""
    attributes = {"namespace": namespace, "verb": action.verb, "group": action.group, "resource": action.resource}
    if action.subresource:
        attributes["subresource"] = action.subresource
    return attributes


def _allowed(answer: Any) -> bool:
    """Whether a review's answer says `status.allowed: true`; any other shape is no permission (and no error)."""
    if isinstance(answer, Mapping):
        status = answer.get("status")
        return isinstance(status, Mapping) and status.get("allowed") is True
    status = getattr(answer, "status", None)
    return status is not None and getattr(status, "allowed", False) is True


class SelfAccess:
    """SelfSubjectAccessReview with the caller's own client: what the CLI (and a console without authentication) may do.

    Answers are kept `ttl` seconds (a long-lived console notices a changed RoleBinding within that), on its own
    monotonic clock.
    """

    def __init__(self, api_client: Any, user: str = "", timeout: float = REVIEW_TIMEOUT, ttl: float = ANSWER_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.api, self.user, self.timeout, self.ttl, self.clock = api_client, user, timeout, ttl, clock
        self._answers: dict[tuple[str, Action], bool] = {}
        self._since = clock()

    def who(self) -> str:
        """Return whom the answers are about."""
        return self.user

    def may(self, namespace: str, action: Action) -> bool:
        """Whether the caller may do `action` in `namespace` (asked once per namespace and action within `ttl`)."""
        if self.clock() - self._since >= self.ttl:
            self._answers, self._since = {}, self.clock()
        key = (namespace, action)
        if key not in self._answers:
            body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                    "spec": {"resourceAttributes": resource_attributes(namespace, action)}}
            self._answers[key] = _allowed(_post(self.api, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                                                body, self.timeout))
        return self._answers[key]


@dataclass(frozen=True)
class Subject:
    """A person as the API server authenticated them (TokenReview's userInfo)."""

    user: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, Sequence[str]] = field(default_factory=dict)


class PersonAccess:
    """SubjectAccessReview for a signed-in person, asked with the console's client: what that person may do."""

    def __init__(self, api_client: Any, subject: Subject, timeout: float = REVIEW_TIMEOUT) -> None:
        self.api, self.subject, self.timeout = api_client, subject, timeout
        self._answers: dict[tuple[str, Action], bool] = {}

    def who(self) -> str:
        """Return whom the answers are about."""
        return self.subject.user

    def may(self, namespace: str, action: Action) -> bool:
        """Whether the caller may do `action` in `namespace` (asked once per namespace and action)."""
        key = (namespace, action)
        if key not in self._answers:
            spec: dict[str, Any] = {"user": self.subject.user, "groups": list(self.subject.groups),
                                    "resourceAttributes": resource_attributes(namespace, action)}
            if self.subject.uid:
                spec["uid"] = self.subject.uid
            if self.subject.extra:
                spec["extra"] = {k: list(v) for k, v in self.subject.extra.items()}
            body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
            self._answers[key] = _allowed(_post(self.api, "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                                                body, self.timeout))
        return self._answers[key]

    def may_path(self, path: str, verb: str) -> bool:
        """Whether the person may `verb` the non-resource URL `path` (as kube-rbac-proxy asks for /metrics)."""
        spec: dict[str, Any] = {"user": self.subject.user, "groups": list(self.subject.groups),
                                "nonResourceAttributes": {"path": path, "verb": verb}}
        if self.subject.uid:
            spec["uid"] = self.subject.uid
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        return _allowed(_post(self.api, "/apis/authorization.k8s.io/v1/subjectaccessreviews", body, self.timeout))


def _post(api_client: Any, path: str, body: dict[str, Any], timeout: float, what: str = "an access review") -> Any:
    try:
        return api_client.call_api(path, "POST", body=body, response_types_map=ANY_ANSWER,
                                   auth_settings=["BearerToken"], header_params={"Content-Type": "application/json",
                                                                                 "Accept": "application/json"},
                                   _return_http_data_only=True, _request_timeout=timeout)
    except Exception as err:  # noqa: BLE001 - whatever failed, the answer is "cannot say", never "allowed"
        status = getattr(err, "status", None)
        raise AccessUnknown(f"the API server did not answer {what} ({type(err).__name__}"
                            f"{f' {status}' if status else ''})") from None


def token_review(api_client: Any, token: str, timeout: float = REVIEW_TIMEOUT) -> Subject | None:
    """Return whose `token` is (TokenReview, asked with `api_client`); None when the API server does not accept it."""
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
    answer = _post(api_client, "/apis/authentication.k8s.io/v1/tokenreviews", body, timeout, "a token review")
    status = answer.get("status") if isinstance(answer, Mapping) else None
    user = status.get("user") if isinstance(status, Mapping) else None
    if not isinstance(status, Mapping) or status.get("authenticated") is not True or not isinstance(user, Mapping):
        return None
    groups, extra = user.get("groups"), user.get("extra")
    return Subject(str(user.get("username") or ""), str(user.get("uid") or ""),
                   tuple(str(g) for g in groups) if isinstance(groups, list) else (),
                   {str(k): tuple(str(x) for x in v) for k, v in extra.items() if isinstance(v, list)}
                   if isinstance(extra, Mapping) else {})


@dataclass(frozen=True)
class Grant:
    """One modelled RBAC rule: `verbs` on `resource` (group/subresource) in `namespace` ("*": every namespace)."""

    namespace: str
    resource: str
    verbs: frozenset[str]
    group: str = ""
    subresource: str = ""

    def allows(self, namespace: str, action: Action) -> bool:
        """Whether this rule allows `action` in `namespace`."""
        return (self.namespace in ("*", namespace) and self.resource == action.resource and self.group == action.group
                and self.subresource == action.subresource and (action.verb in self.verbs or "*" in self.verbs))


class ModelledAccess:
    """Access reviews answered from modelled RBAC grants (the in-memory cluster's), for one subject."""

    def __init__(self, grants: Mapping[str, Sequence[Grant]], user: str, groups: Sequence[str] = ()) -> None:
        self.grants, self.user, self.groups = grants, user, tuple(groups)

    def who(self) -> str:
        """Return whom the answers are about."""
        return self.user

    def may(self, namespace: str, action: Action) -> bool:
        """Whether a grant of the user or one of its groups allows `action` in `namespace`."""
        subjects = (self.user, *(f"group:{g}" for g in self.groups))
        return any(g.allows(namespace, action) for s in subjects for g in self.grants.get(s, ()))


def self_review(api_client: Any, timeout: float = REVIEW_TIMEOUT) -> str:
    """Return the user `api_client`'s credentials are (SelfSubjectReview); AccessUnknown when the server does not say."""
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    answer = _post(api_client, "/apis/authentication.k8s.io/v1/selfsubjectreviews", body, timeout, "a self review")
    status = answer.get("status") if isinstance(answer, Mapping) else None
    user = status.get("userInfo") if isinstance(status, Mapping) else None
    return str(user.get("username") or "") if isinstance(user, Mapping) else ""
