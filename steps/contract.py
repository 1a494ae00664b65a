"""The parameter contract shared by every research step template.

One table is the single source of truth for the inputs a research step declares, their
defaults and their documentation: the step templates, the pipeline templates, the Python
composition API and the README all read it.
"""

from dataclasses import dataclass

from offhours.scripts.runtime.exit_codes import PREEMPTED_EXIT_CODE

LAUNCHER_DIR = "/offhours/bin"
LAUNCHER = f"{LAUNCHER_DIR}/offhours-launch"





@dataclass(frozen=True)
class StepInput:
    """One input parameter of a research step template.

    `default` None means required. `kind` names what a value must be (a kind of
    `offhours.scripts.runtime.parameters.KINDS`); None means not decided yet (a pipeline parameter
    takes the kind of the step input it feeds, else "text").
    """

    name: str
    description: str
    default: str | None = None
    kind: str | None = None

    @property
    def required(self) -> bool:
        """Whether the step has no default for this input."""
        return self.default is None

    @property
    def json(self) -> str | None:
        """The JSON type a value decodes to ("list" or "object"), or None for a plain string."""
        return _JSON_KINDS.get(self.kind or "")


_JSON_KINDS = {"command": "list", "string-list": "list", "object-list": "list", "string-map": "object", "env": "object"}


RESEARCH_STEP_INPUTS: tuple[StepInput, ...] = (
    StepInput("image", "Container image of the research code (any image).", kind="image"),
    StepInput(
        "command",
        "JSON list: the program and its fixed arguments, exec'd by the launcher (never a shell line).",
        kind="command",
    ),
    StepInput("args", "JSON list of further arguments appended to command.", "[]", kind="string-list"),
    StepInput("env", 'JSON object of environment variables, e.g. {"WANDB_MODE": "offline"}; they win over the image\'s.',
              "{}", kind="env"),
    StepInput("gpus", "nvidia.com/gpu count of the pod (patched in through podSpecPatch).", "1", kind="integer"),
    StepInput("cpu", "CPU request.", "4", kind="quantity"),
    StepInput("memory", "Memory request and limit.", "16Gi", kind="quantity"),
    StepInput("node-selector", "JSON object: node selector of the inference GPU pool.", "{}", kind="string-map"),
    StepInput("tolerations", "JSON list: tolerations of the inference GPU pool's taints.", "[]", kind="object-list"),
    StepInput("input-uri", "Where the step reads its input (s3://, gs://, file://); may be empty.", "",
              kind="optional-uri"),
    StepInput("output-uri", "Where the step writes its result (s3://, gs://, file://).", kind="uri"),
    StepInput("checkpoint-uri", "Where the step writes and finds its checkpoints (an S3 or file URI).",
              kind="checkpoint-uri"),
    StepInput("run-id", "Stable id of the run: a restarted or re-parked job resumes the checkpoints under it.",
              kind="run-id"),
    StepInput(
        "termination-grace-seconds",
        "Seconds between SIGTERM and SIGKILL: time to finish the step and write a checkpoint.",
        "120",
        kind="integer",
    ),
    StepInput("active-deadline-seconds", "Hard bound on one attempt's run time on the GPUs.", "43200",
              kind="positive-integer"),
    StepInput("retry-limit", "Retries after preemption (evicted, pod deleted, node shutdown, exit 75).", "5",
              kind="integer"),
)
"""The inputs every research step declares, in order."""

RESEARCH_INPUT_NAMES = frozenset(i.name for i in RESEARCH_STEP_INPUTS)

CHECK_PARAMETERS_INPUTS: tuple[StepInput, ...] = (
    StepInput("schema", "JSON object: each workflow parameter and its kind (fixed by the calling template)."),
    StepInput("values", "JSON object: each workflow parameter and its value."),
)
"""The inputs of the `check-parameters` step."""

# A stop for reclaim, an eviction, a deleted pod or a node shutdown is Argo phase "Error" or a
# SIGTERM exit; a real failure of the research code is "Failed" with its own exit code. Only the
# first kind is retried. 137 (SIGKILL) is left out: it is also what the OOM killer gives. An
# "Error" that comes from a bad value (the pod-spec patch or the pod itself refused) is no
# preemption: retrying it would only wait for the same refusal.
PREEMPTION_RETRY_EXPRESSION = (
    '(lastRetry.status == "Error"'
    " && !(lastRetry.message matches '(?i)podspecpatch|failed to evaluate|is invalid|is forbidden|quantities must match'))"
    f' || lastRetry.exitCode == "{PREEMPTED_EXIT_CODE}"'
    ' || lastRetry.exitCode == "143"'
    " || lastRetry.message matches '(?i)evict|preempt|pod deleted|node shutdown'"
)
