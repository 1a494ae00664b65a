"""The factory behind every research step template (preprocess, pretrain, sft, rl, eval, job).

A research step runs any image on borrowed GPUs under the preemptible contract:
- the command and args arrive as JSON lists and are exec'd by a fixed launcher that an init
  container copies in from the offhours image, so no shell line is ever built from a parameter;
- GPUs, CPU, memory, node selector, tolerations and the grace period reach the pod through
  `podSpecPatch`, since Argo rejects a parameter inside `resources`. The patch is built by an
  Argo expression that serialises each value (`toJson`, `asInt`, `fromJSON`), never by pasting
  parameter text into JSON, so no value can add a key (a ServiceAccount, a host path...);
- the pod runs as the `offhours-research` ServiceAccount (no rights beyond Argo's executor),
  named by the template, and the launcher image is the offhours image fixed at render time;
- the pod runs at the `offhours-best-effort` priority, with an active deadline, and is retried
  only when it was preempted, never when the research code failed.
"""

from hera.workflows import Container, Env, Parameter, RetryPolicy, RetryStrategy
from hera.workflows import models as m

from offhours.scripts.names import LABEL_ROLE, LABEL_STAGE, OFFHOURS_IMAGE, PRIORITY_CLASS, RESEARCH_SERVICE_ACCOUNT
from offhours.scripts.runtime.pod_patch import pod_spec_patch_expression
from offhours.steps.contract import LAUNCHER, LAUNCHER_DIR, PREEMPTION_RETRY_EXPRESSION, RESEARCH_STEP_INPUTS, StepInput

_LAUNCHER_VOLUME = "offhours-launcher"


def _param(name: str) -> str:
    return "{{inputs.parameters." + name + "}}"


def as_parameter(spec: StepInput) -> Parameter:
    """Declare `spec` as a template input; a required input gets no default."""
    if spec.required:
        return Parameter(name=spec.name, description=spec.description)
    return Parameter(name=spec.name, default=spec.default, description=spec.description)


def _inputs(extra: tuple[StepInput, ...]) -> list[Parameter]:
    return [as_parameter(spec) for spec in (*RESEARCH_STEP_INPUTS, *extra)]


def research_step(stage: str, description: str, extra_inputs: tuple[StepInput, ...] = (),
                  image: str = OFFHOURS_IMAGE) -> Container:
    """Build the step template for one kind of research work.

    `stage` names the template and is exported to the job as OFFHOURS_STAGE; `extra_inputs`
    adds inputs of this kind only (e.g. the eval suite), exported as OFFHOURS_<NAME>; `image`
    is the offhours image whose launcher the init container copies in.
    """
    env = [
        Env(name="OFFHOURS_STAGE", value=stage),
        Env(name="OFFHOURS_RUN_ID", value=_param("run-id")),
        Env(name="OFFHOURS_INPUT_URI", value=_param("input-uri")),
        Env(name="OFFHOURS_OUTPUT_URI", value=_param("output-uri")),
        Env(name="OFFHOURS_CHECKPOINT_URI", value=_param("checkpoint-uri")),
    ]
    env += [Env(name="OFFHOURS_" + x.name.upper().replace("-", "_"), value=_param(x.name)) for x in extra_inputs]
    mount = m.VolumeMount(name=_LAUNCHER_VOLUME, mount_path=LAUNCHER_DIR)
    return Container(
        name=stage,
        annotations={"workflows.argoproj.io/description": description},
        labels={LABEL_ROLE: "research", LABEL_STAGE: stage},
        inputs=_inputs(extra_inputs),
        image=_param("image"),
        command=[LAUNCHER],
        args=["--command", _param("command"), "--args", _param("args"), "--env", _param("env")],
        env=env,
        volume_mounts=[mount],
        volumes=[m.Volume(name=_LAUNCHER_VOLUME, empty_dir=m.EmptyDirVolumeSource())],
        init_containers=[
            m.UserContainer(
                name="offhours-launcher",
                image=image,
                command=["offhours-launch", "--install", LAUNCHER],
                volume_mounts=[mount],
            )
        ],
        priority_class_name=PRIORITY_CLASS,
        service_account_name=RESEARCH_SERVICE_ACCOUNT,
        active_deadline_seconds=_param("active-deadline-seconds"),
        pod_spec_patch=pod_spec_patch_expression(),
        retry_strategy=RetryStrategy(
            limit=_param("retry-limit"),
            retry_policy=RetryPolicy.always,
            expression=PREEMPTION_RETRY_EXPRESSION,
            backoff=m.Backoff(duration="30s", factor=m.IntOrString("2"), max_duration="1h"),
        ),
    )
