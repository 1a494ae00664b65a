"""The preemptible job contract, for research code: stop on SIGTERM, checkpoint atomically, resume.

A job on borrowed GPUs is stopped whenever serving needs them back. In a few lines:

    from offhours.scripts.runtime.checkpoint import CheckpointStore, PreemptionSignal, PREEMPTED_EXIT_CODE

    stop = PreemptionSignal.install()             # first: SIGTERM sets a flag; the step in flight finishes
    store = CheckpointStore.from_env()            # OFFHOURS_CHECKPOINT_URI: file:// or s3://
    latest = store.latest()                       # newest *complete* checkpoint, or None
    step, state = (latest.step, load(latest.data)) if latest else (0, fresh())
    while step < total:
        state = train_one_step(state, step); step += 1
        if step % every == 0 or stop.requested:
            store.save(step, dump(state))
        if stop.requested:
            sys.exit(PREEMPTED_EXIT_CODE)         # 75: preempted, resumable (retried, not a failure)

A `CheckpointError` whose `retryable` is true (the store stayed unreachable past its retries) is
worth exiting 75 for too: the step is retried from the last checkpoint instead of failing.

A checkpoint is a folder `step-<12 digits>` holding `data` and a `COMPLETE` marker (size and
SHA-256 of `data`) written last; on `file://` the folder is renamed into place, on `s3://` the
marker is the commit. A checkpoint without a valid marker (half-written, corrupt) is skipped,
never loaded, and what a cut-short save left is removed by the next save. `progress.json` beside
them tells the gate how much work a stop would lose; it names the store and the run that wrote it,
so it is never read as another run's. Every store call has timeouts and a bounded retry
(`offhours.scripts.runtime.store_policy`); the URI is read by `offhours.scripts.runtime.store_uri`,
the same reader as the parameter check's.
"""

import hashlib
import json
import math
import os
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import FrameType
from typing import Any, Protocol

from offhours.scripts.runtime.exit_codes import PREEMPTED_EXIT_CODE
from offhours.scripts.runtime.store_policy import RetryPolicy, StoreFailure
from offhours.scripts.runtime.store_uri import StoreLocation, StoreURIError, parse_store_uri

__all__ = ["PREEMPTED_EXIT_CODE", "Checkpoint", "CheckpointError", "CheckpointStore", "PreemptionSignal",
           "RetryPolicy"]

MARKER, DATA, PROGRESS = "COMPLETE", "data", "progress.json"


class CheckpointError(RuntimeError):
    """A checkpoint URI is unusable, or the store failed; names the URI.

    `retryable`: the store failed with an error that passes by itself (an outage outlasting the
    retries), so a later attempt of the job may succeed; a job exits EX_TEMPFAIL (75, as for a
    preemption) to be retried from its last checkpoint rather than fail.
    """

    def __init__(self, message: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


@dataclass(frozen=True)
class Checkpoint:
    """A complete checkpoint: the step it was taken after, and its bytes."""

    step: int
    data: bytes


class PreemptionSignal:
    """A SIGTERM handler that only sets a flag, so the step in flight can finish cleanly.

    A job is stoppable from its first instruction: a SIGTERM that arrives before the handler is
    installed is a preemption too. A job with imports or set-up before `install()` blocks the
    signal as its first statement (`signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})`);
    it then waits, pending, until `install()` takes it.
    """

    def __init__(self) -> None:
        self.requested = False
        self.at: float | None = None

    @classmethod
    def install(cls, signals: tuple[int, ...] = (signal.SIGTERM,)) -> "PreemptionSignal":
        """Install the handler for `signals`, then unblock them; return the flag holder.

        A signal held since the job blocked it is delivered to the handler here, so `requested` is already
        true when this returns.
        """
        flag = cls()
        for sig in signals:
            signal.signal(sig, flag._handle)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, set(signals))
        return flag

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.requested, self.at = True, time.time()


def _step_name(step: int) -> str:
    return f"step-{step:012d}"


MAX_STEP = 10**15 - 1  # step names stay short enough for any key or file name


def _marker(data: bytes, step: int) -> bytes:
    return json.dumps({"step": step, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                       "time": time.time()}).encode()


def _vouched(marker: bytes, step: int) -> dict[str, Any] | None:
    """Return the marker's record if it is one for `step`, else None."""
    try:
        meta = json.loads(marker)
    except ValueError:
        return None
    return meta if isinstance(meta, dict) and meta.get("step") == step and isinstance(meta.get("size"), int) else None


def _valid(marker: bytes, data: bytes, step: int) -> bool:
    meta = _vouched(marker, step)
    return bool(meta and meta["size"] == len(data) and meta.get("sha256") == hashlib.sha256(data).hexdigest())


class _Backend(Protocol):
    def steps(self) -> list[int]: ...
    def read(self, folder: str, name: str) -> bytes | None: ...
    def commit(self, folder: str, files: dict[str, bytes]) -> None: ...
    def sweep(self, keep: str, names: tuple[str, ...]) -> None: ...
    def put(self, name: str, data: bytes) -> None: ...
    def get(self, name: str) -> bytes | None: ...
    def find(self, name: str) -> list[tuple[StoreLocation, bytes]]: ...


def _location(uri: str) -> StoreLocation:
    try:
        return parse_store_uri(uri)
    except StoreURIError as err:
        raise CheckpointError(f"{uri}: {err}") from None


def _policy(env: Mapping[str, str], policy: RetryPolicy | None) -> RetryPolicy:
    if policy is not None:
        return policy
    try:
        return RetryPolicy.from_env(env)
    except ValueError as err:
        raise CheckpointError(str(err)) from None


def _backend_for(location: StoreLocation, endpoint_url: str | None, policy: RetryPolicy) -> _Backend:
    if location.scheme == "file":
        from offhours.scripts.runtime.store_file import FileBackend

        return FileBackend(location, policy)
    from offhours.scripts.runtime.store_s3 import S3Backend

    return S3Backend(location, endpoint_url, policy)


def _progress_time(location: StoreLocation, text: bytes, run: str | None, now: float) -> float | None:
    """Return the time of a progress record, if it was written by a store at `location` for run `run`."""
    try:
        record = json.loads(text)
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("run") != run or not isinstance(record.get("store"), str):
        return None
    try:
        if parse_store_uri(record["store"]) != location:
            return None  # copied or forged from elsewhere: not this store's
    except StoreURIError:
        return None
    at = record.get("time")
    if isinstance(at, bool) or not isinstance(at, (int, float)) or not math.isfinite(at) or not 0 <= at <= now:
        return None  # a time after now (plus a day of clock skew) is no evidence of anything
    return float(at)


def latest_progress_time(prefix_uri: str, endpoint_url: str | None = None, policy: RetryPolicy | None = None,
                         timeout: float = 5.0) -> float | None:
    """Return the newest `progress.json` time of a run's stores (`<checkpoint-uri>/<run-id>`, any step), or None.

    What the gate reads to choose the victims whose stop loses least work. Only records written by a
    store at the folder they lie in, for the run the prefix's last segment names, count: a run `a`
    never reads the progress of `a-1`, of a run nested below it, or a copied file. The whole read
    is bounded by `timeout` (deadline and socket timeouts), since the gate waits no longer.
    """
    location = _location(prefix_uri)
    run = location.segments[-1] if location.segments else None
    bounded = _policy(os.environ, policy).bounded_by(timeout)
    try:
        found = _backend_for(location, endpoint_url, bounded).find(PROGRESS)
    except StoreFailure as err:
        raise CheckpointError(f"{prefix_uri}: {err}", retryable=err.transient) from None
    times = [t for where, text in found if where.is_within(location)
             and (t := _progress_time(where, text, run, time.time() + 86400)) is not None]
    return max(times) if times else None


class CheckpointStore:
    """Checkpoints of one run under a `file://` or `s3://` URI."""

    def __init__(self, uri: str, endpoint_url: str | None = None, run_id: str | None = None,
                 policy: RetryPolicy | None = None) -> None:
        self.uri = uri
        self.location = _location(uri)
        # The run this store's progress is for: the step's OFFHOURS_RUN_ID unless told otherwise, so a job
        # that builds its store from the URI alone still records progress the gate will read.
        self.run_id = run_id if run_id is not None else os.environ.get("OFFHOURS_RUN_ID") or None
        self.policy = _policy(os.environ, policy)
        self._backend = _backend_for(self.location, endpoint_url, self.policy)
        self._swept = False

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> "CheckpointStore":
        """Build from OFFHOURS_CHECKPOINT_URI and OFFHOURS_RUN_ID (set by every offhours step).

        Also read: an optional S3 endpoint and the OFFHOURS_STORE_* timeouts and retries.
        """
        env = dict(os.environ) if env is None else env
        uri = env.get("OFFHOURS_CHECKPOINT_URI")
        if not uri:
            raise CheckpointError("OFFHOURS_CHECKPOINT_URI is not set")
        return cls(uri, env.get("OFFHOURS_S3_ENDPOINT_URL") or env.get("AWS_ENDPOINT_URL"),
                   env.get("OFFHOURS_RUN_ID") or None, _policy(env, None))

    def _failed(self, err: StoreFailure) -> CheckpointError:
        return CheckpointError(f"{self.uri}: {err}", retryable=err.transient)

    def save(self, step: int, data: bytes) -> None:
        """Write the checkpoint taken after `step` atomically, then record the progress.

        Transient storage errors are retried (see `RetryPolicy`); a save that still fails raises
        CheckpointError and leaves no checkpoint of this step that `latest()` would load.
        """
        if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= MAX_STEP:
            raise CheckpointError(f"{self.uri}: step must be a whole number from 0 to {MAX_STEP}, not {step!r}")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise CheckpointError(f"{self.uri}: checkpoint data must be bytes, not {type(data).__name__}")
        data, folder = bytes(data), _step_name(step)
        if not self._swept:  # what killed saves left (a process's debris is swept by the next one's first save)
            self._backend.sweep(folder, (DATA, MARKER))  # before writing: it may be what fills the disk
            self._swept = True
        try:
            self._backend.commit(folder, {DATA: data, MARKER: _marker(data, step)})
        except StoreFailure as err:
            self._swept = False  # this save may have left some: the next one looks again
            raise self._failed(err) from None
        record = {"step": step, "time": time.time(), "run": self.run_id, "store": self.location.uri}
        try:
            self._backend.put(PROGRESS, json.dumps(record).encode())
        except StoreFailure as err:  # the checkpoint is saved; progress only informs the gate's choice of victims
            print(f"offhours checkpoint: {self.uri}: progress not recorded: {err}", file=sys.stderr, flush=True)

    def latest(self) -> Checkpoint | None:
        """Return the newest complete checkpoint; incomplete or corrupt ones are skipped.

        A storage error that outlasts the retries raises CheckpointError: a job must not start over
        from scratch because its checkpoints could not be read.
        """
        try:
            for step in reversed(self._backend.steps()):
                folder = _step_name(step)
                marker = self._backend.read(folder, MARKER)
                if marker is None or _vouched(marker, step) is None:
                    continue  # half-written or corrupt: its data is not even downloaded
                data = self._backend.read(folder, DATA)
                if data is not None and _valid(marker, data, step):
                    return Checkpoint(step, data)
        except StoreFailure as err:
            raise self._failed(err) from None
        return None

    def progress(self) -> dict[str, Any] | None:
        """Return the last recorded progress (step and time of the newest checkpoint), if any."""
        try:
            text = self._backend.get(PROGRESS)
            record = json.loads(text) if text else None
        except (StoreFailure, ValueError):  # progress is advisory
            return None
        return record if isinstance(record, dict) else None
