"""The `return-gpus` exit template: mark a finished workflow so the gate gives its replicas back.

Every offhours workflow calls it through `hooks.exit` (a `templateRef`, since `spec.onExit`
can only name a template of the same workflow). Its program, `offhours return-gpus`, marks its
own workflow (returned-at, GPU-seconds, state returned); the gate, watching workflows, scales
serving back within seconds. It takes no input: the workflow it marks, its namespace and status
are Argo's own variables, so a caller cannot point it at another workflow. Its image and its
ServiceAccount (`offhours-exit-hook`: workflows get/patch in the research namespace, nothing on
serving) are fixed when the templates are rendered, never by a workflow parameter. It borrows
nothing itself: normal priority, no GPU, retried on any error.
"""

from hera.workflows import Container, RetryPolicy, RetryStrategy
from hera.workflows import models as m

from offhours.scripts.names import EXIT_HOOK_SERVICE_ACCOUNT, LABEL_ROLE, OFFHOURS_IMAGE, RETURN_GPUS

DESCRIPTION = "Exit hook: mark the workflow returned and record its GPU-seconds; the gate gives the replicas back."

PROGRAM = ["offhours", "return-gpus"]
ARGS = ["--namespace", "{{workflow.namespace}}", "--workflow", "{{workflow.name}}", "--status", "{{workflow.status}}"]


def template(image: str = OFFHOURS_IMAGE) -> Container:
    """Build the `return-gpus` exit template, running `image`."""
    return Container(
        name=RETURN_GPUS,
        annotations={"workflows.argoproj.io/description": DESCRIPTION},
        labels={LABEL_ROLE: "exit-hook"},
        image=image,
        command=PROGRAM,
        args=ARGS,
        service_account_name=EXIT_HOOK_SERVICE_ACCOUNT,
        resources=m.ResourceRequirements(
            requests={"cpu": m.Quantity("50m"), "memory": m.Quantity("128Mi")},
            limits={"memory": m.Quantity("256Mi")},
        ),
        retry_strategy=RetryStrategy(
            limit=5,
            retry_policy=RetryPolicy.always,
            backoff=m.Backoff(duration="5s", factor=m.IntOrString("2"), max_duration="5m"),
        ),
    )
