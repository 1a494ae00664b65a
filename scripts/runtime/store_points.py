"""The points of a store's writes where a crash harness may stop the writer (tests only set the hook).

Each backend calls `reached(label)` before and after every call that changes storage (a write, an
fsync, a link, a rename, a delete, a PUT): tests/integration/test_checkpoint_crash.py kills the
writing process with SIGKILL at each one in turn. Nothing in production sets `hook`.
"""

from collections.abc import Callable

hook: Callable[[str], None] | None = None


def reached(label: str) -> None:
    """Mark a point between two storage changes."""
    if hook is not None:
        hook(label)
