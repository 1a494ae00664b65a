"""The generic `job` step: any image, any command, under the preemptible contract."""

from hera.workflows import Container

from offhours.scripts.names import OFFHOURS_IMAGE
from offhours.steps.research_step import research_step

DESCRIPTION = "Run any image's command on borrowed GPUs, preemptible and resumable."


def template(image: str = OFFHOURS_IMAGE) -> Container:
    """Build the generic `job` step template."""
    return research_step("job", DESCRIPTION, image=image)
