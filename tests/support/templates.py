"""The library's WorkflowTemplates, as an install renders them, for the in-memory cluster of a test.

The gate follows a workflow's `workflowTemplateRef` (and every `templateRef`) to the grace of the pods it
runs, and does not admit a workflow whose template is missing: a world whose workflows run `offhours-job`
needs that template installed, as on a cluster.
"""

import copy
from functools import lru_cache
from typing import Any

from offhours.scripts.cluster.memory import MemoryCluster


@lru_cache(maxsize=1)
def library_templates() -> tuple[dict[str, Any], ...]:
    """Return the WorkflowTemplates `offhours render` writes (steps, pipeline, job), rendered once per process."""
    from offhours.workflows.render import manifests

    return tuple(m for m in manifests().values() if m.get("kind") == "WorkflowTemplate")


def install_library_templates(cluster: MemoryCluster, namespace: str = "research") -> MemoryCluster:
    """Add the library's WorkflowTemplates to `cluster` in `namespace` (a copy each: a test may edit its own)."""
    for template in library_templates():
        cluster.templates[(namespace, template["metadata"]["name"])] = copy.deepcopy(template)
    return cluster


def with_offhours_parts(template: dict[str, Any]) -> dict[str, Any]:
    """Return `template` with the parts offhours needs of any template it builds a job from (template_needs.py).

    The exit hook and the managed label are added as the library's templates have them, and `replicas` (default
    1) when it declares none; what a test sets itself (its parameters, templates, grace) is left as it is.
    """
    out = copy.deepcopy(template)
    spec = out.setdefault("spec", {})
    local = [t["name"] for t in spec.get("templates") or [] if isinstance(t, dict) and t.get("name")]
    # A hook of its own (the first template) when it has one: a reference elsewhere would change what its grace is.
    spec.setdefault("hooks", {"exit": {"template": local[0]} if local else
                              {"templateRef": {"name": "offhours-steps", "template": "return-gpus"}}})
    spec.setdefault("workflowMetadata", {}).setdefault("labels", {})["offhours.io/managed"] = "true"
    params = spec.setdefault("arguments", {}).setdefault("parameters", [])
    if not any(p.get("name") == "replicas" for p in params):
        params.append({"name": "replicas", "value": "1"})
    return out
