"""A run's newest progress from its own checkpoint store: what `why` and the console's job page show.

The store is the run's own place (`<checkpoint-uri>/<run-id>`, as the gate reads it), never a label or an
annotation, which anyone who may patch the workflow can write. The read is bounded as the gate's advisory
read is (one deadline for the whole read).
"""

import os
from datetime import datetime, timezone
from typing import NamedTuple

from offhours.scripts.pool.model import RunView

STORE_READ_SECONDS = 5.0  # the whole progress read (the gate's advisory read has the same bound)


class Stored(NamedTuple):
    """What a run's store says of its progress: the newest record found, and why that may not be all."""

    at: datetime | None  # the newest progress record found (None: none)
    problem: str | None = None  # why the store could not be read (then `at` is None)
    cut: str | None = None  # why the read stopped before the store's end: a newer record may be beyond it


def store_progress(run: RunView, timeout: float = STORE_READ_SECONDS) -> Stored | None:
    """Return the newest progress record of the run's checkpoint store and why it could not be read (bounded).

    None when the run names no store the gate reads (no checkpoint-uri, or not file:// or s3://).
    """
    from offhours.scripts.runtime.checkpoint import CheckpointError, latest_progress

    prefix = run.current.checkpoint_prefix
    if not prefix or not prefix.startswith(("file://", "s3://")):
        return None
    try:
        at, cut = latest_progress(prefix, os.environ.get("OFFHOURS_S3_ENDPOINT_URL"), timeout=timeout)
    except CheckpointError as err:
        return Stored(None, str(err).splitlines()[0][:300])
    except Exception as err:  # noqa: BLE001 - advisory: credentials or a client library missing is one line, not a trace
        return Stored(None, f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}")
    return Stored(datetime.fromtimestamp(at, timezone.utc) if at is not None else None, None, cut)


def stored_checkpoint_text(stored: Stored | None) -> str:
    """Return what a page says of the run's last checkpoint: only what its store holds, or why that is unknown."""
    if stored is None:
        return "unknown: the run names no checkpoint store offhours reads (file:// or s3://)"
    at, problem, cut = stored
    if cut is not None:
        if at is None:
            return f"unknown: none found, but its checkpoint store holds {cut}"
        return (f"{at.astimezone(timezone.utc).strftime('%Y-%m-%d %H:%M:%SZ')} or later (its checkpoint store holds "
                f"{cut})")
    if problem is not None:
        return f"unknown: its checkpoint store could not be read ({problem})"
    if at is None:
        return "none in its checkpoint store"
    return f"{at.astimezone(timezone.utc).strftime('%Y-%m-%d %H:%M:%SZ')} (read from its checkpoint store)"
