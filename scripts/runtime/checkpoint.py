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

A checkpoint is a folder `step-<12 digits>` holding `data` and a `COMPLETE` marker (size and
SHA-256 of `data`) written last; on `file://` the folder is renamed into place, on `s3://` the
marker is the commit. A checkpoint without a valid marker (half-written, corrupt) is skipped,
never loaded. `progress.json` beside them tells the gate how much work a stop would lose.
"""

import hashlib
import json
import os
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Protocol
from urllib.parse import urlparse

from offhours.scripts.runtime.exit_codes import PREEMPTED_EXIT_CODE

__all__ = ["PREEMPTED_EXIT_CODE", "Checkpoint", "CheckpointError", "CheckpointStore", "PreemptionSignal"]

MARKER, DATA, PROGRESS = "COMPLETE", "data", "progress.json"


class CheckpointError(RuntimeError):
    """A checkpoint URI is unusable, or the store failed; names the URI."""


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


def _marker(data: bytes, step: int) -> bytes:
    return json.dumps({"step": step, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                       "time": time.time()}).encode()


def _valid(marker: bytes, data: bytes, step: int) -> bool:
    try:
        meta = json.loads(marker)
    except ValueError:
        return False
    return bool(meta.get("step") == step and meta.get("size") == len(data)
                and meta.get("sha256") == hashlib.sha256(data).hexdigest())


class _Backend(Protocol):
    def steps(self) -> list[int]: ...
    def read(self, step: int, name: str) -> bytes | None: ...
    def commit(self, step: int, data: bytes, marker: bytes) -> None: ...
    def put(self, name: str, data: bytes) -> None: ...
    def get(self, name: str) -> bytes | None: ...
    def find(self, name: str) -> list[bytes]: ...


class _FileBackend:
    def __init__(self, root: Path) -> None:
        self.root = root

    def steps(self) -> list[int]:
        if not self.root.is_dir():
            return []
        return sorted(int(p.name[5:]) for p in self.root.iterdir() if p.name.startswith("step-") and p.name[5:].isdigit())

    def read(self, step: int, name: str) -> bytes | None:
        path = self.root / _step_name(step) / name
        return path.read_bytes() if path.is_file() else None

    def commit(self, step: int, data: bytes, marker: bytes) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".incomplete-", dir=self.root))
        (tmp / DATA).write_bytes(data)
        (tmp / MARKER).write_bytes(marker)
        for f in (tmp / DATA, tmp / MARKER):
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
        final = self.root / _step_name(step)
        if final.exists():  # a retried save of the same step: replace it whole
            shutil.rmtree(final)
        os.rename(tmp, final)  # atomic on one file system: the checkpoint appears complete or not at all

    def put(self, name: str, data: bytes) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".{name}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, self.root / name)

    def get(self, name: str) -> bytes | None:
        path = self.root / name
        return path.read_bytes() if path.is_file() else None

    def find(self, name: str) -> list[bytes]:
        return [p.read_bytes() for p in self.root.rglob(name)] if self.root.is_dir() else []


class _S3Backend:
    def __init__(self, bucket: str, prefix: str, endpoint_url: str | None) -> None:
        import boto3
        from botocore.config import Config

        self.bucket, self.prefix = bucket, prefix.strip("/")
        # Checksums only where S3 requires them: S3-compatible servers (MinIO, s3proxy, Ceph) do not
        # all implement the flexible-checksum headers newer SDKs send by default.
        config = Config(request_checksum_calculation="when_required", response_checksum_validation="when_required")
        self.s3 = boto3.client("s3", endpoint_url=endpoint_url, config=config)

    def _key(self, *parts: str) -> str:
        return "/".join(p for p in (self.prefix, *parts) if p)

    def steps(self) -> list[int]:
        found: set[int] = set()
        paginator = self.s3.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self._key("step-")):
            for obj in page.get("Contents", []):
                name = obj["Key"][len(self._key("")) + (1 if self.prefix else 0):].split("/")[0]
                if name.startswith("step-") and name[5:].isdigit():
                    found.add(int(name[5:]))
        return sorted(found)

    def _object(self, key: str) -> bytes | None:
        from botocore.exceptions import ClientError

        try:
            return bytes(self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read())
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise

    def read(self, step: int, name: str) -> bytes | None:
        return self._object(self._key(_step_name(step), name))

    def commit(self, step: int, data: bytes, marker: bytes) -> None:
        # S3 has no rename: the data goes first, the marker that vouches for it last.
        self.s3.put_object(Bucket=self.bucket, Key=self._key(_step_name(step), DATA), Body=data)
        self.s3.put_object(Bucket=self.bucket, Key=self._key(_step_name(step), MARKER), Body=marker)

    def put(self, name: str, data: bytes) -> None:
        self.s3.put_object(Bucket=self.bucket, Key=self._key(name), Body=data)

    def get(self, name: str) -> bytes | None:
        return self._object(self._key(name))

    def find(self, name: str) -> list[bytes]:
        found = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self._key("")):
            for obj in page.get("Contents", []):
                if obj["Key"].endswith("/" + name):
                    found.append(self._object(obj["Key"]))
        return [data for data in found if data is not None]


def _backend_for(uri: str, endpoint_url: str | None) -> _Backend:
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return _FileBackend(Path(parsed.path))
    if parsed.scheme == "s3":
        if not parsed.netloc:
            raise CheckpointError(f"{uri}: an s3:// URI needs a bucket")
        return _S3Backend(parsed.netloc, parsed.path, endpoint_url)
    raise CheckpointError(f"{uri}: checkpoint URIs must be file:// or s3:// (got {parsed.scheme or 'none'}://)")


def latest_progress_time(prefix_uri: str, endpoint_url: str | None = None) -> float | None:
    """Return the newest `progress.json` time under a run's prefix (any step), or None.

    What the gate reads to choose the victims whose stop loses least work.
    """
    times = []
    for text in _backend_for(prefix_uri, endpoint_url).find(PROGRESS):
        try:
            times.append(float(json.loads(text)["time"]))
        except (ValueError, KeyError, TypeError):
            continue
    return max(times) if times else None


class CheckpointStore:
    """Checkpoints of one run under a `file://` or `s3://` URI."""

    def __init__(self, uri: str, endpoint_url: str | None = None) -> None:
        self.uri = uri
        self._backend = _backend_for(uri, endpoint_url)

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> "CheckpointStore":
        """Build from OFFHOURS_CHECKPOINT_URI (set by every offhours step) and an optional S3 endpoint."""
        env = dict(os.environ) if env is None else env
        uri = env.get("OFFHOURS_CHECKPOINT_URI")
        if not uri:
            raise CheckpointError("OFFHOURS_CHECKPOINT_URI is not set")
        return cls(uri, env.get("OFFHOURS_S3_ENDPOINT_URL") or env.get("AWS_ENDPOINT_URL"))

    def save(self, step: int, data: bytes) -> None:
        """Write the checkpoint taken after `step` atomically, then record the progress."""
        self._backend.commit(step, data, _marker(data, step))
        self._backend.put(PROGRESS, json.dumps({"step": step, "time": time.time()}).encode())

    def latest(self) -> Checkpoint | None:
        """Return the newest complete checkpoint; incomplete or corrupt ones are skipped."""
        for step in reversed(self._backend.steps()):
            marker = self._backend.read(step, MARKER)
            data = self._backend.read(step, DATA) if marker is not None else None
            if marker is not None and data is not None and _valid(marker, data, step):
                return Checkpoint(step, data)
        return None

    def progress(self) -> dict[str, Any] | None:
        """Return the last recorded progress (step and time of the newest checkpoint), if any."""
        try:
            text = self._backend.get(PROGRESS)
        except Exception:  # noqa: BLE001 - progress is advisory
            return None
        return json.loads(text) if text else None
