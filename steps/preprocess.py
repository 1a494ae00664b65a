"""The `preprocess` step: turn raw data into a training set (often CPU only: set gpus to 0)."""

from hera.workflows import Container

from offhours.scripts.names import OFFHOURS_IMAGE
from offhours.steps.research_step import research_step

DESCRIPTION = "Preprocess raw data into a training set at output-uri."


def template(image: str = OFFHOURS_IMAGE) -> Container:
    """Build the `preprocess` step template."""
    return research_step("preprocess", DESCRIPTION, image=image)
