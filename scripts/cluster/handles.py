"""The Kubernetes client's API groups over one connection, and its error type: handed to the tools above.

Only scripts/cluster talks to the Kubernetes client (.importlinter, "only the cluster layer imports
kubernetes"): a verb that needs several API groups (`check`, the demo, the pool reader) gets them here,
bound to the client it connected with, and catches `ApiError`, so no module above imports the client.
"""

from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

ApiError = ApiException  # an answer of the API server other than success (its status, reason and body)


@dataclass(frozen=True)
class Handles:
    """One connection's API groups."""

    api: Any
    core: Any
    apps: Any
    custom: Any
    ext: Any
    authz: Any
    sched: Any
    net: Any
    admission: Any
    version: Any

    def plain(self, answer: Any) -> Any:
        """Return an answer of the typed client as plain JSON-like data (as the API server sent it)."""
        return self.api.sanitize_for_serialization(answer)


def handles(api_client: Any = None) -> Handles:
    """Return the API groups over `api_client` (None: the default client of the loaded configuration)."""
    api = api_client if api_client is not None else client.ApiClient()
    return Handles(api, client.CoreV1Api(api), client.AppsV1Api(api), client.CustomObjectsApi(api),
                   client.ApiextensionsV1Api(api), client.AuthorizationV1Api(api), client.SchedulingV1Api(api),
                   client.NetworkingV1Api(api), client.AdmissionregistrationV1Api(api), client.VersionApi(api))


def subject_access_review(user: str, groups: list[str], namespace: str | None, group: str, resource: str, verb: str,
                          subresource: str = "", name: str = "") -> Any:
    """Return a SubjectAccessReview body asking whether `user` (in `groups`) may `verb` `resource` of `group` in `namespace`."""
    return client.V1SubjectAccessReview(spec=client.V1SubjectAccessReviewSpec(
        user=user, groups=groups, resource_attributes=client.V1ResourceAttributes(
            namespace=namespace or None, group=group, resource=resource, subresource=subresource or None, verb=verb,
            name=name or None)))


def delete_if_uid(uid: str | None, propagation_policy: str | None = None) -> Any:
    """Return delete options that delete only the object of this UID (a same-named newer one is left alone)."""
    return client.V1DeleteOptions(propagation_policy=propagation_policy, preconditions=client.V1Preconditions(uid=uid))
