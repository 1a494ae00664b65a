"""The `return-gpus` exit template: give a finished workflow's replicas back to its service.

Every offhours workflow calls it through `hooks.exit` (a `templateRef`, since `spec.onExit`
can only name a template of the same workflow). Its program, `offhours return-gpus`,
recomputes the service's target from the Kubernetes objects, so it is idempotent and safe to
race with the gate. It borrows nothing itself: normal priority, no GPU, retried on any error.
"""

from hera.workflows import Container, FieldEnv, RetryPolicy, RetryStrategy
from hera.workflows import models as m

from offhours.steps.contract import GATE_SERVICE_ACCOUNT, RETURN_GPUS, RETURN_GPUS_INPUTS
from offhours.steps.research import as_parameter

CONFIG_DIR = "/etc/offhours"
DESCRIPTION = "Exit hook: give the workflow's borrowed replicas back to the service and record its GPU-seconds."


def template() -> Container:
    """Build the `return-gpus` exit template."""
    flags: list[str] = []
    for spec in RETURN_GPUS_INPUTS:
        if spec.name != "offhours-image":
            flags += [f"--{spec.name}", "{{inputs.parameters." + spec.name + "}}"]
    flags += ["--config", f"{CONFIG_DIR}/gate.yaml"]
    return Container(
        name=RETURN_GPUS,
        annotations={"workflows.argoproj.io/description": DESCRIPTION},
        labels={"offhours.io/role": "exit-hook"},
        inputs=[as_parameter(spec) for spec in RETURN_GPUS_INPUTS],
        image="{{inputs.parameters.offhours-image}}",
        command=["offhours", "return-gpus"],
        args=flags,
        env=[FieldEnv(name="OFFHOURS_NAMESPACE", field_path="metadata.namespace")],
        # The gate's configuration names the serving namespace; optional, so a missing ConfigMap
        # falls back to the workflow's own namespace instead of blocking the hook.
        volume_mounts=[m.VolumeMount(name="gate-config", mount_path=CONFIG_DIR, read_only=True)],
        volumes=[m.Volume(name="gate-config", config_map=m.ConfigMapVolumeSource(name="offhours-gate-config",
                                                                                 optional=True))],
        service_account_name=GATE_SERVICE_ACCOUNT,
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
