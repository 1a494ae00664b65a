"""`offhours check` compares each installed boundary object with the rendered one, field by rendered field."""

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from offhours.cronworkflows.admission import admission_manifests
from offhours.scripts.cli.check_boundary import difference
from offhours.workflows.render import example_gate_config

RENDERED = [d["spec"] for d in admission_manifests(example_gate_config()).values()]


def leaves(value: Any, path: str = "spec") -> list[tuple[str, tuple[Any, ...]]]:
    """Every leaf of a spec: its path and the keys/indices that reach it."""
    if isinstance(value, dict):
        return [(p, (k, *ks)) for k, v in value.items() for p, ks in leaves(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [(p, (i, *ks)) for i, v in enumerate(value) for p, ks in leaves(v, f"{path}[{i}]")]
    return [(path, ())]


def with_server_defaults(spec: Any) -> Any:
    """What the API server adds: fields render does not write (matchPolicy, empty selectors, a rule's scope)."""
    out = copy.deepcopy(spec)
    out.setdefault("matchConstraints", {}).update({"matchPolicy": "Equivalent", "objectSelector": {}})
    for rule in out.get("matchConstraints", {}).get("resourceRules", []):
        rule["scope"] = "*"
    return out


@given(st.sampled_from(range(len(RENDERED))), st.data())
def test_installed_as_rendered_holds_and_any_changed_field_is_named(index: int, data: st.DataObject) -> None:
    """Invariant: server defaults never make a difference; changing any one rendered leaf is found at its path."""
    spec = RENDERED[index]
    installed = with_server_defaults(spec)
    assert difference(spec, installed) is None
    path, keys = data.draw(st.sampled_from(leaves(spec)))
    target = installed
    for key in keys[:-1]:
        target = target[key]
    if keys:
        target[keys[-1]] = f"{target[keys[-1]]}-changed"
    assert difference(spec, installed) == path


def test_a_missing_field_and_an_extra_list_item_are_differences() -> None:
    spec = RENDERED[0]
    installed = with_server_defaults(spec)
    installed["validations"].append({"expression": "true"})
    assert difference(spec, installed) == "spec.validations"
    del installed["validations"]
    assert difference(spec, installed) == "spec.validations"


def test_a_quota_kube_controller_manager_has_not_counted_is_named_by_its_resources() -> None:
    from offhours.scripts.cli.check_boundary import _uncounted

    quota = next(d for d in admission_manifests(example_gate_config()).values() if d["kind"] == "ResourceQuota")
    (resource,) = quota["spec"]["hard"]
    assert _uncounted(quota, {"spec": quota["spec"]}) == resource  # synced without usage, or never synced
    assert _uncounted(quota, {"spec": quota["spec"], "status": {"hard": quota["spec"]["hard"], "used": {}}}) == resource
    assert _uncounted(quota, {"spec": quota["spec"], "status": {"used": {resource: "3"}}}) == ""
    policy = next(d for d in admission_manifests(example_gate_config()).values()
                  if d["kind"] == "ValidatingAdmissionPolicy")
    assert _uncounted(policy, policy) == ""
