"""The `eval` step: evaluate a model on one suite (the pipeline fans out over a list of suites)."""

from hera.workflows import Container

from offhours.scripts.names import OFFHOURS_IMAGE
from offhours.steps.contract import StepInput
from offhours.steps.research_step import research_step

DESCRIPTION = "Evaluate the model at input-uri on one suite; results go to output-uri."

SUITE = StepInput("suite", "Name of the eval suite, exported to the job as OFFHOURS_SUITE.", "default")


def template(image: str = OFFHOURS_IMAGE) -> Container:
    """Build the `eval` step template."""
    return research_step("eval", DESCRIPTION, extra_inputs=(SUITE,), image=image)
