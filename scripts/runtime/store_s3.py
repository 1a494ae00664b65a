"""The checkpoint store on S3 (`s3://`, any S3-compatible server): the marker written last is the commit.

S3 has no rename: a checkpoint's `data` goes first and its `COMPLETE` marker, which vouches for it,
last; one PUT is atomic, so a reader sees a whole object or none. A save cut short leaves at most a
`data` without a marker, which no reader loads and the next save deletes. The client has connect
and read timeouts and no retries of its own: `RetryPolicy` is the one bounded retry of every call,
body reads included (botocore does not retry a response whose body breaks off).
"""

import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from offhours.scripts.runtime.store_policy import RetryPolicy
from offhours.scripts.runtime.store_uri import STEP_FOLDER, StoreLocation, StoreURIError

T = TypeVar("T")

_THROTTLED = {"SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "InternalError", "ServiceUnavailable",
              "RequestLimitExceeded", "TooManyRequests"}
_CHUNK = 1 << 20


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


def _missing(err: BaseException) -> bool:
    from botocore.exceptions import ClientError

    return isinstance(err, ClientError) and err.response.get("Error", {}).get("Code") in ("NoSuchKey", "404")


class S3Backend:
    """Checkpoint folders `step-N/{data,COMPLETE}` and named objects under one key prefix."""

    def __init__(self, location: StoreLocation, endpoint_url: str | None, policy: RetryPolicy) -> None:
        self.location, self.policy, self.bucket, self.endpoint_url = location, policy, location.bucket, endpoint_url
        self._dir = location.key_prefix + "/" if location.segments else ""
        self._client: Any = None

    @property
    def s3(self) -> Any:
        """The boto3 client, made on first use (making one may look up a region: a store's constructor does no I/O)."""
        if self._client is None:
            import boto3
            from botocore.config import Config

            # Checksums only where S3 requires them: S3-compatible servers (MinIO, s3proxy, Ceph) do not
            # all implement the flexible-checksum headers newer SDKs send by default.
            config = Config(request_checksum_calculation="when_required",
                            response_checksum_validation="when_required", connect_timeout=self.policy.connect_timeout,
                            read_timeout=self.policy.read_timeout, retries={"total_max_attempts": 1, "mode": "standard"})
            # A session of its own: boto3's default session keeps the first credentials it resolved for the
            # whole process, so a store made after the environment changed would sign with stale ones.
            self._client = boto3.session.Session().client("s3", endpoint_url=self.endpoint_url, config=config)
        return self._client

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        return self.policy.call(what, fn, transient)  # the store names its URI in front

    def _list(self, prefix: str, delimiter: bool) -> tuple[list[str], list[str]]:
        keys, folders, start = [], [], time.monotonic()
        extra = {"Delimiter": "/"} if delimiter else {}
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix, **extra):
            keys += [obj["Key"] for obj in page.get("Contents", [])]
            folders += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
            if time.monotonic() - start > self.policy.deadline:  # each page is bounded by the socket timeouts
                raise _BodyTooSlow(f"listing {prefix} still has pages after {self.policy.deadline:g} s")
        return keys, folders

    def steps(self) -> list[int]:
        """Return the steps that have a checkpoint folder (complete or not)."""
        _, folders = self._call("listing checkpoints", lambda: self._list(self._dir + "step-", True))
        return sorted(int(m.group(1)) for f in folders if (m := STEP_FOLDER.match(f[len(self._dir):].rstrip("/"))))

    def _get_once(self, key: str) -> bytes | None:
        try:
            body = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"]
        except Exception as err:
            if _missing(err):
                return None
            raise
        start, chunks = time.monotonic(), []
        with body:
            while chunk := body.read(_CHUNK):  # botocore checks the length: a cut body raises, never returns short
                chunks.append(chunk)
                if time.monotonic() - start > self.policy.deadline:
                    raise _BodyTooSlow(f"the body of {key} still arrives after {self.policy.deadline:g} s")
        return b"".join(chunks)

    def _get(self, key: str) -> bytes | None:
        return self._call(f"reading {key[len(self._dir):]}", lambda: self._get_once(key))

    def _put(self, key: str, data: bytes) -> None:
        self._call(f"writing {key[len(self._dir):]}",
                   lambda: self.s3.put_object(Bucket=self.bucket, Key=key, Body=data))

    def read(self, folder: str, name: str) -> bytes | None:
        """Return the bytes of `folder/name`, or None when it does not exist."""
        return self._get(f"{self._dir}{folder}/{name}")

    def commit(self, folder: str, files: dict[str, bytes]) -> None:
        """Write `files` into `folder` in order: the last one is the commit."""
        written = []
        try:
            for name, data in files.items():
                self._put(f"{self._dir}{folder}/{name}", data)
                written.append(name)
        except Exception:
            for name in written:  # best effort, one try: no data without its marker left (else the next sweep)
                try:
                    self.s3.delete_object(Bucket=self.bucket, Key=f"{self._dir}{folder}/{name}")
                except Exception:  # noqa: BLE001, S110 - the sweep of the next save removes it
                    pass
            raise

    def sweep(self, keep: str, names: tuple[str, ...]) -> None:
        """Delete what saves cut short left: the files of checkpoint folders whose last file (the marker) is missing.

        Only the store's own names directly inside `step-N` folders are touched, never `keep` (the
        folder about to be written) and never anything else a person put there.
        """
        try:
            keys, _ = self._call("listing checkpoints", lambda: self._list(self._dir + "step-", False))
        except Exception:  # noqa: BLE001 - best effort: a failed sweep never fails the save that ran it
            return
        present: dict[str, set[str]] = {}
        for key in keys:
            folder, _, name = key[len(self._dir):].partition("/")
            if STEP_FOLDER.match(folder) and folder != keep and name in names:
                present.setdefault(folder, set()).add(name)
        orphans = [f"{self._dir}{folder}/{name}" for folder, found in sorted(present.items()) if names[-1] not in found
                   for name in sorted(found)]
        # One DELETE per object: DeleteObjects needs a checksum header not every S3-compatible server takes.
        for key in orphans:
            try:
                self._call("removing interrupted saves", partial(self.s3.delete_object, Bucket=self.bucket, Key=key))
            except Exception:  # noqa: BLE001 - best effort, as above
                return

    def put(self, name: str, data: bytes) -> None:
        """Replace the object `name`."""
        self._put(self._dir + name, data)

    def get(self, name: str) -> bytes | None:
        """Return the bytes of the object `name`, or None."""
        return self._get(self._dir + name)

    def find(self, name: str) -> list[tuple[StoreLocation, bytes]]:
        """Every object `name` at or below the prefix, with the location of its folder."""
        keys, _ = self._call(f"finding {name}", lambda: self._list(self._dir, False))
        out = []
        for key in keys:
            folder, _, base = key.rpartition("/")
            if base != name or any(STEP_FOLDER.match(s) for s in folder.split("/")):
                continue
            try:
                location = self.location.child(*folder[len(self._dir):].split("/")) if folder != self._dir.rstrip("/") \
                    else self.location
            except StoreURIError:
                continue  # a folder no checkpoint URI can name was not written by a store
            data: Any = self._get(key)
            if data is not None:
                out.append((location, data))
        return out
