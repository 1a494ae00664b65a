"""The `offhours-job` WorkflowTemplate: one generic step, for anything that is not an LLM pipeline."""

from hera.workflows import WorkflowTemplate

from offhours.scripts.names import JOB_TEMPLATE, REFERENCE_JOB_IMAGE
from offhours.workflows.compose import Pipeline


def pipeline() -> Pipeline:
    """Describe the single-job workflow with the composition API."""
    p = Pipeline(JOB_TEMPLATE, description="One research job (any image) on borrowed inference GPUs.")
    p.step(
        "job",
        image=p.add_parameter("image", REFERENCE_JOB_IMAGE, "Image of the job (default: the reference preemptible job)."),
        command=p.add_parameter("command", '["python", "/app/train.py"]',
                                "JSON list: the program and its fixed arguments."),
        args=p.add_parameter("args", '["--steps", "20000", "--every", "500"]', "JSON list of further arguments."),
        gpus=p.add_parameter("gpus", "4", "GPUs of the job's pod."),
        cpu=p.add_parameter("cpu", "8", "CPU request of the job's pod."),
        memory=p.add_parameter("memory", "64Gi", "Memory of the job's pod."),
    )
    return p


def workflow_template() -> WorkflowTemplate:
    """Build the `offhours-job` WorkflowTemplate."""
    return pipeline().workflow_template()
