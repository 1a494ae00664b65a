"""The `sft` step: supervised fine-tuning."""

from hera.workflows import Container

from offhours.steps.research import research_step

DESCRIPTION = "Supervised fine-tuning of the model at input-uri; the tuned model goes to output-uri."


def template() -> Container:
    """Build the `sft` step template."""
    return research_step("sft", DESCRIPTION)
