"""Submit-time refusal: the gate's own admission checks run on a job before it is parked.

A job whose grace period is above its service's maxGraceSeconds (its own podSpecPatch or manifest, or a
WorkflowTemplate's) would wait parked for ever: `submit`, `validate --gate-config` and the console's request form
say so at once, in the gate's words and with its fix, with the same functions the gate calls each tick
(`policy.grace.grace_problem`, `cluster.template_grace`). Here, below the CLI and the console, so both call it.
"""

from collections.abc import Mapping
from typing import Any

from offhours.scripts.cluster.template_grace import template_grace, template_grace_problem
from offhours.scripts.cluster.workflow import workflow_job
from offhours.scripts.names import LABEL_SERVICE
from offhours.scripts.policy.boundary import unpinned_image_problem
from offhours.scripts.policy.config import GateConfig
from offhours.scripts.policy.grace import grace_problem


def never_admitted(body: dict[str, Any], config: GateConfig, templates: Mapping[str, Any] | None) -> str | None:
    """Return why the gate would never admit the workflow `body` (the gate's words and the fix); None if it may."""
    service = str((body.get("metadata", {}).get("labels") or {}).get(LABEL_SERVICE, ""))
    try:
        policy = config.service(service)
    except KeyError:
        return None  # an unknown service is refused (or noted) by submit's own check
    job = workflow_job({**body, "metadata": {"uid": "not-yet-created", **body.get("metadata", {})}}, service)
    if job is None:
        return None
    # Only a definite refusal: a template unreadable from here (or a grace it cannot know yet) is the gate's to judge.
    knowable = templates is not None and template_grace(job.template_spec, templates, {}).unknown is None
    problem = job.problem or unpinned_image_problem(body.get("spec"), config.research) or \
        grace_problem(job, policy.max_grace_seconds, service) or (
        template_grace_problem(job.template_spec, templates, policy.max_grace_seconds, service, {})
        if knowable else None)
    return None if problem is None else f"the gate would never admit it: {problem}"
