"""Crash injection and fencing for the checkpoint store, on a file system and on a real S3 server (s3proxy).

Real: a writing process killed with SIGKILL, the file system, s3proxy 4.0.0 from Maven Central on
loopback (and 2.4.1, which ignores conditional puts, for the refusal), boto3 over real sockets.

The invariants, in words:
- Crash consistency: kill the writer at any point between two storage changes (every write, fsync,
  link, rename and delete of a start, a save and a collection): afterwards `latest()` returns a whole
  checkpoint (its bytes exactly those saved for its step) at least as new as the newest save that had
  returned before the kill; never an older one, never a torn one, never nothing once something was saved.
- Recovery: the next start of the run sweeps what the killed writer left and its first save collects
  the unpublished bytes: what remains is exactly the versions kept, and no temporary file.
- Fencing: once a newer start of the run has taken the store, no save of an older writer succeeds:
  in the log, every save entry carries the epoch of the newest start before it, and every save that
  returned success is in the log (a refused writer gets StaleWriterError, which says so).
- Capability: a server that takes a second create-only PUT of one key is refused before anything is
  written (measured: s3proxy 2.4.1 takes it; 4.0.0 answers 412).
"""

import hashlib
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from offhours.scripts.runtime import store_file
from offhours.scripts.runtime.checkpoint import CheckpointError, CheckpointStore, RetryPolicy, StaleWriterError
from offhours.scripts.runtime.checkpoint_log import LOG, LOG_NAME, decode
from tests.support.s3_fixture import IGNORES_CONDITIONAL_PUTS, running_s3proxy, s3_env, with_credentials
from tests.support.s3_fixture import s3_client as client

FAST = RetryPolicy(connect_timeout=2, read_timeout=5, attempts=3, deadline=30, backoff=0.05)


def payload(step: int, tag: str, size: int) -> bytes:
    """The bytes of one save: any reader can check them against the step and tag alone."""
    seed = hashlib.sha256(f"{step}-{tag}".encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]



# --- what s3proxy does with conditional puts (measured) ----------------------------------------------

def test_s3proxy_2_4_1_ignores_conditional_puts_and_the_store_refuses_it(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault: an S3 server that takes a second PUT with If-None-Match: * (and a PUT with a wrong If-Match)."""
    with running_s3proxy(tmp_path, IGNORES_CONDITIONAL_PUTS) as endpoint:
        env = with_credentials(s3_env(endpoint), monkeypatch)
        s3 = client(env)
        s3.create_bucket(Bucket="lab")
        s3.put_object(Bucket="lab", Key="k", Body=b"1", IfNoneMatch="*")
        s3.put_object(Bucket="lab", Key="k", Body=b"2", IfNoneMatch="*")  # taken: the condition is ignored
        s3.put_object(Bucket="lab", Key="k", Body=b"3", IfMatch='"not-its-etag"')  # taken too
        assert s3.get_object(Bucket="lab", Key="k")["Body"].read() == b"3"
        store = CheckpointStore("s3://lab/ckpt", endpoint, run_id="r", policy=FAST)
        with pytest.raises(CheckpointError, match=r"^s3://lab/ckpt/r: the S3 server at .* ignores conditional puts "
                                                  r"\(a second PUT with If-None-Match: \* of one key succeeded\)"):
            store.save(1, b"x")
        with pytest.raises(CheckpointError, match="ignores conditional puts"):
            store.latest()
        assert s3.list_objects_v2(Bucket="lab", Prefix="ckpt/").get("KeyCount") == 0  # nothing written


def test_s3proxy_4_honours_conditional_puts(s3: dict[str, str]) -> None:
    """The server the other tests use: a second create-only PUT and a PUT with a stale If-Match get 412."""
    from botocore.exceptions import ClientError

    c = client(s3)
    c.put_object(Bucket="lab", Key="cond/k", Body=b"1", IfNoneMatch="*")
    for condition in ({"IfNoneMatch": "*"}, {"IfMatch": '"not-its-etag"'}):
        with pytest.raises(ClientError, match="PreconditionFailed"):
            c.put_object(Bucket="lab", Key="cond/k", Body=b"2", **condition)
    assert c.get_object(Bucket="lab", Key="cond/k")["Body"].read() == b"1"


# --- SIGKILL at every point of a start, a save and a collection ----------------------------------------

WRITER = """
import hashlib, os, signal, sys
from offhours.scripts.runtime import store_points
from offhours.scripts.runtime.checkpoint import CheckpointStore, RetryPolicy

uri, endpoint, kill_at, size = sys.argv[1], sys.argv[2] or None, int(sys.argv[3]), int(sys.argv[4])
count = 0

def payload(step, tag):
    seed = hashlib.sha256(f"{step}-{tag}".encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]

def hook(label):
    global count
    count += 1
    if count == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)

store_points.hook = hook
store = CheckpointStore(uri, endpoint, run_id="run", keep=2,
                        policy=RetryPolicy(connect_timeout=2, read_timeout=5, attempts=3, backoff=0.05))
store.latest()
for step, tag in SAVES:
    store.save(step, payload(step, tag))
    print("saved", step, tag, flush=True)
print("points", count, flush=True)
"""
BEFORE = [(1, "setup"), (2, "setup")]  # saved by an earlier writer of the run
SAVES = [(3, "a"), (3, "b"), (4, "a")]  # then: a step, a new version of that step, the next step (each collects)
ORDER = BEFORE + SAVES


def run_writer(uri: str, endpoint: str, kill_at: int, size: int, env: dict[str, str]) -> tuple[int, list[str]]:
    script = WRITER.replace("SAVES", repr(SAVES))
    proc = subprocess.run([sys.executable, "-c", script, uri, endpoint, str(kill_at), str(size)], env=env,
                          capture_output=True, text=True, timeout=120)
    if proc.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(f"writer failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc.returncode, proc.stdout.splitlines()


def check_after_crash(uri: str, endpoint: str | None, size: int, said: list[str], kill_at: int) -> None:
    done = [(int(line.split()[1]), line.split()[2]) for line in said if line.startswith("saved")]
    before = ORDER.index(done[-1] if done else BEFORE[-1])
    latest = CheckpointStore(uri, endpoint, run_id="run", policy=FAST, readonly=True).latest()
    assert latest is not None, f"kill at point {kill_at}: nothing to resume from"
    candidates = [i for i, (step, tag) in enumerate(ORDER) if step == latest.step
                  and payload(step, tag, size) == latest.data]
    assert candidates, f"kill at point {kill_at}: step {latest.step} is torn or not any save's bytes"
    assert max(candidates) >= before, f"kill at point {kill_at}: went back from {ORDER[before]} to step {latest.step}"


@pytest.mark.parametrize("scheme", ["file", "s3"])
def test_sigkill_at_every_point_of_a_save_and_a_collection(scheme: str, tmp_path: Path,
                                                           request: pytest.FixtureRequest) -> None:
    """Fault: the writer is killed with SIGKILL at point k of its start, saves and collections, for every k."""
    if scheme == "s3":
        env = request.getfixturevalue("s3_creds")
        endpoint, size = env["OFFHOURS_S3_ENDPOINT_URL"], 20_000

        def place(k: int) -> str:
            return f"s3://lab/crash/k{k}"
    else:
        env, endpoint, size = dict(os.environ), "", 200_000

        def place(k: int) -> str:
            return f"file://{tmp_path}/k{k}"

    def prepared(k: int) -> str:
        uri = place(k)
        first = CheckpointStore(uri, endpoint or None, run_id="run", policy=FAST, keep=2)
        for step, tag in BEFORE:
            first.save(step, payload(step, tag, size))
        return uri

    code, said = run_writer(prepared(0), endpoint, 0, size, env)
    assert code == 0 and said[-1].startswith("points ")
    points = int(said[-1].split()[1])
    assert points >= 20  # a start, three saves, their collections: many points, all visited below
    for k in range(1, points + 1):
        uri = prepared(k)
        code, said = run_writer(uri, endpoint, k, size, env)
        assert code == -signal.SIGKILL, f"point {k} of {points} was never reached"
        check_after_crash(uri, endpoint or None, size, said, k)
        recovery = CheckpointStore(uri, endpoint or None, run_id="run", policy=FAST, keep=2)
        recovery.latest()
        recovery.save(9, payload(9, "r", size))
        latest = recovery.latest()
        assert latest is not None and (latest.step, latest.data) == (9, payload(9, "r", size))
        if scheme == "file":
            root = Path(uri[len("file://"):]) / "run"
            assert [p.name for p in root.rglob(f"{store_file.TMP}*")] == [], f"point {k}: debris left"
            stored = sorted(p.name for p in (root / "_data").iterdir())
        else:
            found = client(env).list_objects_v2(Bucket="lab", Prefix=f"crash/k{k}/run/_data/").get("Contents", [])
            stored = sorted(o["Key"].rsplit("/", 1)[-1] for o in found)
        assert len(stored) == 2 and stored[-1].startswith(f"{9:015d}-"), f"point {k}: {stored}"


# --- two writers of one run never both succeed ----------------------------------------------------------

def log_entries(uri: str, endpoint: str | None) -> list[Any]:
    store = CheckpointStore(uri, endpoint, run_id="run", policy=FAST, readonly=True)
    backend = store._backend
    seqs = sorted(int(m.group(1)) for n in backend.names(LOG) if (m := LOG_NAME.match(n)))
    assert seqs == list(range(1, len(seqs) + 1))  # no gaps: every number taken exactly once
    return [decode(backend.read(f"{LOG}/{seq:012d}"), seq, "run") for seq in seqs]


@pytest.mark.parametrize("scheme", ["file", "s3"])
def test_racing_starts_and_saves_never_let_a_stale_writer_succeed(scheme: str, tmp_path: Path,
                                                                  request: pytest.FixtureRequest) -> None:
    """Fault: four starts of one run (a resubmit, retries, a resumed copy) racing, each saving as it goes."""
    if scheme == "s3":
        env = request.getfixturevalue("s3_creds")
        endpoint: str | None = env["OFFHOURS_S3_ENDPOINT_URL"]
        uri = "s3://lab/race"
    else:
        endpoint, uri = None, f"file://{tmp_path}/race"
    succeeded: list[tuple[int, int]] = []  # (epoch, step) of every save that returned
    refused: list[tuple[int, str]] = []
    lock = threading.Lock()

    def writer(wid: int) -> None:
        store = CheckpointStore(uri, endpoint, run_id="run", policy=FAST)
        store.latest()
        assert store.epoch is not None
        for i in range(6):
            step = wid * 100 + i
            try:
                store.save(step, payload(step, "w", 3000))
            except StaleWriterError as err:
                with lock:
                    refused.append((store.epoch, str(err)))
                return
            with lock:
                succeeded.append((store.epoch, step))

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    entries = log_entries(uri, endpoint)
    starts = [e.epoch for e in entries if e.kind == "start"]
    assert sorted(starts) == starts == list(range(1, 5))  # four starts, four epochs, each taken once
    current = 0
    in_log = set()
    for entry in entries:
        if entry.kind == "start":
            current = entry.epoch
        else:  # a save: only ever from the writer holding the newest start's epoch
            assert entry.epoch == current, f"entry {entry.seq}: a save of epoch {entry.epoch} after epoch {current}"
            in_log.add((entry.epoch, entry.versions[-1].step))
    assert set(succeeded) == in_log  # every save that returned is published; nothing else is
    for epoch, message in refused:
        assert epoch < 4 and f"holds epoch {epoch} of run 'run'" in message and "newer start" in message
    newest = max(entries, key=lambda e: e.seq)
    latest = CheckpointStore(uri, endpoint, run_id="run", policy=FAST, readonly=True).latest()
    if newest.versions:
        assert latest is not None and latest.step == newest.versions[-1].step
