"""The progress read (`latest_progress_time`: the gate's victim choice, `why`'s last checkpoint) is bounded as a whole.

Class: an advisory read whose cost a tenant sets (a recursive listing of every object under a run, data included; a
planted progress.json of any size read whole; one listing bound per call but none for the find). Mechanism:
store_s3 `find` lists with a Delimiter one folder at a time, never into the store's `_log`/`_data`, caps the folders,
the objects and each GET's bytes, and holds one deadline for the whole find. Real: s3proxy behind a fault proxy.
"""

import json
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import pytest

from offhours.scripts.runtime.checkpoint import CheckpointError, CheckpointStore, RetryPolicy, latest_progress_time
from tests.support.fault_proxy import Fault, FaultProxy, fault_proxy
from tests.support.s3_fixture import s3_client as client

FAST = RetryPolicy(connect_timeout=1, read_timeout=1, attempts=2, deadline=20, backoff=0.05)


@pytest.fixture
def proxy(s3_creds: dict[str, str]) -> Iterator[FaultProxy]:
    with fault_proxy(s3_creds["OFFHOURS_S3_ENDPOINT_URL"]) as running:
        yield running


def listings(proxy: FaultProxy) -> list[str]:
    """The prefix of every listing the proxy saw, decoded, with whether it asked for a Delimiter."""
    out = []
    for method, path in proxy.seen:
        if method == "GET" and "list-type=2" in path:
            query = dict(part.split("=", 1) for part in path.split("?", 1)[1].split("&") if "=" in part)
            out.append(f"{unquote(query.get('prefix', ''))}|{'delimited' if 'delimiter' in query else 'recursive'}")
    return out


def test_the_progress_read_lists_one_folder_at_a_time_and_never_the_data(proxy: FaultProxy) -> None:
    store = CheckpointStore("s3://lab/many/job", proxy.url, run_id="run", policy=FAST, keep=5)
    for step in range(1, 6):
        store.save(step, b"x" * 100)
    before = time.time() - 1
    proxy.seen.clear()
    at = latest_progress_time("s3://lab/many/job/run", proxy.url, policy=FAST)
    assert at is not None and at >= before
    seen = listings(proxy)
    assert seen and all(entry.endswith("|delimited") for entry in seen), seen
    assert not any("_data" in entry or "_log" in entry for entry in seen), seen


def test_a_planted_progress_object_past_the_byte_cap_is_no_progress(proxy: FaultProxy, s3: dict[str, str]) -> None:
    """A 5 MB progress.json (a well-formed record, padded) in a folder of the run is no record: it is not read whole."""
    CheckpointStore("s3://lab/planted/job", proxy.url, run_id="run", policy=FAST).save(1, b"x")
    mine = latest_progress_time("s3://lab/planted/job/run", proxy.url, policy=FAST)
    record = json.dumps({"run": "run", "store": "s3://lab/planted/job/run/deep", "time": time.time()})
    client(s3).put_object(Bucket="lab", Key="planted/job/run/deep/progress.json",
                          Body=record.encode() + b" " * 5_000_000)
    assert latest_progress_time("s3://lab/planted/job/run", proxy.url, policy=FAST) == mine


def test_the_whole_find_has_one_deadline_however_many_folders(proxy: FaultProxy, s3: dict[str, str]) -> None:
    """Each listing answers within its own timeout; together they pass the find's deadline, which stops it."""
    for i in range(6):
        client(s3).put_object(Bucket="lab", Key=f"folders/job/run/f{i}/note", Body=b"x")
    proxy.faults.append(Fault("slow", "GET", "list-type=2", delay=0.4))
    # Which bound speaks first depends on the machine's load: the find's deadline, or (a listing slowed past it)
    # the call's own timeout. Either way the find stops before every folder is listed, with one named error.
    with pytest.raises(CheckpointError, match=r"finding progress\.json (took more than 1 s|.*failed \(\d+ tr)"):
        latest_progress_time("s3://lab/folders/job/run", proxy.url, policy=FAST, timeout=1)
    assert len(listings(proxy)) < 7  # stopped at the deadline, before every folder was listed


def test_the_file_store_find_has_the_same_bounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The file store's find walks at most PROGRESS_MAX_FOLDERS folders and stops at its one deadline."""
    from offhours.scripts.runtime import store_file

    CheckpointStore(f"file://{tmp_path}/job", run_id="run", policy=FAST).save(1, b"x")
    for i in range(30):
        (tmp_path / "job" / "run" / f"f{i:02d}").mkdir()
    assert latest_progress_time(f"file://{tmp_path}/job/run", policy=FAST) is not None
    monkeypatch.setattr(store_file, "PROGRESS_MAX_FOLDERS", 5)  # the root's record is in the first folder walked
    walked: list[str] = []
    real_walk = store_file.os.walk

    def counting_walk(top: str) -> Iterator[tuple[str, list[str], list[str]]]:
        for entry in real_walk(top):
            walked.append(entry[0])
            yield entry
    monkeypatch.setattr(store_file.os, "walk", counting_walk)
    assert latest_progress_time(f"file://{tmp_path}/job/run", policy=FAST) is not None
    assert len(walked) <= 6, walked
    ticks = iter(range(0, 10_000, 2))  # a clock that moves 2 s per look: the 1 s deadline passes inside the walk
    monkeypatch.setattr(store_file.time, "monotonic", lambda: float(next(ticks)))
    with pytest.raises(CheckpointError, match="finding progress.json took more than 1 s"):
        latest_progress_time(f"file://{tmp_path}/job/run", policy=FAST, timeout=1)


def test_an_s3_find_cut_at_its_folder_bound_says_so(proxy: FaultProxy, s3: dict[str, str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """What `why` and the job page show: a read stopped at the folder bound is said, never a whole read's answer."""
    from offhours.scripts.runtime import store_s3
    from offhours.scripts.runtime.checkpoint import latest_progress

    store = CheckpointStore("s3://lab/cut/job", proxy.url, run_id="run", policy=FAST)
    store.save(1, b"x")
    assert latest_progress("s3://lab/cut/job/run", proxy.url, policy=FAST)[1] is None
    monkeypatch.setattr(store_s3, "PROGRESS_MAX_FOLDERS", 1)
    store_other = CheckpointStore("s3://lab/cut/job/run", proxy.url, run_id="step-b", policy=FAST)
    store_other.save(1, b"x")
    _, cut = latest_progress("s3://lab/cut/job/run", proxy.url, policy=FAST)
    assert cut is not None and "not read to the end" in cut
