"""The `check-parameters` step: check every workflow parameter before any GPU is used.

Every composed pipeline runs it first, and every research step waits for it, so a workflow
submitted with a bad value (`argo submit --from ... -p sft-gpus=abc`) fails at once with one line
naming the parameter, instead of failing late on GPUs or being retried as a preemption. It runs
`offhours check-parameters` from the offhours image (fixed at render time) with no GPU, as the
`offhours-research` ServiceAccount, and is never retried: a bad value stays bad. The schema (each
parameter's kind) is a literal of the calling template; the values come serialised by `toJson`.
Its values passed, it keeps the run's provenance record in the run's checkpoint store
(`offhours.scripts.runtime.provenance_store`): the workflow's annotations reach it as a value
(`{{workflow.annotations.json}}`), so the pod reads no workflow and needs no right to.
"""

from hera.workflows import Container, Env
from hera.workflows import models as m

from offhours.scripts.names import CHECK_PARAMETERS, LABEL_ROLE, OFFHOURS_IMAGE, PRIORITY_CLASS, RESEARCH_SERVICE_ACCOUNT
from offhours.scripts.runtime.provenance_store import ANNOTATIONS_ENV
from offhours.steps.contract import CHECK_PARAMETERS_INPUTS
from offhours.steps.research_step import as_parameter

DESCRIPTION = "Check every workflow parameter against its kind; fail the workflow at once naming a bad one."


def template(image: str = OFFHOURS_IMAGE) -> Container:
    """Build the `check-parameters` step template, running `image`."""
    return Container(
        name=CHECK_PARAMETERS,
        annotations={"workflows.argoproj.io/description": DESCRIPTION},
        labels={LABEL_ROLE: CHECK_PARAMETERS},
        inputs=[as_parameter(spec) for spec in CHECK_PARAMETERS_INPUTS],
        image=image,
        command=["offhours", "check-parameters"],
        args=["--schema", "{{inputs.parameters.schema}}", "--values", "{{inputs.parameters.values}}"],
        env=[Env(name=ANNOTATIONS_ENV, value="{{workflow.annotations.json}}")],
        # The one line naming the bad parameter becomes the container's termination message,
        # which Argo shows as the node's (and the failed workflow's) message.
        termination_message_policy="FallbackToLogsOnError",
        service_account_name=RESEARCH_SERVICE_ACCOUNT,
        priority_class_name=PRIORITY_CLASS,
        active_deadline_seconds=300,
        resources=m.ResourceRequirements(
            requests={"cpu": m.Quantity("50m"), "memory": m.Quantity("128Mi")},
            limits={"memory": m.Quantity("256Mi")},
        ),
    )
