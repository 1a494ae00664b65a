"""The checkpoint store on S3 (`s3://`, any S3-compatible server that honours conditional puts).

One PUT is atomic, so a reader sees a whole object or none; a log entry is created with a
create-only PUT (`If-None-Match: *`), which the server refuses (412) when the key exists: the
exclusive create the writers' fence relies on. A server that ignores the condition is refused
once, at the first write (`probe`). The client has connect and read timeouts and no retries of its
own: `RetryPolicy` is the one bounded retry of every call, body reads included (botocore does not
retry a response whose body breaks off).
"""

import time
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from offhours.scripts.runtime.store_points import reached
from offhours.scripts.runtime.store_policy import ConditionalPutsIgnored, RetryPolicy
from offhours.scripts.runtime.store_uri import StoreLocation, StoreURIError

PROGRESS_MAX_FILES = 1000  # as in store_file: the gate's advisory progress read GETs this many objects at most
PROGRESS_MAX_FOLDERS = 2000  # folders one progress find lists (one Delimiter listing each), whatever a tenant made
PROGRESS_MAX_BYTES = 64 * 1024  # as in store_file: a progress record is one short JSON line; a bigger object is none

T = TypeVar("T")

_THROTTLED = {"SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "InternalError", "ServiceUnavailable",
              "RequestLimitExceeded", "TooManyRequests",
              "ConditionalRequestConflict"}  # 409: a concurrent conditional write to the key; AWS says try again
_CHUNK = 1 << 20
_PROBE = "_probe-"
INTERNAL = ("_log", "_data")  # the store's own folders: never searched for progress
_PROBED: set[tuple[str | None, str]] = set()  # (endpoint, bucket) whose conditional puts were seen refused



def s3_client(endpoint_url: str | None, connect_timeout: float, read_timeout: float) -> Any:
    """Return a boto3 S3 client as every S3 reader and writer of offhours makes one.

    One try per call (the caller retries by its own policy), its own timeouts, checksums only where S3 requires them.
    """
    import boto3
    from botocore.config import Config

    # Checksums only where S3 requires them: S3-compatible servers (MinIO, s3proxy, Ceph) do not
    # all implement the flexible-checksum headers newer SDKs send by default.
    config = Config(request_checksum_calculation="when_required", response_checksum_validation="when_required",
                    connect_timeout=connect_timeout, read_timeout=read_timeout,
                    retries={"total_max_attempts": 1, "mode": "standard"})
    # A session of its own: boto3's default session keeps the first credentials it resolved for the
    # whole process, so a client made after the environment changed would sign with stale ones.
    return boto3.session.Session().client("s3", endpoint_url=endpoint_url, config=config)

class _BodyTooSlow(TimeoutError):
    """A response body (or a listing's pages) still coming in at the policy's deadline."""


def transient(err: BaseException) -> bool:
    """Whether an S3 call's failure is worth another try: timeouts, broken connections, 5xx and throttling."""
    from botocore.exceptions import ClientError, ConnectionError, HTTPClientError, IncompleteReadError
    from urllib3.exceptions import HTTPError as Urllib3Error

    if isinstance(err, _BodyTooSlow):
        return False
    if isinstance(err, ClientError):
        status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        return status >= 500 or status == 429 or err.response.get("Error", {}).get("Code") in _THROTTLED
    return isinstance(err, (HTTPClientError, ConnectionError, IncompleteReadError, Urllib3Error,
                            ConnectionResetError, BrokenPipeError, TimeoutError))


def _precondition_failed(err: BaseException) -> bool:
    from botocore.exceptions import ClientError

    return isinstance(err, ClientError) and (err.response.get("Error", {}).get("Code") == "PreconditionFailed"
                                             or err.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 412)


def _missing(err: BaseException) -> bool:
    from botocore.exceptions import ClientError

    return isinstance(err, ClientError) and err.response.get("Error", {}).get("Code") in ("NoSuchKey", "404")


class S3Backend:
    """Named objects under one key prefix (`_log/<seq>`, `_data/<name>`, `progress.json`)."""

    def __init__(self, location: StoreLocation, endpoint_url: str | None, policy: RetryPolicy) -> None:
        self.location, self.policy, self.bucket, self.endpoint_url = location, policy, location.bucket, endpoint_url
        self._dir = location.key_prefix + "/" if location.segments else ""
        self._client: Any = None
        self.find_cut: str | None = None  # why the last `find` stopped before the end (None: it read everything)

    @property
    def s3(self) -> Any:
        """The boto3 client, made on first use (making one may look up a region: a store's constructor does no I/O)."""
        if self._client is None:
            self._client = s3_client(self.endpoint_url, self.policy.connect_timeout, self.policy.read_timeout)
        return self._client

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        return self.policy.call(what, fn, transient)  # the store names its URI in front

    def _list(self, prefix: str, delimiter: bool, start_after: str = "") -> tuple[list[str], list[str]]:
        keys, folders, start = [], [], time.monotonic()
        extra: dict[str, str] = {"Delimiter": "/"} if delimiter else {}
        if start_after:
            extra["StartAfter"] = start_after
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix, **extra):
            keys += [obj["Key"] for obj in page.get("Contents", [])]
            folders += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
            if time.monotonic() - start > self.policy.deadline:  # each page is bounded by the socket timeouts
                raise _BodyTooSlow(f"listing {prefix} still has pages after {self.policy.deadline:g} s")
        return keys, folders

    def _get_once(self, key: str, max_bytes: int | None = None) -> bytes | None:
        """GET `key` whole within the deadline; with `max_bytes`, None for an object past it (never read whole)."""
        try:
            answer = self.s3.get_object(Bucket=self.bucket, Key=key)
        except Exception as err:
            if _missing(err):
                return None
            raise
        body, start, chunks, size = answer["Body"], time.monotonic(), [], 0
        with body:
            if max_bytes is not None and int(answer.get("ContentLength") or 0) > max_bytes:
                return None  # said too big up front: not one byte of it is read
            while chunk := body.read(_CHUNK if max_bytes is None else max_bytes + 1 - size):
                chunks.append(chunk)  # botocore checks the length: a cut body raises, never returns short
                size += len(chunk)
                if max_bytes is not None and size > max_bytes:
                    return None
                if time.monotonic() - start > self.policy.deadline:
                    raise _BodyTooSlow(f"the body of {key} still arrives after {self.policy.deadline:g} s")
        return b"".join(chunks)

    def _get(self, key: str) -> bytes | None:
        return self._call(f"reading {key[len(self._dir):]}", lambda: self._get_once(key))

    def _put(self, key: str, data: bytes, **conditions: str) -> None:
        name = key[len(self._dir):]
        reached(f"put {name}")
        self._call(f"writing {name}", lambda: self.s3.put_object(Bucket=self.bucket, Key=key, Body=data, **conditions))
        reached(f"put done {name}")

    def _create_once(self, key: str, data: bytes) -> bool:
        try:
            self.s3.put_object(Bucket=self.bucket, Key=key, Body=data, IfNoneMatch="*")
        except Exception as err:
            if _precondition_failed(err):
                return False
            raise
        return True

    def create(self, name: str, data: bytes, epoch: int = 0) -> bool:
        """Create `name` holding `data` unless it exists (then False): a create-only PUT (`If-None-Match: *`).

        A retried PUT whose first try landed (its answer lost) finds its own object and answers False:
        the caller reads the entry back to tell its own from another writer's.
        """
        reached(f"put {name}")
        created = self._call(f"creating {name}", lambda: self._create_once(self._dir + name, data))
        reached(f"put done {name}")
        return created

    def probe(self) -> None:
        """Check, once per process and bucket, that the server refuses a second create-only PUT of one key.

        Raise ConditionalPutsIgnored when it does not: such a server cannot fence writers, and a read
        followed by a write is no substitute (two writers can both read "absent").
        """
        key = (self.endpoint_url, self.bucket)
        if key in _PROBED:
            return
        name = f"{_PROBE}{uuid.uuid4().hex}"
        first = self._call("probing conditional puts", lambda: self._create_once(self._dir + name, b"1"))
        second = self._call("probing conditional puts", lambda: self._create_once(self._dir + name, b"2"))
        try:
            self._call("probing conditional puts", lambda: self.s3.delete_object(Bucket=self.bucket, Key=self._dir + name))
        except Exception:  # noqa: BLE001, S110 - a leftover probe object is harmless
            pass
        if not first or second:
            raise ConditionalPutsIgnored(
                f"the S3 server{' at ' + self.endpoint_url if self.endpoint_url else ''} ignores conditional puts "
                "(a second PUT with If-None-Match: * of one key succeeded), so it cannot fence a run's writers: "
                "use a server that honours them (AWS S3, MinIO, s3proxy 4.0 or newer)")
        _PROBED.add(key)

    def write_new(self, name: str, data: bytes, epoch: int = 0) -> None:
        """Write `data` under `name`, a name no one else writes (its writer's unique name): one atomic PUT."""
        self._put(self._dir + name, data)

    def read(self, name: str) -> bytes | None:
        """Return the bytes of `name`, or None when it does not exist."""
        return self._get(self._dir + name)

    def read_small(self, name: str, limit: int) -> bytes | None:
        """Return the bytes of `name`, or None when it does not exist or is over `limit` bytes (never read whole)."""
        return self._call(f"reading {name}", lambda: self._get_once(self._dir + name, limit))

    def names(self, folder: str, after: str = "") -> list[str]:
        """Return the names of the objects directly in `folder` (after `after`, sorted)."""
        prefix = f"{self._dir}{folder}/"
        keys, _ = self._call(f"listing {folder}", lambda: self._list(prefix, True, prefix + after if after else ""))
        return sorted(n for k in keys if (n := k[len(prefix):]) and "/" not in n and n > after)

    def delete(self, name: str) -> None:
        """Delete `name` (done when it is already gone)."""
        reached(f"delete {name}")
        self._call(f"removing {name}", partial(self.s3.delete_object, Bucket=self.bucket, Key=self._dir + name))
        reached(f"deleted {name}")

    def sweep(self, epoch: int) -> None:
        """Nothing to sweep: an S3 PUT leaves a whole object or none."""

    def put(self, name: str, data: bytes) -> None:
        """Replace the object `name`."""
        self._put(self._dir + name, data)

    def find(self, name: str) -> list[tuple[StoreLocation, bytes]]:
        """Every object `name` at or below the prefix, with the location of its folder; bounded as a whole.

        A Delimiter listing per folder (never the store's own `_log`/`_data` folders, whose objects can be many),
        at most PROGRESS_MAX_FOLDERS folders and PROGRESS_MAX_FILES objects of at most PROGRESS_MAX_BYTES each,
        and one deadline for the whole find (the policy's): a tenant's folders cannot make the read cost more.
        """
        started = time.monotonic()

        def in_time(what: str, fn: Callable[[], T]) -> T:
            def bounded() -> T:
                if time.monotonic() - started > self.policy.deadline:
                    raise _BodyTooSlow(f"finding {name} took more than {self.policy.deadline:g} s")
                return fn()
            return self._call(what, bounded)

        out: list[tuple[StoreLocation, bytes]] = []
        folders, listed = [self._dir], 0
        self.find_cut = None
        while folders:
            if listed >= PROGRESS_MAX_FOLDERS or len(out) >= PROGRESS_MAX_FILES:
                self.find_cut = (f"more than {PROGRESS_MAX_FOLDERS} folders or {PROGRESS_MAX_FILES} {name} objects: "
                                 "not read to the end")
                break
            folder = folders.pop()
            listed += 1
            keys, subs = in_time(f"finding {name}", lambda f=folder: self._list(f, True))  # type: ignore[misc]
            folders += sorted((sub for sub in subs if sub[len(folder):].rstrip("/") not in INTERNAL), reverse=True)
            if folder + name not in keys:
                continue
            try:
                segments = folder[len(self._dir):].rstrip("/")
                location = self.location.child(*segments.split("/")) if segments else self.location
            except StoreURIError:
                continue  # a folder no checkpoint URI can name was not written by a store
            data = in_time(f"reading {(folder + name)[len(self._dir):]}",
                           lambda k=folder + name: self._get_once(k, PROGRESS_MAX_BYTES))  # type: ignore[misc]
            if data is not None:
                out.append((location, data))
        return out
