"""The `offhours-job` WorkflowTemplate: one generic step, for anything that is not an LLM pipeline."""

from hera.workflows import WorkflowTemplate

from offhours.workflows.compose import Pipeline

NAME = "offhours-job"


def pipeline() -> Pipeline:
    """Describe the single-job workflow with the composition API."""
    p = Pipeline(NAME, description="One research job (any image) on borrowed inference GPUs.")
    p.step(
        "job",
        image=p.add_parameter("image", description="Image of the job."),
        command=p.add_parameter("command", description="JSON list: the program and its fixed arguments."),
        args=p.add_parameter("args", "[]", "JSON list of further arguments."),
        gpus=p.add_parameter("gpus", "4", "GPUs of the job's pod."),
        cpu=p.add_parameter("cpu", "8", "CPU request of the job's pod."),
        memory=p.add_parameter("memory", "64Gi", "Memory of the job's pod."),
    )
    return p


def workflow_template() -> WorkflowTemplate:
    """Build the `offhours-job` WorkflowTemplate."""
    return pipeline().workflow_template()
