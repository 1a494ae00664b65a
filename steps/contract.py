"""The parameter contract shared by every research step template.

One table is the single source of truth for the inputs a research step declares, their
defaults and their documentation: the step templates, the pipeline templates, the Python
composition API and the README all read it.
"""

from dataclasses import dataclass

from offhours import __version__

STEPS_TEMPLATE = "offhours-steps"
"""Name of the WorkflowTemplate that holds every step template."""

RETURN_GPUS = "return-gpus"
"""Name of the exit template that gives a workflow's borrowed replicas back to the service."""

PRIORITY_CLASS = "offhours-best-effort"
"""PriorityClass of every research pod: below every serving class, never preempting others."""

OFFHOURS_IMAGE = f"ghcr.io/offhours/offhours:{__version__}"
"""Default image of the launcher init container, the exit hook and the gate."""

GATE_SERVICE_ACCOUNT = "offhours-gate"
"""ServiceAccount that the gate and the exit hook run as (its RBAC ships with the gate)."""

LAUNCHER_DIR = "/offhours/bin"
LAUNCHER = f"{LAUNCHER_DIR}/offhours-launch"

PREEMPTED_EXIT_CODE = 75
"""Exit code (EX_TEMPFAIL) of a job that stopped on SIGTERM after checkpointing: resumable."""

LABEL_SERVICE = "offhours.io/service"
LABEL_REPLICAS = "offhours.io/replicas"
LABEL_RUN_ID = "offhours.io/run-id"
LABEL_MANAGED = "offhours.io/managed"
LABEL_ROLE = "offhours.io/role"
LABEL_STAGE = "offhours.io/stage"


@dataclass(frozen=True)
class StepInput:
    """One input parameter of a research step template.

    `default` None means required. `json` names the JSON type a value must decode to
    ("list" or "object"); the composition API encodes Python values of that type.
    """

    name: str
    description: str
    default: str | None = None
    json: str | None = None

    @property
    def required(self) -> bool:
        """Whether the step has no default for this input."""
        return self.default is None


RESEARCH_STEP_INPUTS: tuple[StepInput, ...] = (
    StepInput("image", "Container image of the research code (any image)."),
    StepInput(
        "command",
        "JSON list: the program and its fixed arguments, exec'd by the launcher (never a shell line).",
        json="list",
    ),
    StepInput("args", "JSON list of further arguments appended to command.", "[]", json="list"),
    StepInput("env", 'JSON object of environment variables, e.g. {"WANDB_MODE": "offline"}.', "{}", json="object"),
    StepInput("gpus", "nvidia.com/gpu count of the pod (patched in through podSpecPatch).", "1"),
    StepInput("cpu", "CPU request.", "4"),
    StepInput("memory", "Memory request and limit.", "16Gi"),
    StepInput("node-selector", "JSON object: node selector of the inference GPU pool.", "{}", json="object"),
    StepInput("tolerations", "JSON list: tolerations of the inference GPU pool's taints.", "[]", json="list"),
    StepInput("input-uri", "Where the step reads its input (s3://, gs://, file://); may be empty.", ""),
    StepInput("output-uri", "Where the step writes its result (s3://, gs://, file://)."),
    StepInput("checkpoint-uri", "Where the step writes and finds its checkpoints (s3://, gs://, file://)."),
    StepInput("run-id", "Stable id of the run: a restarted or re-parked job resumes the checkpoints under it."),
    StepInput(
        "termination-grace-seconds",
        "Seconds between SIGTERM and SIGKILL: time to finish the step and write a checkpoint.",
        "120",
    ),
    StepInput("active-deadline-seconds", "Hard bound on one attempt's run time on the GPUs.", "43200"),
    StepInput("retry-limit", "Retries after preemption (evicted, pod deleted, node shutdown, exit 75).", "5"),
    StepInput("launcher-image", "Image that carries the offhours launcher (copied in by an init container).",
              OFFHOURS_IMAGE),
)
"""The inputs every research step declares, in order."""

RESEARCH_INPUT_NAMES = frozenset(i.name for i in RESEARCH_STEP_INPUTS)

RETURN_GPUS_INPUTS: tuple[StepInput, ...] = (
    StepInput("workflow-name", "Name of the workflow that ended."),
    StepInput("status", "Status of that workflow: Succeeded, Failed or Error."),
    StepInput("failures", "JSON list of the workflow's failed nodes, as Argo reports them.", "[]"),
    StepInput("service", "The inference service the workflow borrowed from."),
    StepInput("replicas", "How many replicas it borrowed."),
    StepInput("offhours-image", "Image that runs the exit hook.", OFFHOURS_IMAGE),
)
"""The inputs of the `return-gpus` exit template."""

# A stop for reclaim, an eviction, a deleted pod or a node shutdown is Argo phase "Error" or a
# SIGTERM exit; a real failure of the research code is "Failed" with its own exit code. Only the
# first kind is retried. 137 (SIGKILL) is left out: it is also what the OOM killer gives.
PREEMPTION_RETRY_EXPRESSION = (
    'lastRetry.status == "Error"'
    f' || lastRetry.exitCode == "{PREEMPTED_EXIT_CODE}"'
    ' || lastRetry.exitCode == "143"'
    " || lastRetry.message matches '(?i)evict|preempt|pod deleted|node shutdown'"
)
