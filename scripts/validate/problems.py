"""A problem found in a manifest, and how paths into a manifest are written."""

from collections.abc import Sequence
from dataclasses import dataclass, field


def json_path(parts: Sequence[str | int]) -> str:
    """Write a path into a document as `spec.templates[2].container.image`."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out or "."


ERROR, WARNING = "error", "warning"


@dataclass(frozen=True, order=True)
class Problem:
    """One problem: the file, the document's index in it (from 0), where, and what is wrong.

    `severity`: error (Argo or the API server would refuse it, or the run must fail) or warning
    (a likely mistake that Argo accepts; `offhours validate --strict` fails on it too). `unreadable`:
    the file itself could not be read (missing, empty, another encoding, binary, enormous).
    """

    file: str
    document: int
    path: str
    message: str
    severity: str = ERROR
    unreadable: bool = field(default=False, compare=False)  # the file could not be read as text at all

    def __str__(self) -> str:
        tag = "warning: " if self.severity == WARNING else ""
        return f"{self.file}: document {self.document}: {self.path}: {tag}{self.message}"
