"""The `sft` step: supervised fine-tuning."""

from hera.workflows import Container

from offhours.scripts.names import OFFHOURS_IMAGE
from offhours.steps.research_step import research_step

DESCRIPTION = "Supervised fine-tuning of the model at input-uri; the tuned model goes to output-uri."


def template(image: str = OFFHOURS_IMAGE) -> Container:
    """Build the `sft` step template."""
    return research_step("sft", DESCRIPTION, image=image)
