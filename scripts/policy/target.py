"""Which object holds a service's replicas: a reference as HPA and KEDA spell it (`scaleTargetRef`).

Any kind with a scale subresource: Deployments, StatefulSets, LeaderWorkerSets, Argo Rollouts, an
operator's CRD. The gate never reads or writes the object itself, only its `/scale`, so no kind needs
code of its own. One text form (`text`, `parse_target_text`) is what a service record keeps, so the
backstop, which reads no gate configuration, restores the same object: a Deployment's bare name (as
records written before other kinds were possible hold it), else `<apiVersion>/<Kind>/<name>`.
"""

import re
from dataclasses import dataclass

DEPLOYMENT_API_VERSION = "apps/v1"
DEPLOYMENT_KIND = "Deployment"

_KIND = re.compile(r"^[A-Z][A-Za-z0-9]{0,62}\Z")
_API_VERSION = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?v[0-9]+[a-z0-9]*\Z")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\Z")


@dataclass(frozen=True)
class ScaleTargetRef:
    """The object whose `/scale` holds a service's replicas."""

    api_version: str
    kind: str
    name: str

    @property
    def group(self) -> str:
        """The API group ("" for the core group)."""
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        """The API version within the group."""
        return self.api_version.rpartition("/")[2]

    @property
    def is_deployment(self) -> bool:
        """Whether it is an apps/v1 Deployment (the kind `deployment:` names)."""
        return (self.api_version, self.kind) == (DEPLOYMENT_API_VERSION, DEPLOYMENT_KIND)

    @property
    def text(self) -> str:
        """The reference as a record keeps it (`parse_target_text` reads it back)."""
        return self.name if self.is_deployment else f"{self.api_version}/{self.kind}/{self.name}"

    def __str__(self) -> str:
        return f"{self.kind} {self.name} ({self.api_version})"


def target_problem(api_version: object, kind: object, name: object) -> str | None:
    """Return what is wrong with a reference's fields (naming the field), or None."""
    if not isinstance(api_version, str) or not _API_VERSION.match(api_version):
        return f"apiVersion: {api_version!r} is not an API version (group/version, or v1 for the core group)"
    if not isinstance(kind, str) or not _KIND.match(kind):
        return f"kind: {kind!r} is not a kind (a CamelCase name such as StatefulSet)"
    if not isinstance(name, str) or not _NAME.match(name):
        return f"name: {name!r} is not an object name (lowercase letters, digits, '-' and '.')"
    return None


def parse_target_text(text: str) -> ScaleTargetRef:
    """Read a reference's text: a bare name is a Deployment's; else `<apiVersion>/<Kind>/<name>`.

    ValueError names what is wrong.
    """
    parts = text.split("/")
    if len(parts) == 1:
        ref = ScaleTargetRef(DEPLOYMENT_API_VERSION, DEPLOYMENT_KIND, text)
    elif len(parts) in (3, 4):
        ref = ScaleTargetRef("/".join(parts[:-2]), parts[-2], parts[-1])
    else:
        raise ValueError(f"scale target {text!r}: neither a Deployment's name nor <apiVersion>/<Kind>/<name>")
    problem = target_problem(ref.api_version, ref.kind, ref.name)
    if problem:
        raise ValueError(f"scale target {text!r}: {problem}")
    return ref


def guessed_resource(kind: str) -> str:
    """Return the resource (plural) of `kind` by Kubernetes' naming convention, for RBAC rendered without a cluster.

    The API server's discovery is the truth (`offhours check` compares the two); a CRD that names its plural
    otherwise gets rights under the wrong name, which `check` reports.
    """
    lower = kind.lower()
    if lower.endswith(("s", "x", "z", "ch", "sh")):
        return lower + "es"
    if lower.endswith("y") and len(lower) > 1 and lower[-2] not in "aeiou":
        return lower[:-1] + "ies"
    return lower + "s"


def target_rules(refs: "list[ScaleTargetRef]", object_verbs: list[str], scale_verbs: list[str]) -> list[dict[str, object]]:
    """Return RBAC rules over the targets' kinds: read the objects, write only their `/scale`.

    `object_verbs` on each kind's resource (metadata: uid, owners, marks), `scale_verbs` on its `/scale` for the
    configured names only. Never a write of the object itself: that would let the holder rewrite a pod template.
    """
    by_resource: dict[tuple[str, str], set[str]] = {}
    for ref in refs:
        by_resource.setdefault((ref.group, guessed_resource(ref.kind)), set()).add(ref.name)
    rules: list[dict[str, object]] = []
    for (group, resource), names in sorted(by_resource.items()):
        rules.append({"apiGroups": [group], "resources": [resource], "verbs": list(object_verbs)})
        rules.append({"apiGroups": [group], "resources": [f"{resource}/scale"], "resourceNames": sorted(names),
                      "verbs": list(scale_verbs)})
    return rules
