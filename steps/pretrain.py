"""The `pretrain` step: (continued) pre-training on the preprocessed corpus."""

from hera.workflows import Container

from offhours.scripts.names import OFFHOURS_IMAGE
from offhours.steps.research_step import research_step

DESCRIPTION = "Pre-train (or continue pre-training) a model on input-uri; checkpoints under checkpoint-uri."


def template(image: str = OFFHOURS_IMAGE) -> Container:
    """Build the `pretrain` step template."""
    return research_step("pretrain", DESCRIPTION, image=image)
