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
