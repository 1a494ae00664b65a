"""Who reads the console, and what of the pool they may see: the way Kubernetes-native consoles do it.

A reader brings a bearer token (an `Authorization: Bearer` header, or the token pasted once into
the login form, kept in an HttpOnly cookie). The API server says whose it is (TokenReview) and what
that identity may list (SubjectAccessReview): the services only if it may list Deployments in the
serving namespace, the jobs and usage only if it may list workflows in the research namespace,
`/metrics` only if it may `get` the non-resource URL `/metrics` (as kube-rbac-proxy asks). So a
token without rights sees nothing of anyone's jobs, and no token is a 401.

Answers are cached per token (by its SHA-256, never the token itself) for a short time, in a
bounded table: a flood of invented tokens costs API calls, never unbounded memory. A review the
API server cannot answer is not cached and is not an open door: the page says so (503).
"""

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from flask import request

from offhours.scripts.cluster.access import READ_JOBS, AccessReviewer, AccessUnknown, Action, PersonAccess, Subject, token_review
from offhours.scripts.names import CONSOLE_TOKEN_COOKIE

LIST_DEPLOYMENTS = Action("list", "deployments", "apps")  # the services of the serving namespace

MAX_TOKEN_BYTES = 16384  # a service account token is about 1 KiB; anything far larger is not one
CACHE_SECONDS = 60.0
CACHE_ENTRIES = 1024
REVIEW_TIMEOUT = 5.0


@dataclass(frozen=True)
class Access:
    """What one authenticated identity may see of the console's data."""

    user: str
    services: bool  # may list Deployments in the serving namespace
    jobs: bool  # may list workflows in the research namespace
    metrics: bool  # may get /metrics
    # Who the API server says it is (TokenReview): the subject of every later review of what it may do to a job.
    subject: Subject | None = field(default=None, compare=False)
    # What it may do to a job, asked of the API server per namespace (SubjectAccessReview): the resolver's only
    # source of permission for the console's lookups (cluster/resolve.py). None: it may act on no job.
    reviewer: AccessReviewer | None = field(default=None, compare=False)


class ReviewUnavailable(RuntimeError):
    """The API server could not answer a review (down, slow, refused the console's own rights)."""


class Authenticator(Protocol):
    """Turns a bearer token into what it may see; None: not a valid token."""

    def access(self, token: str) -> Access | None:
        """Review `token`."""
        ...


class KubernetesAuth:
    """TokenReview and SubjectAccessReview against the API server, with the console's own client."""

    def __init__(self, api_client: Any, serving_namespace: str, research_namespace: str,
                 ttl: float = CACHE_SECONDS, entries: int = CACHE_ENTRIES, timeout: float = REVIEW_TIMEOUT,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.api = api_client
        self.serving, self.research = serving_namespace, research_namespace
        self.ttl, self.entries, self.timeout, self.clock = ttl, entries, timeout, clock
        self._cache: OrderedDict[str, tuple[float, Access | None]] = OrderedDict()
        self._lock = threading.Lock()

    def access(self, token: str) -> Access | None:
        """Review `token` (cached): None if the API server does not know it; ReviewUnavailable if it cannot say."""
        if not token or len(token.encode()) > MAX_TOKEN_BYTES:
            return None
        key = hashlib.sha256(token.encode()).hexdigest()
        now = self.clock()
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and now - hit[0] < self.ttl:
                return hit[1]
        answer = self._review(token)
        with self._lock:
            self._cache[key] = (now, answer)
            self._cache.move_to_end(key)
            while len(self._cache) > self.entries:
                self._cache.popitem(last=False)
        return answer

    def _review(self, token: str) -> Access | None:
        try:
            subject = token_review(self.api, token, self.timeout)
        except AccessUnknown as err:  # whatever failed, nobody is let in on it
            raise ReviewUnavailable(f"cannot review the token: {err}") from None
        if subject is None:
            return None
        person = PersonAccess(self.api, subject, self.timeout)
        try:
            return Access(user=subject.user, services=person.may(self.serving, LIST_DEPLOYMENTS),
                          jobs=person.may(self.research, READ_JOBS), metrics=person.may_path("/metrics", "get"),
                          subject=subject, reviewer=person)
        except AccessUnknown as err:
            raise ReviewUnavailable(f"cannot review the token's rights: {err}") from None


def bearer_token() -> str:
    """Return the request's token: its `Authorization: Bearer` header, else the login cookie; "" for none."""
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return request.cookies.get(CONSOLE_TOKEN_COOKIE, "")
