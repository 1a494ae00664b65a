"""The preemptible job contract, for research code: stop on SIGTERM, checkpoint atomically, resume.

A job on borrowed GPUs is stopped whenever serving needs them back. In a few lines:

    from offhours.scripts.runtime.checkpoint import CheckpointStore, PreemptionSignal, PREEMPTED_EXIT_CODE

    stop = PreemptionSignal.install()             # first: SIGTERM sets a flag; the step in flight finishes
    store = CheckpointStore.from_env()            # OFFHOURS_CHECKPOINT_URI (file:// or s3://) and OFFHOURS_RUN_ID
    latest = store.latest()                       # takes the run's next epoch; newest *complete* checkpoint, or None
    step, state = (latest.step, load(latest.data)) if latest else (0, fresh())
    while step < total:
        state = train_one_step(state, step); step += 1
        if step % every == 0 or stop.requested:
            store.save(step, dump(state))
        if stop.requested:
            sys.exit(PREEMPTED_EXIT_CODE)         # 75: preempted, resumable (retried, not a failure)

A `CheckpointError` whose `retryable` is true (the store stayed unreachable past its retries) is
worth exiting 75 for too: the step is retried from the last checkpoint instead of failing. A
`StaleWriterError` means a newer start of the same run holds the store: this process must stop.

Where: a run's store is `<uri>/<run-id>`, derived here from the run id, whatever URI the caller
passes, and every read checks that the log it reads is that run's, so no run reads another's
progress (`offhours.scripts.runtime.checkpoint_log` describes the log). How: every save writes its
bytes under a name no other save uses, then publishes them with one exclusive create of the next
log entry; a complete checkpoint is never overwritten, renamed or deleted until a newer one is
published. Who: each start of the run (the first `latest()` or `save()` of a store) takes the next
epoch with the same exclusive create; a writer of an older epoch is refused from then on. The
storage checks that create itself (`link` on files, `If-None-Match: *` on S3; an S3 server that
ignores it is refused). `progress.json` beside the log tells the gate how much work a stop would
lose; it names the store and the run that wrote it, so it is never read as another run's. Every
store call has timeouts and a bounded retry (`offhours.scripts.runtime.store_policy`); the URI is
read by `offhours.scripts.runtime.store_uri`, the same reader as the parameter check's.
"""

import hashlib
import json
import math
import os
import re
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import FrameType
from typing import Any, Protocol, TypeVar

from offhours.scripts.runtime.checkpoint_log import (
    DATA,
    LOG,
    LOG_NAME,
    Entry,
    LogError,
    Version,
    collectable,
    data_name,
    decode,
    log_name,
    save_after,
    start_after,
)
from offhours.scripts.runtime.exit_codes import PREEMPTED_EXIT_CODE
from offhours.scripts.runtime.store_policy import ConditionalPutsIgnored, RetryPolicy, StoreFailure
from offhours.scripts.runtime.store_uri import StoreLocation, StoreURIError, parse_store_uri

__all__ = ["PREEMPTED_EXIT_CODE", "Checkpoint", "CheckpointError", "CheckpointStore", "PreemptionSignal",
           "RetryPolicy", "StaleWriterError"]

T = TypeVar("T")
PROGRESS = "progress.json"


class CheckpointError(RuntimeError):
    """A checkpoint URI is unusable, or the store failed; names the URI.

    `retryable`: the store failed with an error that passes by itself (an outage outlasting the
    retries), so a later attempt of the job may succeed; a job exits EX_TEMPFAIL (75, as for a
    preemption) to be retried from its last checkpoint rather than fail.
    """

    def __init__(self, message: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class StaleWriterError(CheckpointError):
    """A newer start of the same run (a resubmit, a retry, a resumed copy) took the store: this writer must stop."""


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


MAX_STEP = 10**15 - 1  # step names stay short enough for any key or file name
_RUN_ID = re.compile(r"^[a-z0-9]([-a-z0-9]{0,48}[a-z0-9])?\Z", re.ASCII)  # a DNS label, as the parameter check reads it
_RACES = 64  # exclusive creates lost in a row before a call gives up (each loss is another writer's progress)


class _Backend(Protocol):
    def probe(self) -> None: ...
    def create(self, name: str, data: bytes, epoch: int) -> bool: ...
    def write_new(self, name: str, data: bytes, epoch: int) -> None: ...
    def put(self, name: str, data: bytes) -> None: ...
    def read(self, name: str) -> bytes | None: ...
    def read_small(self, name: str, limit: int) -> bytes | None: ...
    def names(self, folder: str, after: str = "") -> list[str]: ...
    def delete(self, name: str) -> None: ...
    def sweep(self, epoch: int) -> None: ...
    def find(self, name: str) -> list[tuple[StoreLocation, bytes]]: ...
    find_cut: str | None  # why the last `find` stopped before the end (a bound), None when it read everything


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
    """Return the newest `progress.json` time of a run's stores, or None (`latest_progress`, a cut read's best)."""
    return latest_progress(prefix_uri, endpoint_url, policy, timeout)[0]


def latest_progress(prefix_uri: str, endpoint_url: str | None = None, policy: RetryPolicy | None = None,
                    timeout: float = 5.0) -> tuple[float | None, str | None]:
    """Return the newest `progress.json` time of a run's stores (`<checkpoint-uri>/<run-id>`, any step), or None.

    What the gate reads to choose the victims whose stop loses least work. Only records written by a
    store at the folder they lie in, for the run the prefix's last segment names, count: a run `a`
    never reads the progress of `a-1`, of a run nested below it, or a copied file. The whole read
    is bounded by `timeout` (deadline and socket timeouts), since the gate waits no longer. With it, why the read
    stopped before the store's end (its folder or file bound; None: it read everything): a newer record may be there.
    """
    location = _location(prefix_uri)
    run = location.segments[-1] if location.segments else None
    bounded = _policy(os.environ, policy).bounded_by(timeout)
    backend = _backend_for(location, endpoint_url, bounded)
    try:
        found = backend.find(PROGRESS)
    except StoreFailure as err:
        raise CheckpointError(f"{prefix_uri}: {err}", retryable=err.transient) from None
    times = [t for where, text in found if where.is_within(location)
             and (t := _progress_time(where, text, run, time.time() + 86400)) is not None]
    return (max(times) if times else None), backend.find_cut


class CheckpointStore:
    """The checkpoints of one run, at `<uri>/<run-id>` under a `file://` or `s3://` URI.

    `readonly`: a store that only looks (a tool, a test) takes no epoch, so it fences no writer, and
    refuses to save. `keep`: how many published versions a save keeps (the newest, and fallbacks
    should the newest be damaged later); older ones are deleted once a newer one is published.
    """

    def __init__(self, uri: str, endpoint_url: str | None = None, run_id: str | None = None,
                 policy: RetryPolicy | None = None, keep: int = 2, readonly: bool = False) -> None:
        base = _location(uri)
        run = run_id if run_id is not None else os.environ.get("OFFHOURS_RUN_ID") or None
        if not isinstance(run, str) or not _RUN_ID.match(run):
            why = "no run id (pass run_id or set OFFHOURS_RUN_ID)" if run is None else \
                f"run id {str(run)[:60]!r} is not a DNS label of at most 50 characters"
            raise CheckpointError(f"{uri}: {why}: a run's checkpoints live at <uri>/<run-id>")
        if isinstance(keep, bool) or not isinstance(keep, int) or not 1 <= keep <= 100:
            raise CheckpointError(f"{uri}: keep must be a whole number from 1 to 100, not {keep!r}")
        try:
            self.location = base.child(run)
        except StoreURIError as err:
            raise CheckpointError(f"{uri}: with the run id {run!r} appended, it {err}") from None
        self.uri, self.run_id, self.keep, self.readonly = self.location.uri, run, keep, readonly
        self.policy = _policy(os.environ, policy)
        self._backend = _backend_for(self.location, endpoint_url, self.policy)
        self.epoch: int | None = None  # taken by the first latest() or save()
        # The process that took `epoch`: a copy of the store forked after that (an asynchronous checkpoint
        # writer, a DataLoader worker) must not share it, or each one's collection deletes the other's
        # unpublished bytes; the copy takes its own epoch, which fences the older writer.
        self._epoch_pid: int | None = None
        self._seen: Entry | None = None  # the newest log entry this store has read or written
        # One call at a time per store: a save from a background thread (an asynchronous checkpoint) and one
        # from the main thread share an epoch, and one's collection must not see the other's unpublished bytes.
        self._lock = threading.RLock()

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> "CheckpointStore":
        """Build from OFFHOURS_CHECKPOINT_URI and OFFHOURS_RUN_ID (set by every offhours step).

        Also read: an optional S3 endpoint and the OFFHOURS_STORE_* timeouts and retries.
        """
        env = dict(os.environ) if env is None else env
        uri = env.get("OFFHOURS_CHECKPOINT_URI")
        if not uri:
            raise CheckpointError("OFFHOURS_CHECKPOINT_URI is not set")
        run = env.get("OFFHOURS_RUN_ID") or None
        if run is None:
            raise CheckpointError(f"{uri}: OFFHOURS_RUN_ID is not set: a run's checkpoints live at <uri>/<run-id>")
        return cls(uri, env.get("OFFHOURS_S3_ENDPOINT_URL") or env.get("AWS_ENDPOINT_URL"), run, _policy(env, None))

    def _failed(self, err: StoreFailure) -> CheckpointError:
        return CheckpointError(f"{self.uri}: {err}", retryable=err.transient)

    def _entry(self, seq: int) -> Entry:
        text = self._backend.read(log_name(seq))
        if text is None:
            raise LogError(f"entry {seq} was listed and is gone (entries are never deleted)")
        return decode(text, seq, self.run_id)

    def _head(self) -> Entry | None:
        """Return the newest log entry (the run's state), checked to be this run's; None for an empty store."""
        after = f"{self._seen.seq:012d}" if self._seen else ""
        seqs = [int(m.group(1)) for n in self._backend.names(LOG, after) if (m := LOG_NAME.match(n))]
        if seqs:
            self._seen = self._entry(max(seqs))
        return self._seen

    def _publish(self, entry: Entry) -> bool:
        """Create `entry` exclusively; True when it is in the log (a retry may find its own first try there)."""
        if self._backend.create(log_name(entry.seq), entry.encode(), entry.epoch):
            return True
        return self._entry(entry.seq).writer == entry.writer

    def _guarded(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except StoreFailure as err:
            raise self._failed(err) from None
        except LogError as err:
            raise CheckpointError(f"{self.uri}: {err}") from None
        except ConditionalPutsIgnored as err:
            raise CheckpointError(f"{self.uri}: {err}") from None

    def start(self) -> int:
        """Take the run's next epoch (done by the first latest() or save()); return it. Older writers are refused."""
        if self.readonly:
            raise CheckpointError(f"{self.uri}: a read-only store takes no epoch")
        with self._lock:
            if self.epoch is None or self._epoch_pid != os.getpid():
                self.epoch = self._guarded(self._take_epoch)
                self._epoch_pid = os.getpid()
            return self.epoch

    def _take_epoch(self) -> int:
        self._backend.probe()
        for _ in range(_RACES):
            entry = start_after(self._head(), self.run_id, uuid.uuid4().hex)
            if self._publish(entry):
                self._seen = entry
                self._backend.sweep(entry.epoch)  # what crashed (or now fenced) writers left
                return entry.epoch
        raise CheckpointError(f"{self.uri}: {_RACES} other starts or saves won the log in a row; not started",
                              retryable=True)

    def save(self, step: int, data: bytes) -> None:
        """Write the checkpoint taken after `step` and publish it in one step, then record the progress.

        A save of a step already saved publishes a new version of it. Transient storage errors are
        retried (see `RetryPolicy`); a save that still fails raises CheckpointError, and the last
        published checkpoint stays the newest. A save by a writer whose epoch a newer start of the
        run took raises StaleWriterError and publishes nothing.
        """
        if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= MAX_STEP:
            raise CheckpointError(f"{self.uri}: step must be a whole number from 0 to {MAX_STEP}, not {step!r}")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise CheckpointError(f"{self.uri}: checkpoint data must be bytes, not {type(data).__name__}")
        if self.readonly:
            raise CheckpointError(f"{self.uri}: a read-only store does not save")
        data = bytes(data)
        with self._lock:
            epoch = self.start()
            published = self._guarded(lambda: self._save(step, data, epoch))
            self._collect(published)
            record = {"step": step, "time": time.time(), "run": self.run_id, "store": self.location.uri}
            try:
                self._backend.put(PROGRESS, json.dumps(record).encode())
            except StoreFailure as err:  # the checkpoint is saved; progress only informs the gate's choice of victims
                print(f"offhours checkpoint: {self.uri}: progress not recorded: {err}", file=sys.stderr, flush=True)

    def _save(self, step: int, data: bytes, epoch: int) -> Entry:
        name = data_name(step, epoch, uuid.uuid4().hex[:16])
        try:
            self._backend.write_new(f"{DATA}/{name}", data, epoch)
        except StoreFailure:
            self._head_of(epoch, step, name)  # a newer start may have swept the bytes being written: say so
            raise
        version = Version(step, name, len(data), hashlib.sha256(data).hexdigest())
        for _ in range(_RACES):
            entry = save_after(self._head_of(epoch, step, name), epoch, uuid.uuid4().hex, version, self.keep)
            if self._publish(entry):
                self._seen = entry
                return entry
        raise CheckpointError(f"{self.uri}: {_RACES} other writers won the log in a row; step {step} not saved",
                              retryable=True)

    def _head_of(self, epoch: int, step: int, name: str) -> Entry:
        """Return the newest entry if `epoch` still holds the store; else delete the unpublished `name` and refuse."""
        head = self._head()
        assert head is not None  # this store's own start entry is in the log
        if head.epoch == epoch:
            return head
        try:  # nobody will publish it: best effort, else the next writer's collection removes it
            self._backend.delete(f"{DATA}/{name}")
        except StoreFailure:
            pass
        raise StaleWriterError(
            f"{self.uri}: save of step {step} refused: this writer holds epoch {epoch} of run {self.run_id!r}, "
            f"and a newer start of the run took epoch {head.epoch}; this process must stop (its run continues "
            "elsewhere)")

    def _collect(self, published: Entry) -> None:
        """Delete the data objects `published` no longer lists (best effort: the next save's collection retries)."""
        assert self.epoch is not None
        try:
            for name in collectable(self._backend.names(DATA), published, self.epoch):
                self._backend.delete(f"{DATA}/{name}")
        except StoreFailure as err:
            print(f"offhours checkpoint: {self.uri}: old versions not yet removed: {err}", file=sys.stderr, flush=True)

    def latest(self) -> Checkpoint | None:
        """Return the newest published checkpoint whose bytes are whole; a damaged version is skipped.

        A writable store takes the run's next epoch first (a start of the run). A storage error that
        outlasts the retries raises CheckpointError: a job must not start over from scratch because
        its checkpoints could not be read; so does a log that is not this run's.
        """
        with self._lock:
            if not self.readonly:
                self.start()
            return self._guarded(self._latest)

    def _latest(self) -> Checkpoint | None:
        head = self._head()
        for version in reversed(head.versions if head else ()):
            data = self._backend.read(f"{DATA}/{version.name}")
            if data is not None and version.vouches_for(data):
                return Checkpoint(version.step, data)
            print(f"offhours checkpoint: {self.uri}: step {version.step} ({version.name}) is damaged or missing; "
                  "trying an older version", file=sys.stderr, flush=True)
        return None

    def progress(self) -> dict[str, Any] | None:
        """Return the last recorded progress (step and time of the newest checkpoint), if any."""
        try:
            text = self._backend.read(PROGRESS)
            record = json.loads(text) if text else None
        except (StoreFailure, ValueError):  # progress is advisory
            return None
        return record if isinstance(record, dict) else None
