"""A problem found in a manifest, and how paths into a manifest are written."""

from collections.abc import Sequence
from dataclasses import dataclass


def json_path(parts: Sequence[str | int]) -> str:
    """Write a path into a document as `spec.templates[2].container.image`."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out or "."


@dataclass(frozen=True, order=True)
class Problem:
    """One problem: the file, the document's index in it (from 0), where, and what is wrong."""

    file: str
    document: int
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: document {self.document}: {self.path}: {self.message}"
