"""A run's provenance record in its own checkpoint store: `<checkpoint-uri>/<run-id>/provenance.json`.

The workflow's annotation (`offhours.io/provenance`) is the record; this is its copy where the run's outputs
live, so `offhours why` and `offhours rerun` can still read it once the run's workflows are deleted. It is
written by the run's own first step (`check-parameters`), from values handed to the pod (the workflow's
annotations as `{{workflow.annotations.json}}`, the store's variables from the run's `env` parameter): the pod
never reads a workflow from the API, so it needs no right it did not have.

Which record the store keeps: the first start's, created exclusively (`link` on files, `If-None-Match: *` on
S3), so a resumed copy never replaces the parameters the run first ran with; a later start adds only the image
digests its record carries (`Provenance.with_digests`: a digest already stored stays). Every read is bounded
(`provenance.MAX_BYTES`, links not followed) and decoded by `provenance.decode` for the run asked about, so a
record copied in from another run is refused, never shown or rerun.
"""

import json
import os
from collections.abc import Mapping, MutableMapping
from typing import Any

from offhours.scripts.runtime.checkpoint import CheckpointError, _backend_for, _location, _policy
from offhours.scripts.runtime.provenance import MAX_BYTES, Provenance, ProvenanceError, decode, encode
from offhours.scripts.runtime.store_policy import ConditionalPutsIgnored, RetryPolicy, StoreFailure
from offhours.scripts.runtime.store_uri import StoreURIError

RECORD = "provenance.json"
ANNOTATIONS_ENV = "OFFHOURS_WORKFLOW_ANNOTATIONS"
"""The step's variable holding its workflow's annotations (JSON, `{{workflow.annotations.json}}`)."""
MAX_ANNOTATIONS_BYTES = 256 * 1024  # what the API server allows all of an object's annotations together
# The variables of the run's `env` parameter that say how to reach its store (credentials, endpoint, timeouts):
# only these are taken into the recording process, as the research step's pod would have them.
STORE_VARIABLES = ("AWS_", "OFFHOURS_S3_", "OFFHOURS_STORE_")


def record_uri(prefix_uri: str) -> str:
    """Return where the record of the run stored at `prefix_uri` (`<checkpoint-uri>/<run-id>`) lies."""
    return f"{prefix_uri.rstrip('/')}/{RECORD}"


def stored_text(prefix_uri: str, endpoint_url: str | None = None, timeout: float = 5.0,
                policy: RetryPolicy | None = None) -> str | None:
    """Return the text at `<prefix_uri>/provenance.json` (`<checkpoint-uri>/<run-id>`), bounded; None when none.

    At most `provenance.MAX_BYTES` (a bigger object is none: never read whole), within `timeout` as a whole.
    What it says is decoded by `provenance.decode`, for the run it is asked as. CheckpointError: unreadable store.
    """
    location = _location(prefix_uri)
    backend = _backend_for(location, endpoint_url, _policy(os.environ, policy).bounded_by(timeout))
    try:
        data = backend.read_small(RECORD, MAX_BYTES)
    except StoreFailure as err:
        raise CheckpointError(f"{prefix_uri}: {err}", retryable=err.transient) from None
    return data.decode("utf-8", errors="replace") if data is not None else None


def stored_record(prefix_uri: str, run: str, endpoint_url: str | None = None, timeout: float = 5.0,
                  policy: RetryPolicy | None = None) -> Provenance | None:
    """Read the record at `<prefix_uri>/provenance.json` as run `run`'s; None when there is none.

    CheckpointError: the store cannot be read; ProvenanceError: what is there is not this run's record
    (oversized, malformed, another run's).
    """
    text = stored_text(prefix_uri, endpoint_url, timeout, policy)
    return decode(text, run) if text is not None else None


def store_record(checkpoint_uri: str, run: str, text: str, endpoint_url: str | None = None,
                 policy: RetryPolicy | None = None) -> str:
    """Keep `text`, run `run`'s record, at `<checkpoint_uri>/<run>/provenance.json`; return what was done, in words.

    The first start creates it; a later one adds the digests its record has that the stored one lacks. A stored
    record that is not this run's (malformed, another run's) is replaced by this one. ProvenanceError: `text` is
    not run `run`'s record; CheckpointError: the store refused or failed.
    """
    record = decode(text, run)
    try:
        location = _location(checkpoint_uri).child(run)
    except StoreURIError as err:
        raise CheckpointError(f"{checkpoint_uri}: with the run id {run!r} appended, it {err}") from None
    backend = _backend_for(location, endpoint_url, _policy(os.environ, policy))
    where = f"{location.uri}/{RECORD}"
    try:
        backend.probe()  # a server that ignores create-only puts would let a copy replace the first record
        if backend.create(RECORD, encode(record).encode(), 0):
            return f"provenance of run {run} recorded at {where}"
        raw = backend.read_small(RECORD, MAX_BYTES)
        try:
            stored = decode(raw.decode("utf-8", errors="replace"), run) if raw is not None else None
        except ProvenanceError as err:
            backend.put(RECORD, encode(record).encode())
            return f"provenance of run {run} recorded at {where}, replacing a record that was not its own ({err})"
        if stored is None:  # removed between the create and the read: this start's record is the one left
            backend.put(RECORD, encode(record).encode())
            return f"provenance of run {run} recorded at {where}"
        merged = stored.with_digests(record.digests)
        if merged == stored:
            return f"provenance of run {run} already recorded at {where} (its first start's, kept)"
        backend.put(RECORD, encode(merged).encode())
        return f"provenance of run {run} at {where}: its first start's record kept, image digests added"
    except ConditionalPutsIgnored as err:
        raise CheckpointError(f"{location.uri}: {err}") from None
    except StoreFailure as err:
        raise CheckpointError(f"{location.uri}: {err}", retryable=err.transient) from None


def record_from_step(values_text: str, annotations_text: str, environ: MutableMapping[str, str]) -> str:
    """Record the workflow's provenance in its run's store, as the `check-parameters` step does; return one line.

    `values_text`: every workflow parameter (the step's `values`, already checked); `annotations_text`: the
    workflow's annotations (JSON). The store's variables of the run's `env` parameter are set in `environ`
    first. Never raises: a record the step cannot keep is one warning line (the workflow's annotation stays the
    record; the store's is its copy for when the workflow is gone).
    """
    from offhours.scripts.names import ANNOTATION_PROVENANCE

    values = _object(values_text)
    run, uri = values.get("run-id"), values.get("checkpoint-uri")
    if not isinstance(run, str) or not isinstance(uri, str) or not run or not uri:
        return "provenance: not stored (the workflow has no run-id or checkpoint-uri parameter)"
    if len(annotations_text.encode(errors="replace")) > MAX_ANNOTATIONS_BYTES:
        return f"warning: provenance of run {run} not stored: the workflow's annotations are over " \
               f"{MAX_ANNOTATIONS_BYTES} bytes"
    text = _object(annotations_text).get(ANNOTATION_PROVENANCE)
    if not isinstance(text, str) or not text:
        return f"provenance: run {run} has no record on its workflow (not submitted by `offhours submit`): none stored"
    env = _object(values["env"]) if isinstance(values.get("env"), str) else {}
    environ.update({k: v for k, v in env.items() if isinstance(v, str) and k.startswith(STORE_VARIABLES)})
    try:
        return store_record(uri, run, text, environ.get("OFFHOURS_S3_ENDPOINT_URL") or environ.get("AWS_ENDPOINT_URL"))
    except (ProvenanceError, CheckpointError) as err:
        return f"warning: provenance of run {run} not stored: {str(err).splitlines()[0][:300]}"
    except Exception as err:  # noqa: BLE001 - a client library or credentials missing is one line, never the step's failure
        said = str(err).splitlines()[0][:200] if str(err) else ""
        return f"warning: provenance of run {run} not stored: {type(err).__name__}: {said}"


def _object(text: str) -> Mapping[str, Any]:
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    return doc if isinstance(doc, dict) else {}
