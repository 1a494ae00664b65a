"""The checkpoint store under adversity: a real S3-compatible server (s3proxy) behind a fault-injecting proxy, and a file system.

Real: s3proxy from Maven Central on loopback, boto3 over real sockets, the file system, a saving
process killed with SIGKILL. Faults are injected in front of the server (tests/support/fault_proxy.py)
or, for a full disk, at the one call that writes bytes. Each test's docstring names its fault.
"""

import errno
import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from offhours.scripts.runtime import checkpoint, store_file
from offhours.scripts.runtime.checkpoint import (
    CheckpointError,
    CheckpointStore,
    RetryPolicy,
    StaleWriterError,
    latest_progress_time,
)
from tests.support.fault_proxy import Fault, FaultProxy, fault_proxy
from tests.support.s3_fixture import s3_client as client

FAST = RetryPolicy(connect_timeout=1, read_timeout=1, attempts=3, deadline=20, backoff=0.05)
# What a test of which records count passes: the gate's 5 s read deadline is not what it tests, and a loaded
# machine (parallel test workers) can take longer than that to answer a listing.
LOGIC_TIMEOUT = 60.0



def keys(env: dict[str, str], prefix: str) -> list[str]:
    found = client(env).list_objects_v2(Bucket="lab", Prefix=prefix).get("Contents", [])
    return sorted(obj["Key"] for obj in found if not obj["Key"].endswith("/"))  # s3proxy lists its folders too


@pytest.fixture
def proxy(s3_creds: dict[str, str]) -> Iterator[FaultProxy]:
    with fault_proxy(s3_creds["OFFHOURS_S3_ENDPOINT_URL"]) as running:
        yield running


def blob(step: int, size: int) -> bytes:
    """The checkpoint of `step`: bytes any reader can check against the step alone."""
    seed = hashlib.sha256(str(step).encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


# --- S3: timeouts and bounded retries ---------------------------------------------------------

def test_a_hung_endpoint_fails_after_the_bounded_tries(proxy: FaultProxy) -> None:
    """Fault: the endpoint accepts connections and never answers (a hung S3 gateway)."""
    proxy.faults.append(Fault("hang"))
    store = CheckpointStore("s3://lab/hung/run/job", proxy.url, run_id="run", readonly=True,
                            policy=RetryPolicy(connect_timeout=1, read_timeout=1, attempts=2, backoff=0.05))
    with pytest.raises(CheckpointError, match=r"^s3://lab/hung/run/job/run: listing _log failed \(2 tries"):
        store.latest()
    assert proxy.count("GET") == 2  # one try and one retry, then the job gives up instead of waiting
    with pytest.raises(CheckpointError, match="ReadTimeoutError"):
        latest_progress_time("s3://lab/hung/run", proxy.url, policy=FAST, timeout=1)
    assert store.progress() is None  # advisory: a hung read is no progress, not an exception


def test_503_answers_during_a_save_are_retried(proxy: FaultProxy, s3: dict[str, str]) -> None:
    """Fault: the server answers 503 SlowDown twice to the data upload of a save."""
    proxy.faults.append(Fault("status", "PUT", "/lab/s503/run/job/run/_data/000000000000001-", times=2, status=503))
    store = CheckpointStore("s3://lab/s503/run/job", proxy.url, run_id="run", policy=FAST)
    store.save(1, blob(1, 1000))
    assert proxy.count("PUT", "_data/000000000000001-") == 3
    latest = store.latest()
    assert latest is not None and (latest.step, latest.data) == (1, blob(1, 1000))


def test_a_connection_reset_mid_body_during_resume_is_retried(proxy: FaultProxy) -> None:
    """Fault: the connection is reset after 50 KB of a 300 KB checkpoint download (botocore does not retry a body)."""
    store = CheckpointStore("s3://lab/reset/run/job", proxy.url, run_id="run", policy=FAST)
    store.save(7, blob(7, 300_000))
    proxy.faults.append(Fault("reset", "GET", "_data/000000000000007-", times=1, after_bytes=50_000))
    latest = CheckpointStore("s3://lab/reset/run/job", proxy.url, run_id="run", policy=FAST).latest()
    assert latest is not None and (latest.step, latest.data) == (7, blob(7, 300_000))
    assert proxy.count("GET", "_data/000000000000007-") == 2


def test_an_answer_slower_than_the_read_timeout_is_retried(proxy: FaultProxy) -> None:
    """Fault: the server takes 2.5 s to answer one read of the log's newest entry, past a 1 s read timeout."""
    store = CheckpointStore("s3://lab/slow/run/job", proxy.url, run_id="run", policy=FAST)
    store.save(3, b"three")
    proxy.faults.append(Fault("slow", "GET", "_log/000000000002", times=1, delay=2.5))
    latest = CheckpointStore("s3://lab/slow/run/job", proxy.url, run_id="run", policy=FAST, readonly=True).latest()
    assert latest is not None and latest.data == b"three"
    assert proxy.count("GET", "_log/000000000002") == 2


def test_a_log_entry_that_never_lands_publishes_nothing_and_leaves_nothing_behind(proxy: FaultProxy,
                                                                                s3: dict[str, str]) -> None:
    """Fault: every upload of one save's log entry (its publishing step) gets a 500; deletes fail too."""
    store = CheckpointStore("s3://lab/marker/run/job", proxy.url, run_id="run", policy=FAST)
    store.save(1, b"one")  # entries 1 (the start) and 2
    proxy.faults += [Fault("status", "PUT", "_log/000000000003", status=500), Fault("status", "DELETE", status=500)]
    with pytest.raises(CheckpointError, match=r"creating _log/000000000003 failed \(3 tries"):
        store.save(2, b"two")
    assert [k.split("/")[-1][:15] for k in keys(s3, "marker/run/job/run/_data/")] == ["000000000000001",
                                                                                     "000000000000002"]
    latest = store.latest()
    assert latest is not None and (latest.step, latest.data) == (1, b"one")  # the unpublished bytes are never read
    assert store.progress()["step"] == 1  # nor recorded as progress
    proxy.faults.clear()
    store.save(3, b"three")  # its collection deletes the bytes no entry lists
    assert [k.split("/")[-1][:15] for k in keys(s3, "marker/run/job/run/_data/")] == ["000000000000001",
                                                                                     "000000000000003"]


# --- S3: one run's checkpoints and progress are never another's ----------------------------------

def test_runs_whose_ids_share_a_prefix_never_read_each_others_progress(proxy: FaultProxy) -> None:
    """Fault: runs `a`, `a-1` and `b` nested under base `.../a` share key prefixes on one bucket."""
    CheckpointStore("s3://lab/ckpt/a-1/job", proxy.url, run_id="a-1").save(5, b"a-1")
    CheckpointStore("s3://lab/ckpt/a/b/job", proxy.url, run_id="b").save(6, b"b")
    assert latest_progress_time("s3://lab/ckpt/a", proxy.url, timeout=LOGIC_TIMEOUT) is None
    before = time.time()
    mine = CheckpointStore("s3://lab/ckpt/a/job", proxy.url, run_id="a")
    assert mine.latest() is None
    mine.save(1, b"a")
    at = latest_progress_time("s3://lab/ckpt/a", proxy.url, timeout=LOGIC_TIMEOUT)
    assert at is not None and at >= before
    assert latest_progress_time("s3://lab/ckpt/a-1", proxy.url, timeout=LOGIC_TIMEOUT) is not None
    latest = CheckpointStore("s3://lab/ckpt/a/b/job", proxy.url, run_id="b").latest()
    assert latest is not None and latest.data == b"b"


def test_an_s3_store_writes_exactly_the_keys_its_uri_names(proxy: FaultProxy, s3: dict[str, str]) -> None:
    """Fault: a URI read loosely (a fragment or query dropped, escapes decoded) writing under another run's keys."""
    CheckpointStore("s3://lab/données/ünï/job", proxy.url, run_id="r").save(1, b"x")
    assert [k.rsplit("-", 1)[0] for k in keys(s3, "données/")] == [
        "données/ünï/job/r/_data/000000000000001-000000000001", "données/ünï/job/r/_log/000000000001",
        "données/ünï/job/r/_log/000000000002", "données/ünï/job/r/progress.json"]
    puts = proxy.count("PUT")
    for uri in ("s3://lab/frag/x#y", "s3://lab/frag/x?y=1", "s3://lab/frag/x%2Fy", "s3://lab/frag//x"):
        with pytest.raises(CheckpointError, match=f"^{re.escape(uri)}: "):
            CheckpointStore(uri, proxy.url, run_id="r").save(1, b"x")
    assert keys(s3, "frag") == [] and proxy.count("PUT") == puts


# --- the file system: a full disk, a flaky read ------------------------------------------------

def full_disk(after: int, times: int | None = None) -> Any:
    """A write call that fails with ENOSPC once `after` bytes went through (for `times` calls, or for good)."""
    real = os.write
    state = {"written": 0, "failed": 0}

    def write(fd: int, data: Any) -> int:
        if state["written"] + len(data) > after and (times is None or state["failed"] < times):
            state["failed"] += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        state["written"] += len(data)
        return real(fd, data)
    return write


def leftovers(root: Path) -> list[str]:
    """The temporary files under a store's place (what crashed or failed writes left)."""
    return sorted(p.name for p in root.rglob("*") if p.name.startswith(store_file.TMP))


def data_steps(root: Path) -> list[int]:
    """The steps of the data objects a file store holds (published or not)."""
    return sorted(int(p.name[:15]) for p in (root / "_data").iterdir() if not p.name.startswith(store_file.TMP))


def test_a_full_disk_during_a_save_leaves_the_last_checkpoint_and_no_debris(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault: the disk fills up 2.5 MB into a 4 MB checkpoint, on every try (ENOSPC at the write call)."""
    store = CheckpointStore(f"file://{tmp_path}/run/job", run_id="run", policy=FAST)
    store.save(1, blob(1, 1000))
    monkeypatch.setattr(store_file, "_write_fd", full_disk(after=2_500_000))
    with pytest.raises(CheckpointError, match=r"writing _data/000000000000002-\S+ failed \(3 tries.*No space left"):
        store.save(2, blob(2, 4_000_000))
    assert leftovers(tmp_path / "run" / "job") == []
    assert data_steps(tmp_path / "run" / "job" / "run") == [1]
    latest = store.latest()
    assert latest is not None and (latest.step, latest.data) == (1, blob(1, 1000))
    assert store.progress()["step"] == 1


def test_a_disk_full_for_a_moment_is_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault: one ENOSPC midway through a save (space freed right after), then the disk takes writes again."""
    monkeypatch.setattr(store_file, "_write_fd", full_disk(after=1_500_000, times=1))
    store = CheckpointStore(f"file://{tmp_path}/run/job", run_id="run", policy=FAST)
    store.save(4, blob(4, 3_000_000))
    latest = store.latest()
    assert latest is not None and (latest.step, latest.data) == (4, blob(4, 3_000_000))
    assert leftovers(tmp_path / "run" / "job") == [] and data_steps(tmp_path / "run" / "job" / "run") == [4]


def test_an_io_error_while_resuming_is_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault: EIO on the first read of the checkpoint's data (a flaky network volume) during resume."""
    store = CheckpointStore(f"file://{tmp_path}/run/job", run_id="run", policy=FAST)
    store.save(9, b"nine")
    real, failed = store_file._read, []

    def flaky(path: Path) -> bytes | None:
        if path.parent.name == "_data" and not failed:
            failed.append(path)
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real(path)
    monkeypatch.setattr(store_file, "_read", flaky)
    latest = store.latest()
    assert failed and latest is not None and latest.data == b"nine"


def test_a_mistake_no_retry_can_fix_fails_at_once_naming_the_store(tmp_path: Path) -> None:
    """Fault: the checkpoint folder's parent is a file (a wrong mount or a typo): one clear error after one try."""
    (tmp_path / "file").write_text("not a folder")
    store = CheckpointStore(f"file://{tmp_path}/file/run/job", run_id="r", policy=FAST)
    with pytest.raises(CheckpointError, match=rf"^file://{tmp_path}/file/run/job/r: creating _log/000000000001 "
                                              r"failed \(1 try.*(NotADirectory|FileExists)"):
        store.save(1, b"x")
    assert (tmp_path / "file").read_text() == "not a folder"


# --- SIGKILL of a saving process, on both stores ---------------------------------------------------

SAVER = """
import hashlib, sys
from offhours.scripts.runtime.checkpoint import CheckpointStore, RetryPolicy
store = CheckpointStore(sys.argv[1], sys.argv[2] or None, run_id="run")
size = int(sys.argv[3])
latest = store.latest()
step = latest.step if latest else 0
def blob(step):
    seed = hashlib.sha256(str(step).encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]
while True:
    step += 1
    print("saving", step, flush=True)
    store.save(step, blob(step))
"""


@pytest.mark.parametrize("scheme", ["file", "s3"])
def test_sigkill_at_any_point_of_a_save_leaves_only_whole_checkpoints(scheme: str, tmp_path: Path,
                                                                      request: pytest.FixtureRequest,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault: the saving process is killed with SIGKILL at random moments inside saves, ten times."""
    if scheme == "s3":
        env = request.getfixturevalue("s3_creds")
        uri, endpoint, size = "s3://lab/killed/run/job", env["OFFHOURS_S3_ENDPOINT_URL"], 400_000
    else:
        env, uri, endpoint, size = dict(os.environ), f"file://{tmp_path}/run/job", "", 4_000_000
    rng = random.Random(11)
    steps_seen = []
    for _ in range(10):
        proc = subprocess.Popen([sys.executable, "-c", SAVER, uri, endpoint, str(size)], env=env,
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        for _ in range(rng.randint(1, 3)):  # let some saves finish, then kill inside the next one
            line = proc.stdout.readline()
            assert line.startswith("saving"), line
        time.sleep(rng.uniform(0, 0.05))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        latest = CheckpointStore(uri, endpoint or None, run_id="run", policy=FAST, readonly=True).latest()
        if latest is not None:
            assert latest.data == blob(latest.step, size)  # whole and the step's own: never a torn one
            steps_seen.append(latest.step)
    assert steps_seen and steps_seen == sorted(steps_seen)  # every restart resumed; none went back
    final = CheckpointStore(uri, endpoint or None, run_id="run", policy=FAST)
    final.save(10_000, b"last")  # a start sweeps what killed writers left; its save collects the unpublished
    if scheme == "file":
        place = tmp_path / "run" / "job" / "run"
        assert leftovers(place) == []
        kept = sorted(p.name[:15] for p in (place / "_data").iterdir())
    else:
        kept = sorted(k.split("/")[-1][:15] for k in keys(env, "killed/run/job/run/_data/"))
    assert len(kept) == 2 and kept[-1] == f"{10_000:015d}"  # the newest and one fallback, nothing else


# Closes the class "two processes write under one epoch": a store forked after it took its epoch (an
# asynchronous checkpoint writer, a DataLoader worker) takes its own in the child, so the older writer is
# fenced instead of both publishing while each one's collection deletes the other's unpublished bytes.
def test_a_store_forked_after_its_start_takes_its_own_epoch_and_no_published_bytes_are_lost(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_publish = checkpoint.CheckpointStore._publish
    data, log, lost = tmp_path / "run-a" / "_data", tmp_path / "run-a" / "_log", tmp_path / "lost"

    def checked(self: CheckpointStore, entry: Any) -> bool:
        ok = real_publish(self, entry)
        if ok and entry.kind == "save" and not (data / entry.versions[-1].name).exists():
            with open(lost, "a") as out:
                out.write(f"entry {entry.seq} published {entry.versions[-1].name}, already deleted\n")
        return ok

    monkeypatch.setattr(checkpoint.CheckpointStore, "_publish", checked)
    store = CheckpointStore(f"file://{tmp_path}", run_id="run-a", keep=1)
    store.latest()  # takes epoch 1 in this process
    pid = os.fork()
    child = pid == 0
    try:
        for i in range(100):
            try:
                store.save(i * 2 + child, b"x" * 4096)
            except (StaleWriterError, CheckpointError):  # the fenced writer is refused: that is the point
                pass
    finally:
        if child:
            os._exit(0)
    os.waitpid(pid, 0)
    entries = sorted(p.name for p in log.iterdir() if not p.name.startswith("."))
    head = json.loads((log / entries[-1]).read_text())
    assert [v["name"] for v in head["versions"] if not (data / v["name"]).exists()] == []
    assert not lost.exists(), lost.read_text()[:600]
    epochs = {json.loads((log / name).read_text())["epoch"] for name in entries}
    assert len(epochs) >= 2  # the child took its own epoch
