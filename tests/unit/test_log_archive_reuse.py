"""A workflow name reused after its workflow was deleted: the archive keeps the old one's logs under the same folder.

Argo's archive keys are `<prefix>/<namespace>/<workflow>/<pod>/main.log`, and Argo's pod names are derived from the
workflow's name and node, so a later workflow of the same name (a rerun submitted under a fixed name, anyone's
workflow named as a deleted one) has the earlier one's keys beside its own. Only a log written once this workflow
existed is its: one written before its creation is another run's and is never shown as this one's.
"""

from datetime import datetime, timedelta, timezone
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from offhours.scripts.cluster.log_archive import ArchiveReader, LogArchive

CREATED = datetime(2026, 12, 3, 12, 0, 0, tzinfo=timezone.utc)
FOLDER = "logs/research/train-z-abcde/"


class _Pages:
    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.objects = objects

    def paginate(self, Bucket: str, Prefix: str, PaginationConfig: Any) -> Any:  # noqa: N803 - boto3's names
        assert Prefix == FOLDER
        return [{"Contents": self.objects[i:i + 100]} for i in range(0, len(self.objects), 100)] or [{}]


class _S3:
    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.objects = objects

    def get_paginator(self, name: str) -> _Pages:
        return _Pages(self.objects)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(-86400, 86400), st.booleans()), max_size=30, unique_by=lambda t: t[0]))
def test_only_logs_written_since_the_workflow_was_created_are_its(offsets: list[tuple[int, bool]]) -> None:
    objects = [{"Key": f"{FOLDER}train-z-abcde-job-{i}/main.log", "Size": 10,
                "LastModified": CREATED + timedelta(seconds=s)} for i, (s, _) in enumerate(offsets)]
    reader = ArchiveReader(LogArchive("lab-logs", "logs"), None, client=_S3(objects))
    found = reader.logs("research", "train-z-abcde", created=CREATED)
    expected = {f"train-z-abcde-job-{i}" for i, (s, _) in enumerate(offsets) if s >= 0}
    assert {a.pod for a in found} == expected


def test_a_deleted_namesake_s_log_is_not_this_workflow_s() -> None:
    old = {"Key": f"{FOLDER}train-z-abcde-job-1/main.log", "Size": 10, "LastModified": CREATED - timedelta(hours=1)}
    new = {"Key": f"{FOLDER}train-z-abcde-job-2/main.log", "Size": 10, "LastModified": CREATED + timedelta(minutes=5)}
    reader = ArchiveReader(LogArchive("lab-logs", "logs"), None, client=_S3([old, new]))
    assert [a.pod for a in reader.logs("research", "train-z-abcde", created=CREATED)] == ["train-z-abcde-job-2"]


class _BrokenBody:
    """An archived log's body whose connection drops after the first chunk (a reset, a read timeout)."""

    closed = False

    def iter_chunks(self, size: int) -> Any:
        yield b"first part\n"
        raise ConnectionResetError("connection reset by peer")

    def close(self) -> None:
        self.closed = True


class _DroppingS3(_S3):
    def __init__(self) -> None:
        super().__init__([])
        self.body = _BrokenBody()

    def get_object(self, **_: Any) -> dict[str, Any]:
        return {"Body": self.body}


def test_a_log_body_dropped_mid_stream_is_one_archive_error() -> None:
    import pytest

    from offhours.scripts.cluster.log_archive import ArchiveError

    s3 = _DroppingS3()
    reader = ArchiveReader(LogArchive("lab-logs", "logs"), None, client=s3)
    got = []
    with pytest.raises(ArchiveError, match="ConnectionResetError: connection reset by peer"):
        for chunk in reader.chunks(f"{FOLDER}p/main.log", 100, 10):
            got.append(chunk)
    assert got == [b"first part\n"] and s3.body.closed
