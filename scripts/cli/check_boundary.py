"""`offhours check`'s lines for the tenant boundary: the admission policies, their bindings and the quotas.

Each installed object is compared with what `offhours render` makes of the same gate configuration. The API
server fills in defaults (matchPolicy, empty selectors, a rule's scope), so a rendered field must be there
with the rendered value, and a field render does not write may hold anything: `difference` names the first
rendered field that the installed object lacks or holds otherwise.
"""

from collections.abc import Iterator
from typing import Any, NamedTuple

from offhours.scripts.cluster.handles import ApiError as ApiException
from offhours.scripts.cluster.handles import handles
from offhours.scripts.names import GPU_QUOTA, GPU_RESOURCE
from offhours.scripts.policy.config import GateConfig


class Line(NamedTuple):
    """One line of `check`'s report (check.py's Check takes it as it is)."""

    name: str
    ok: bool
    detail: str
    fix: str = ""


def _absent(err: ApiException) -> bool:
    return err.status == 404


def difference(rendered: Any, installed: Any, path: str = "spec") -> str | None:
    """Return the path of the first rendered value the installed object does not hold (None: it holds them all)."""
    if isinstance(rendered, dict):
        if not isinstance(installed, dict):
            return path
        for key, value in rendered.items():
            found = difference(value, installed.get(key), f"{path}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(rendered, list):
        if not isinstance(installed, list) or len(installed) != len(rendered):
            return path
        for i, (want, have) in enumerate(zip(rendered, installed, strict=True)):
            found = difference(want, have, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    return None if rendered == installed else path


def boundary_checks(api: Any, config: GateConfig, install: str) -> Iterator[Line]:
    """Yield a report line (name, ok, detail, fix) per policy, binding and quota: installed as rendered, else ✗."""
    from offhours.cronworkflows.admission import admission_manifests

    apis = handles(api)
    admission, core = apis.admission, apis.core
    readers = {
        "ValidatingAdmissionPolicy": lambda doc: admission.read_validating_admission_policy(doc["metadata"]["name"]),
        "ValidatingAdmissionPolicyBinding":
            lambda doc: admission.read_validating_admission_policy_binding(doc["metadata"]["name"]),
        "ResourceQuota": lambda doc: core.read_namespaced_resource_quota(doc["metadata"]["name"],
                                                                         doc["metadata"]["namespace"]),
    }
    for doc in admission_manifests(config).values():
        meta = doc["metadata"]
        name = f"{doc['kind']} {meta['namespace'] + '/' if 'namespace' in meta else ''}{meta['name']}"
        try:
            installed = api.sanitize_for_serialization(readers[doc["kind"]](doc))
        except ApiException as err:
            if not _absent(err):
                raise
            yield Line(name, False, "missing: the API server does not enforce this part of the tenant boundary",
                        install)
            continue
        where = difference(doc["spec"], installed.get("spec"))
        uncounted = _uncounted(doc, installed)
        if where is not None:
            yield Line(name, False, f"differs from the rendered one at {where}", install)
        elif uncounted:
            yield Line(name, False, f"not counted yet: kube-controller-manager has no usage of {uncounted}, so the "
                                    "API server refuses every such creation ('status unknown for quota')",
                       "wait: kube-controller-manager counts it at its next full resync (--resource-quota-sync-period, "
                       "5 min by default) once its discovery (every 30 s) has seen Argo's CRDs")
        else:
            yield Line(name, True, "installed as rendered")
    if config.research.gpu_quota:
        yield from _gpu_quota(core, config, install)


def _uncounted(rendered: dict[str, Any], installed: dict[str, Any]) -> str:
    """Return the resources of an installed quota its status has no usage of, comma-separated ('' for none)."""
    if rendered["kind"] != "ResourceQuota":
        return ""
    used = (installed.get("status") or {}).get("used") or {}
    return ", ".join(sorted(k for k in rendered["spec"]["hard"] if k not in used))


def _gpu_quota(core: Any, config: GateConfig, install: str) -> Iterator[Line]:
    ns, key = config.workflow_namespace, f"requests.{GPU_RESOURCE}"
    name = f"ResourceQuota {ns}/{GPU_QUOTA}"
    try:
        quota = core.read_namespaced_resource_quota(GPU_QUOTA, ns)
    except ApiException as err:
        if not _absent(err):
            raise
        # Not part of the install: the gate makes it at its first tick (render cannot know what is lent). Until
        # then nothing is lent either; a gate that ticks and cannot make it says so in its log and its health line.
        yield Line(name, True, "not made yet: the gate creates it at its first tick and keeps it equal to the "
                               "GPUs it has lent (until then research GPU pods are bounded by the gate only)")
        return
    hard = (quota.spec.hard or {}).get(key) if quota.spec is not None else None
    if hard is None:
        yield Line(name, False, f"has no {key}", install)
    else:
        yield Line(name, True, f"{key} {hard} (what the gate has lent)")
