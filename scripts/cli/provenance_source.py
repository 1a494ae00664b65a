"""Where `why` and `rerun` read a run's provenance: its workflows' records, else its checkpoint store's copy.

The store's copy (`offhours.scripts.runtime.provenance_store`) is read only when no workflow of the run still
carries a record (deleted, or made by something other than `offhours submit` and the gate), at the place the
gate reads the run's progress (`<checkpoint-uri>/<run-id>`, the newest copy's), with the caller's own store
credentials and the bound of `why`'s progress read. Whatever is read is decoded as the run's, by the one decoder.
"""

import os
from collections.abc import Sequence

from offhours.scripts.pool.model import RunView

STORE_READ_SECONDS = 5.0  # as `why`'s progress read


def workflow_records(run: RunView) -> list[tuple[str, str | None]]:
    """Return each workflow of `run` (oldest first) with its provenance annotation (None: it carries none)."""
    return [(c.name, c.provenance) for c in run.copies]


def store_text(run: RunView) -> tuple[str | None, str | None]:
    """Return the store's record of `run` (text, or None) and why it could not be read (None when it could)."""
    from offhours.scripts.runtime.checkpoint import CheckpointError
    from offhours.scripts.runtime.provenance_store import stored_text

    prefix = run.current.checkpoint_prefix
    if not prefix or not prefix.startswith(("file://", "s3://")):
        return None, None
    try:
        return stored_text(prefix, os.environ.get("OFFHOURS_S3_ENDPOINT_URL"), STORE_READ_SECONDS), None
    except CheckpointError as err:
        return None, str(err).splitlines()[0][:300]
    except Exception as err:  # noqa: BLE001 - credentials or a client library missing is one line, not a trace
        return None, f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"


def texts_for_why(run: RunView) -> tuple[list[str | None], str | None]:
    """Return the records `describe` shows for `run` (oldest first) and a line on a store that could not be read.

    The store's record is put first (the oldest): `describe` shows it only when no workflow's record is readable.
    """
    texts: Sequence[str | None] = [c.provenance for c in run.copies]
    if any(t is not None for t in texts):
        return list(texts), None
    stored, problem = store_text(run)
    return [stored, *texts], (f"provenance: its checkpoint store could not be read ({problem})" if problem else None)
