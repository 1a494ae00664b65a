"""What a figure made without part of its inputs says: the one wording of `report`, `usage` and the console's estimate.

A figure made without an input it needs (a Deployment the caller may not read, a workflow that could not be
counted, days of history that are not there, a queue the caller may not list) is not the figure. When every
missing input can only make the true figure larger, the figures are "at least" what is shown; otherwise they are
partial and may be off either way. Either way the note names each missing input and why; no note, no gap.
"""

from collections.abc import Sequence
from dataclasses import dataclass

AT_LEAST = "note: at least these figures: "
PARTIAL = "note: partial figures, made without part of their inputs: "


@dataclass(frozen=True)
class Missing:
    """One input a figure was made without: why it is missing, and whether the figure is then a lower bound."""

    why: str
    lower_bound: bool = True


def partial_note(missing: Sequence[Missing]) -> str | None:
    """Return the line under figures made without part of their inputs; None when nothing was missing."""
    if not missing:
        return None
    reasons = "; ".join(m.why for m in missing)
    return (AT_LEAST if all(m.lower_bound for m in missing) else PARTIAL) + reasons
