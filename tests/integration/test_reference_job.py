"""The preemptible contract, proven: SIGTERM at random points, restart, bit-identical result.

Real: the reference job as a separate process, POSIX signals, the file system, and a real
S3-compatible server (s3proxy) on loopback for the s3:// store.
"""

import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from offhours.scripts.runtime.checkpoint import PREEMPTED_EXIT_CODE, CheckpointError, CheckpointStore

JOB = Path(__file__).resolve().parents[2] / "examples" / "reference-job" / "train.py"
STEPS, EVERY = 1500, 100


class Job:
    """The reference job as a process, with its stdout read line by line so a test can wait on what it says."""

    def __init__(self, uri: str, log: Path, out: Path, env: dict[str, str] | None = None) -> None:
        self.log = log
        self.proc = subprocess.Popen([sys.executable, str(JOB), "--steps", str(STEPS), "--every", str(EVERY),
                                      "--step-seconds", "0.002", "--log", str(log), "--out", str(out)],
                                     env={"OFFHOURS_RUN_ID": "ref", **(env or os.environ), "OFFHOURS_CHECKPOINT_URI": uri},
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: "queue.Queue[str | None]" = queue.Queue()
        self.said: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def expect(self, prefix: str, timeout: float = 60) -> str:
        """Wait for the job to print a line starting with `prefix`; return it."""
        deadline = time.monotonic() + timeout
        while True:
            line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            if line is None:
                raise AssertionError(f"job exited ({self.proc.wait()}) before saying {prefix!r}: {self.said}")
            self.said.append(line)
            if line.startswith(prefix):
                return line

    def wait_for_step(self, step: int, timeout: float = 60) -> None:
        """Wait until the job has executed `step` (it appends each executed step to its log)."""
        deadline = time.monotonic() + timeout
        while not (self.log.exists() and int((self.log.read_text().split() or ["-1"])[-1]) >= step):
            assert self.proc.poll() is None, f"job exited ({self.proc.returncode}) before step {step}"
            assert time.monotonic() < deadline, f"job did not reach step {step} in {timeout} s"
            time.sleep(0.005)  # polling a condition, not timing one

    def wait(self, timeout: float) -> int:
        code = self.proc.wait(timeout=timeout)
        while self.lines.get(timeout=timeout) is not None:
            pass
        return code


def run_to_end(uri: str, tmp: Path, env: dict[str, str] | None = None) -> np.ndarray:
    job = Job(uri, tmp / "ref.log", tmp / "ref.npy", env)
    assert job.wait(timeout=120) == 0
    return np.load(tmp / "ref.npy")


def run_with_stops(uri: str, tmp: Path, stops: int, sig: int, seed: int, env: dict[str, str] | None = None,
                   at: str = "step") -> tuple[np.ndarray, list[int], list[int]]:
    """Run, stopping with `sig` `stops` times; return final weights, executed steps, exit codes.

    `at="step"`: each stop comes once the job is ready and has executed a random step (spread over
    the run, each at least 300 steps before the end so the job is still running); `at="start"`:
    as soon as the job's first line runs, before its handler is installed.
    """
    rng = random.Random(seed)
    targets = sorted(rng.sample(range(1, STEPS - 300), stops))
    log, out, codes = tmp / "steps.log", tmp / "out.npy", []
    for target in targets:
        job = Job(uri, log, out, env)
        if at == "start":
            job.expect("started")
        else:
            job.expect("ready")
            job.wait_for_step(max(target, int(job.expect("start at step").split()[3])))
        job.proc.send_signal(sig)
        codes.append(job.wait(timeout=60))
    job = Job(uri, log, out, env)
    codes.append(job.wait(timeout=120))
    executed = [int(x) for x in log.read_text().split()]
    return np.load(out), executed, codes


def redone(executed: list[int]) -> list[int]:
    """Steps executed more than once, per restart: how much work each stop cost."""
    costs, seen_max = [], -1
    for prev, step in zip(executed, executed[1:]):
        if step <= prev:
            costs.append(prev - step + 1)
        seen_max = max(seen_max, step)
    return costs


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> np.ndarray:
    tmp = tmp_path_factory.mktemp("reference")
    return run_to_end(f"file://{tmp}/ckpt", tmp)


def test_sigterm_at_random_points_loses_no_work_and_ends_bit_identical(reference: np.ndarray, tmp_path: Path) -> None:
    weights, executed, codes = run_with_stops(f"file://{tmp_path}/ckpt", tmp_path, stops=4, sig=signal.SIGTERM, seed=1)
    assert codes == [PREEMPTED_EXIT_CODE] * 4 + [0]
    assert weights.tobytes() == reference.tobytes()
    assert sorted(set(executed)) == list(range(STEPS))
    assert redone(executed) == []  # SIGTERM: the step in flight finishes and is checkpointed


def test_sigterm_during_start_up_is_a_preemption_too(reference: np.ndarray, tmp_path: Path) -> None:
    # Sent on the job's first line, while it still imports: held, then taken by the handler.
    weights, executed, codes = run_with_stops(f"file://{tmp_path}/ckpt", tmp_path, stops=2, sig=signal.SIGTERM, seed=4,
                                              at="start")
    assert codes == [PREEMPTED_EXIT_CODE, PREEMPTED_EXIT_CODE, 0]
    assert weights.tobytes() == reference.tobytes()
    assert sorted(set(executed)) == list(range(STEPS)) and redone(executed) == []


def test_sigkill_redoes_at_most_one_checkpoint_interval(reference: np.ndarray, tmp_path: Path) -> None:
    weights, executed, codes = run_with_stops(f"file://{tmp_path}/ckpt", tmp_path, stops=3, sig=signal.SIGKILL, seed=2)
    assert codes == [-signal.SIGKILL] * 3 + [0]
    assert weights.tobytes() == reference.tobytes()
    assert all(0 < cost <= EVERY for cost in redone(executed)), redone(executed)


def test_corrupt_or_half_written_checkpoints_are_skipped(tmp_path: Path) -> None:
    """Fault: bit rot in the newest checkpoint's bytes, and a half-written file a killed save left beside it."""
    store = CheckpointStore(f"file://{tmp_path}/ckpt", run_id="r")
    store.save(100, b"good-100")
    store.save(200, b"good-200")
    data = tmp_path / "ckpt" / "r" / "_data"
    (data / ".offhours-tmp-000000000001-half").write_bytes(b"half written")
    [newest] = [p for p in data.iterdir() if p.name.startswith("000000000000200-")]
    newest.write_bytes(b"bit rot!")
    latest = store.latest()
    assert latest is not None and (latest.step, latest.data) == (100, b"good-100")  # the older version kept
    assert store.progress()["step"] == 200


def test_a_new_run_given_a_finished_runs_bare_uri_does_all_its_work(reference: np.ndarray, tmp_path: Path) -> None:
    """Fault (seen): one's own template gives the job step a bare checkpoint URI; run 1 finishes there, and run 2,
    given the same URI, read run 1's progress, said "start at step 1500 of 1500" and succeeded without training."""
    bare = f"file://{tmp_path}/ckpt"
    first = Job(bare, tmp_path / "first.log", tmp_path / "first.npy", {**os.environ, "OFFHOURS_RUN_ID": "first"})
    assert first.wait(timeout=120) == 0
    second = Job(bare, tmp_path / "second.log", tmp_path / "second.npy", {**os.environ, "OFFHOURS_RUN_ID": "second"})
    assert second.expect("start at step") == f"start at step 0 of {STEPS}"
    assert second.wait(timeout=120) == 0
    executed = [int(line) for line in (tmp_path / "second.log").read_text().split()]
    assert executed == list(range(STEPS))  # it did the whole run's work itself
    assert np.load(tmp_path / "second.npy").tobytes() == reference.tobytes()


def test_store_refuses_unusable_uris() -> None:
    with pytest.raises(CheckpointError, match="must be file:// or s3://"):
        CheckpointStore("gs://bucket/run", run_id="r")
    with pytest.raises(CheckpointError, match="needs a bucket"):
        CheckpointStore("s3:///run", run_id="r")
    with pytest.raises(CheckpointError, match="OFFHOURS_CHECKPOINT_URI is not set"):
        CheckpointStore.from_env({})


def test_s3_store_survives_sigterms_bit_identical(reference: np.ndarray, s3: dict[str, str], tmp_path: Path) -> None:
    weights, executed, codes = run_with_stops("s3://lab/runs/ref-1/job", tmp_path, stops=3, sig=signal.SIGTERM,
                                              seed=3, env=s3)
    assert codes == [PREEMPTED_EXIT_CODE] * 3 + [0]
    assert weights.tobytes() == reference.tobytes()
    assert sorted(set(executed)) == list(range(STEPS)) and redone(executed) == []


def test_s3_half_written_checkpoint_is_skipped(s3_creds: dict[str, str]) -> None:
    store = CheckpointStore("s3://lab/runs/partial/job", endpoint_url=s3_creds["OFFHOURS_S3_ENDPOINT_URL"], run_id="partial")
    store.save(10, b"ten")
    import boto3
    from botocore.config import Config

    client = boto3.client("s3", endpoint_url=s3_creds["OFFHOURS_S3_ENDPOINT_URL"],
                          config=Config(request_checksum_calculation="when_required"))
    client.put_object(Bucket="lab", Key="runs/partial/job/partial/_data/000000000000020-000000000001-0123456789abcdef",
                      Body=b"never published")
    latest = store.latest()
    assert latest is not None and (latest.step, latest.data) == (10, b"ten")
    # The progress the gate reads to pick victims, on S3 as on files.
    from offhours.scripts.runtime.checkpoint import latest_progress_time

    assert store.progress()["step"] == 10
    at = latest_progress_time("s3://lab/runs/partial", s3_creds["OFFHOURS_S3_ENDPOINT_URL"], timeout=60.0)
    assert at == pytest.approx(time.time(), abs=60)


def test_s3_store_rides_out_transient_faults_bit_identical(reference: np.ndarray, s3: dict[str, str],
                                                           tmp_path: Path) -> None:
    """Fault: 503s on checkpoint uploads and a reset mid-download on resume, while the job is stopped twice."""
    from tests.support.fault_proxy import Fault, fault_proxy

    with fault_proxy(s3["OFFHOURS_S3_ENDPOINT_URL"]) as proxy:
        proxy.faults += [Fault("status", "PUT", "/_data/", times=3, status=503),
                         Fault("reset", "GET", "/_data/", times=2, after_bytes=100)]
        env = {**s3, "OFFHOURS_S3_ENDPOINT_URL": proxy.url, "OFFHOURS_RUN_ID": "flaky",
               "OFFHOURS_STORE_READ_TIMEOUT": "5"}
        weights, executed, codes = run_with_stops("s3://lab/runs/flaky/job", tmp_path, stops=2, sig=signal.SIGTERM,
                                                  seed=5, env=env)
    assert codes == [PREEMPTED_EXIT_CODE] * 2 + [0]
    assert weights.tobytes() == reference.tobytes()
    assert sorted(set(executed)) == list(range(STEPS)) and redone(executed) == []
    assert [f.hits for f in proxy.faults] == [3, 2]  # every fault was met, and each was ridden out


@pytest.mark.parametrize("status, code", [(503, PREEMPTED_EXIT_CODE), (403, 1)])
def test_a_store_that_stays_down_is_a_resumable_stop_and_a_refusal_a_failure(
        s3: dict[str, str], tmp_path: Path, status: int, code: int) -> None:
    """Fault: every store request answered 503 (an outage past the retries: exit 75, retried) or 403 (exit 1)."""
    from tests.support.fault_proxy import Fault, fault_proxy

    with fault_proxy(s3["OFFHOURS_S3_ENDPOINT_URL"]) as proxy:
        proxy.faults.append(Fault("status", status=status))
        env = {**s3, "OFFHOURS_S3_ENDPOINT_URL": proxy.url, "OFFHOURS_RUN_ID": "down", "OFFHOURS_STORE_ATTEMPTS": "2"}
        job = Job("s3://lab/runs/down/job", tmp_path / "log", tmp_path / "out.npy", env)
        said = job.expect("checkpoint store:", timeout=120)
        assert job.wait(timeout=120) == code
    assert f"({2 if status == 503 else 1} tr" in said, said
    assert proxy.count("PUT") + proxy.count("GET") == (2 if status == 503 else 1)  # the first call: the probe
