"""The `rl` step: reinforcement learning (RLHF, GRPO, ...) on the fine-tuned model."""

from hera.workflows import Container

from offhours.scripts.names import OFFHOURS_IMAGE
from offhours.steps.research_step import research_step

DESCRIPTION = "Reinforcement learning on the model at input-uri; the policy goes to output-uri."


def template(image: str = OFFHOURS_IMAGE) -> Container:
    """Build the `rl` step template."""
    return research_step("rl", DESCRIPTION, image=image)
