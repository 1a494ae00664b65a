"""research.requireImageDigests: the gate admits no job whose pods could pull a mutable tag, wherever the workflow
names the image: an image argument (also one written as an expression of another argument), or a container of one
of its own templates (inline ones included), which may only name an image by digest or be exactly an image argument."""

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from offhours.scripts.policy.boundary import unpinned_image_problem
from offhours.scripts.policy.config import ResearchBoundary

STRICT = ResearchBoundary(require_image_digests=True)
PINNED = "reg.example/train@sha256:" + "a" * 64
TAGS = st.sampled_from(["reg.example/train:latest", "reg.example/train", "train:v1"])


def _spec(image_arg: str, container_image: str, where: str) -> dict[str, Any]:
    container = {"name": "c", "image": container_image}
    template: dict[str, Any] = {"name": "main"}
    if where == "container":
        template["container"] = container
    elif where == "script":
        template["script"] = {**container, "source": "true"}
    elif where == "initContainers":
        template.update(container={"image": PINNED}, initContainers=[container])
    elif where == "sidecars":
        template.update(container={"image": PINNED}, sidecars=[container])
    elif where == "containerSet":
        template["containerSet"] = {"containers": [container]}
    else:  # inline
        template["steps"] = [[{"name": "s", "inline": {"container": container}}]]
    return {"arguments": {"parameters": [{"name": "image", "value": image_arg}, {"name": "base", "value": PINNED}]},
            "templates": [template]}


WHERE = st.sampled_from(["container", "script", "initContainers", "sidecars", "containerSet", "inline"])


@given(TAGS, WHERE)
def test_a_tag_in_one_of_the_workflows_own_containers_is_refused(tag: str, where: str) -> None:
    assert unpinned_image_problem(_spec(PINNED, tag, where), STRICT) is not None


@given(WHERE)
def test_images_by_digest_or_by_argument_pass(where: str) -> None:
    assert unpinned_image_problem(_spec(PINNED, PINNED, where), STRICT) is None
    assert unpinned_image_problem(_spec(PINNED, "{{workflow.parameters.image}}", where), STRICT) is None
    assert unpinned_image_problem(_spec(PINNED, "{{ workflow.parameters.image }}", where), STRICT) is None


@given(WHERE)
def test_a_container_image_from_anything_but_an_image_argument_is_refused(where: str) -> None:
    # a step's own arguments (inputs.parameters) or a non-image argument are not judged as images are
    for expression in ("{{inputs.parameters.image}}", "{{workflow.parameters.base}}", "reg/{{workflow.parameters.image}}"):
        assert unpinned_image_problem(_spec(PINNED, expression, where), STRICT) is not None, expression


def test_an_image_argument_written_as_an_expression_is_refused() -> None:
    spec = _spec("{{workflow.parameters.tagged}}", PINNED, "container")
    spec["arguments"]["parameters"].append({"name": "tagged", "value": "reg.example/train:latest"})
    assert unpinned_image_problem(spec, STRICT) is not None


def test_a_tag_in_template_defaults_is_refused_and_a_container_without_an_image_takes_its() -> None:
    spec = {"templateDefaults": {"container": {"image": "reg.example/train:latest"}},
            "templates": [{"name": "main", "container": {"command": ["true"]}}]}
    assert unpinned_image_problem(spec, STRICT) is not None
    spec["templateDefaults"]["container"]["image"] = PINNED
    assert unpinned_image_problem(spec, STRICT) is None
