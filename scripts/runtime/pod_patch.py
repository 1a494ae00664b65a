"""The `podSpecPatch` of every research step: built here, and recognised here when the gate reads a template.

A research step's patch is one Argo expression, so its text says nothing readable about the pod's grace
period; what it does say is fixed: the grace is the step's `termination-grace-seconds` input, made a number
by `asInt`. The gate reads a patch that is exactly this text as that input (`grace_input`), and any other
expression as unknown. One text for both, so a change to the step cannot leave the gate reading an old one.
"""

from offhours.scripts.names import GRACE_PARAMETER


def _expr_param(name: str) -> str:
    return f"inputs.parameters['{name}']"


def pod_spec_patch_expression() -> str:
    """Return the `podSpecPatch` of a research step: one Argo expression that serialises every value.

    `asInt` makes the grace period a number (or fails), `fromJSON` decodes the node selector and
    tolerations into values, and quantities stay JSON strings: whatever a parameter holds, the
    patch has exactly these keys. Written with single quotes and no two adjacent braces, since
    Argo reads the expression out of a JSON string and a `}}` would end the tag.
    """
    gpus, cpu, memory = (_expr_param(n) for n in ("gpus", "cpu", "memory"))
    resources = (f"{{'requests': {{'cpu': {cpu}, 'memory': {memory}, 'nvidia.com/gpu': {gpus}}} , "
                 f"'limits': {{'memory': {memory}, 'nvidia.com/gpu': {gpus}}} }}")
    patch = (
        "{"
        f"'terminationGracePeriodSeconds': asInt({_expr_param(GRACE_PARAMETER)}), "
        f"'nodeSelector': fromJSON({_expr_param('node-selector')}), "
        f"'tolerations': fromJSON({_expr_param('tolerations')}), "
        f"'containers': [{{'name': 'main', 'resources': {resources} }}]"
        "}"
    )
    assert "{{" not in patch and "}}" not in patch and '"' not in patch
    return "{{=toJson(" + patch + ")}}"


RESEARCH_POD_SPEC_PATCH = pod_spec_patch_expression()


def grace_input(patch: str) -> str | None:
    """Return the input a pod-spec patch takes the pod's grace from: the research step's patch, its grace input.

    None for any other text (its grace, if any, is read from the patch itself, or is unknown).
    """
    return GRACE_PARAMETER if patch == RESEARCH_POD_SPEC_PATCH else None
