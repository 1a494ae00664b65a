"""Image references by digest or by tag (pure): what a resumed copy can be trusted to run again.

A tag (`:latest`, `:v1`, none at all) is mutable: the registry may point it at other code between a
job's stop and its resumed copy's start. A reference that names a sha256 digest is not.
"""

import re

_REF_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}\Z", re.ASCII)


def is_image_parameter(name: str, kind: str | None) -> bool:
    """Whether a parameter names an image: its kind says so, or (no kind known) its name does."""
    return kind == "image" if kind else name == "image" or name.endswith("-image")


def by_digest(ref: str) -> bool:
    """Whether an image reference is immutable: it names a sha256 digest."""
    return bool(_REF_DIGEST.search(ref))


def mutable_tag_warning(parameter: str, ref: str) -> str | None:
    """Return the warning for an image a resumed copy could run other code of (a tag, `:latest` or none); else None."""
    if not ref or "{{" in ref or by_digest(ref):
        return None
    return (f"{parameter}={ref} is a mutable tag: a preempted and resumed job may pull other code under it; "
            "give the image by digest (name@sha256:...)")
