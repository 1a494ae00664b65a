"""Argo's log archive as offhours configures it: where each pod's main log is kept, and reading it back bounded.

`offhours render --log-archive s3://BUCKET/PREFIX` installs an Argo artifact repository (the ConfigMap
LOG_ARCHIVE_CONFIGMAP in the research namespace) whose keyFormat keeps each pod's log at
`PREFIX/<namespace>/<workflow>/<pod>/main.log`, and sets `archiveLogs` and that `artifactRepositoryRef` on the research
WorkflowTemplates: Argo's executor keeps every pod's main log when it ends, a stopped attempt's too, after the
pod is gone. `offhours logs` finds a workflow's logs by its namespace and name under that prefix (never by the
workflow's status, which anyone who may update the workflow can write), lists at most MAX_ARCHIVED of them within
a deadline, and reads each as a stream of bounded chunks, at most `cap` bytes (a ranged GET).
"""

import math
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from offhours.scripts.inputs.errors import InputError
from offhours.scripts.inputs.yamldoc import load_yaml
from offhours.scripts.names import LOG_ARCHIVE_CONFIGMAP, LOG_ARCHIVE_KEY
from offhours.scripts.runtime.store_s3 import s3_client

KEY_LAYOUT = "/{{workflow.namespace}}/{{workflow.name}}/{{pod.name}}"  # after the prefix, in Argo's keyFormat
LOG_FILE = "main.log"  # what Argo's executor names the main container's archived log under the key
MAX_ARCHIVED = 200  # archived pod logs listed per workflow, whatever a tenant's workflow made
LIST_SECONDS = 10.0  # one workflow's whole listing
CONFIG_BYTES = 16 * 1024  # the repository text in the ConfigMap
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]\Z")
_PREFIX = re.compile(r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*\Z")


class ArchiveError(ValueError):
    """A log archive that cannot be configured or read: one line naming it and why."""


@dataclass(frozen=True)
class LogArchive:
    """Where the pods' main logs are: a bucket, the key prefix before `<namespace>/<workflow>/<pod>/main.log`."""

    bucket: str
    prefix: str
    endpoint: str = ""  # host[:port] as Argo's executor reaches it; empty: AWS S3
    insecure: bool = False  # plain HTTP to the endpoint

    def endpoint_url(self, override: str | None = None) -> str | None:
        """Return the URL a reader outside the cluster uses: `override` (OFFHOURS_S3_ENDPOINT_URL) first."""
        if override:
            return override
        if not self.endpoint:
            return None
        return ("http://" if self.insecure else "https://") + self.endpoint

    def folder(self, namespace: str, workflow: str) -> str:
        """Return the key prefix of one workflow's archived logs (with its trailing slash)."""
        return f"{self.prefix}/{namespace}/{workflow}/"


def parse_archive_uri(uri: str) -> tuple[str, str]:
    """Return (bucket, prefix) of `s3://BUCKET/PREFIX`; ArchiveError naming what is wrong."""
    if not uri.startswith("s3://"):
        raise ArchiveError(f"--log-archive {uri!r}: expected s3://BUCKET/PREFIX")
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    prefix = prefix.strip("/")
    if not _BUCKET.match(bucket):
        raise ArchiveError(f"--log-archive {uri!r}: {bucket!r} is not an S3 bucket name")
    if not _PREFIX.match(prefix):
        raise ArchiveError(f"--log-archive {uri!r}: expected a key prefix after the bucket (letters, digits, . _ - "
                           "and / between them), e.g. s3://lab-logs/offhours")
    return bucket, prefix


def repository_configmap(namespace: str, uri: str, endpoint: str = "", secret: str = "",
                         insecure: bool = False) -> dict[str, Any]:
    """Return the ConfigMap of the artifact repository Argo archives the research pods' logs to.

    `secret`: a Secret in `namespace` with keys `accessKey` and `secretKey` (none: the pods' own identity, IRSA).
    """
    bucket, prefix = parse_archive_uri(uri)
    s3: dict[str, Any] = {"bucket": bucket, "keyFormat": prefix + KEY_LAYOUT}
    if endpoint:
        s3["endpoint"] = endpoint
    if insecure:
        s3["insecure"] = True
    if secret:
        s3["accessKeySecret"] = {"name": secret, "key": "accessKey"}
        s3["secretKeySecret"] = {"name": secret, "key": "secretKey"}
    import yaml  # the writer only: what is read back goes through the input layer

    text = yaml.safe_dump({"archiveLogs": True, "s3": s3}, sort_keys=False)
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": LOG_ARCHIVE_CONFIGMAP, "namespace": namespace,
                         "annotations": {"workflows.argoproj.io/default-artifact-repository": LOG_ARCHIVE_KEY}},
            "data": {LOG_ARCHIVE_KEY: text}}


def archiving(spec: dict[str, Any]) -> dict[str, Any]:
    """Return a WorkflowTemplate's spec that has Argo archive its pods' main logs to offhours' log archive."""
    return {**spec, "archiveLogs": True,
            "artifactRepositoryRef": {"configMap": LOG_ARCHIVE_CONFIGMAP, "key": LOG_ARCHIVE_KEY}}


def archive_of(data: Mapping[str, Any] | None, source: str) -> LogArchive:
    """Return the archive a repository ConfigMap's data describes; ArchiveError when it is not offhours' layout."""
    text = (data or {}).get(LOG_ARCHIVE_KEY)
    if not isinstance(text, str) or not text.strip():
        raise ArchiveError(f"{source}: no {LOG_ARCHIVE_KEY!r} key")
    if len(text.encode()) > CONFIG_BYTES:
        raise ArchiveError(f"{source}: its {LOG_ARCHIVE_KEY!r} is over {CONFIG_BYTES} bytes")
    try:
        doc = load_yaml(text, source)
    except InputError as err:
        raise ArchiveError(str(err)) from None
    s3 = doc.get("s3") if isinstance(doc, dict) else None
    if not isinstance(s3, dict) or not isinstance(s3.get("bucket"), str) or not isinstance(s3.get("keyFormat"), str):
        raise ArchiveError(f"{source}: expected s3.bucket and s3.keyFormat")
    key_format = s3["keyFormat"]
    prefix = key_format.removesuffix(KEY_LAYOUT)
    if prefix == key_format or not _PREFIX.match(prefix) or not _BUCKET.match(s3["bucket"]):
        raise ArchiveError(f"{source}: s3.keyFormat {key_format[:120]!r} is not PREFIX{KEY_LAYOUT} "
                           "(render --log-archive writes it so): its logs cannot be found by workflow")
    endpoint = s3.get("endpoint", "")
    return LogArchive(s3["bucket"], prefix, endpoint if isinstance(endpoint, str) else "", s3.get("insecure") is True)


@dataclass(frozen=True)
class Archived:
    """One pod's archived main log: the pod's name, its key, its size and when it was written (unix seconds)."""

    pod: str
    key: str
    size: int
    written: float


class ArchiveReader:
    """Lists and streams one archive's logs (boto3; its credentials from the environment, as the checkpoint store's)."""

    def __init__(self, archive: LogArchive, endpoint_url: str | None, client: Any = None) -> None:
        self.archive, self.endpoint_url = archive, endpoint_url
        self._s3 = client

    @property
    def s3(self) -> Any:
        """The boto3 client, made on first use."""
        if self._s3 is None:
            self._s3 = s3_client(self.endpoint_url, connect_timeout=5, read_timeout=30)
        return self._s3

    def logs(self, namespace: str, workflow: str, created: datetime | None, seconds: float = LIST_SECONDS) -> list[Archived]:
        """Return the workflow's archived pod logs, oldest first: at most MAX_ARCHIVED, listed within `seconds`.

        `created`: the workflow's creation. A log written before it is a namesake's (a deleted workflow of the same
        name has its keys in the same folder, Argo's pod names being made from the workflow's name): never this one's.
        """
        since = None if created is None else math.floor(created.timestamp())  # both clocks count whole seconds
        folder, found, deadline = self.archive.folder(namespace, workflow), [], time.monotonic() + seconds
        try:
            pages = self.s3.get_paginator("list_objects_v2").paginate(
                Bucket=self.archive.bucket, Prefix=folder, PaginationConfig={"PageSize": 100})
            for page in pages:
                for obj in page.get("Contents", []):
                    pod, _, name = str(obj["Key"])[len(folder):].partition("/")
                    written = obj["LastModified"].timestamp()
                    if name == LOG_FILE and pod and (since is None or written >= since):  # <pod>/main.log, its own
                        found.append(Archived(pod, str(obj["Key"]), int(obj.get("Size") or 0), written))
                if len(found) >= MAX_ARCHIVED or time.monotonic() > deadline:
                    break
        except Exception as err:  # noqa: BLE001 - one line naming the archive, never a botocore trace
            raise ArchiveError(f"log archive s3://{self.archive.bucket}/{folder}: {_said(err)}") from None
        return sorted(found[:MAX_ARCHIVED], key=lambda a: (a.written, a.pod))

    def chunks(self, key: str, cap: int, chunk: int) -> Iterator[bytes]:
        """Yield the object's first `cap` + 1 bytes (so a longer one is seen to be longer) in chunks of `chunk` bytes."""
        try:
            answer = self.s3.get_object(Bucket=self.archive.bucket, Key=key, Range=f"bytes=0-{cap}")
        except Exception as err:  # noqa: BLE001
            raise ArchiveError(f"log archive s3://{self.archive.bucket}/{key}: {_said(err)}") from None
        body = answer["Body"]
        try:
            # What is read as it arrives can fail mid-way (a reset, a read timeout): one line, never a trace.
            yield from body.iter_chunks(chunk)
        except Exception as err:  # noqa: BLE001
            raise ArchiveError(f"log archive s3://{self.archive.bucket}/{key}: {_said(err)}") from None
        finally:
            body.close()


def _said(err: BaseException) -> str:
    text = str(err).splitlines()[0] if str(err) else ""
    return f"{type(err).__name__}: {text[:200]}"
