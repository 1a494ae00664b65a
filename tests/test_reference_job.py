"""The preemptible contract, proven: SIGTERM at random points, restart, bit-identical result.

Real: the reference job as a separate process, POSIX signals, the file system, and a real
S3-compatible server (s3proxy) on loopback for the s3:// store.
"""

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from offhours.scripts.checkpoint import PREEMPTED_EXIT_CODE, CheckpointError, CheckpointStore

from .s3_fixture import running_s3proxy, s3_env

JOB = Path(__file__).resolve().parent.parent / "examples" / "reference-job" / "train.py"
STEPS, EVERY = 1500, 100


def start(uri: str, log: Path, out: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(JOB), "--steps", str(STEPS), "--every", str(EVERY),
                             "--step-seconds", "0.002", "--log", str(log), "--out", str(out)],
                            env={**(env or os.environ), "OFFHOURS_CHECKPOINT_URI": uri},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def run_to_end(uri: str, tmp: Path, env: dict[str, str] | None = None) -> np.ndarray:
    proc = start(uri, tmp / "ref.log", tmp / "ref.npy", env)
    assert proc.wait(timeout=120) == 0, proc.stdout.read() if proc.stdout else ""
    return np.load(tmp / "ref.npy")


def run_with_stops(uri: str, tmp: Path, stops: int, sig: int, seed: int,
                   env: dict[str, str] | None = None) -> tuple[np.ndarray, list[int], list[int]]:
    """Run, stopping with `sig` at random points `stops` times; return final weights, executed steps, exit codes."""
    rng = random.Random(seed)
    log, out, codes = tmp / "steps.log", tmp / "out.npy", []
    for _ in range(stops):
        proc = start(uri, log, out, env)
        time.sleep(rng.uniform(0.4, 1.2))
        proc.send_signal(sig)
        codes.append(proc.wait(timeout=60))
    proc = start(uri, log, out, env)
    codes.append(proc.wait(timeout=120))
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
    assert codes[:-1] == [PREEMPTED_EXIT_CODE] * 4 and codes[-1] == 0
    assert weights.tobytes() == reference.tobytes()
    assert sorted(set(executed)) == list(range(STEPS))
    assert redone(executed) == []  # SIGTERM: the step in flight finishes and is checkpointed


def test_sigkill_redoes_at_most_one_checkpoint_interval(reference: np.ndarray, tmp_path: Path) -> None:
    weights, executed, codes = run_with_stops(f"file://{tmp_path}/ckpt", tmp_path, stops=3, sig=signal.SIGKILL, seed=2)
    assert codes[:-1] == [-signal.SIGKILL] * 3 and codes[-1] == 0
    assert weights.tobytes() == reference.tobytes()
    assert all(0 < cost <= EVERY for cost in redone(executed)), redone(executed)


def test_corrupt_or_half_written_checkpoints_are_skipped(tmp_path: Path) -> None:
    store = CheckpointStore(f"file://{tmp_path}/ckpt")
    store.save(100, b"good-100")
    store.save(200, b"good-200")
    (tmp_path / "ckpt" / "step-000000000300").mkdir()
    (tmp_path / "ckpt" / "step-000000000300" / "data").write_bytes(b"half written, no marker")
    bad = tmp_path / "ckpt" / "step-000000000400"
    bad.mkdir()
    (bad / "data").write_bytes(b"bit rot")
    (bad / "COMPLETE").write_bytes((tmp_path / "ckpt" / "step-000000000200" / "COMPLETE").read_bytes())
    latest = store.latest()
    assert latest is not None and (latest.step, latest.data) == (200, b"good-200")
    assert store.progress()["step"] == 200


def test_store_refuses_unusable_uris() -> None:
    with pytest.raises(CheckpointError, match="must be file:// or s3://"):
        CheckpointStore("gs://bucket/run")
    with pytest.raises(CheckpointError, match="needs a bucket"):
        CheckpointStore("s3:///run")
    with pytest.raises(CheckpointError, match="OFFHOURS_CHECKPOINT_URI is not set"):
        CheckpointStore.from_env({})


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with running_s3proxy(tmp_path_factory.mktemp("s3proxy")) as endpoint:
        env = s3_env(endpoint)
        import boto3

        boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                     aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1"
                     ).create_bucket(Bucket="lab")
        yield env


def test_s3_store_survives_sigterms_bit_identical(reference: np.ndarray, s3: dict[str, str], tmp_path: Path) -> None:
    weights, executed, codes = run_with_stops("s3://lab/runs/ref-1/job", tmp_path, stops=3, sig=signal.SIGTERM,
                                              seed=3, env=s3)
    assert codes[:-1] == [PREEMPTED_EXIT_CODE] * 3 and codes[-1] == 0
    assert weights.tobytes() == reference.tobytes()
    assert redone(executed) == []


def test_s3_half_written_checkpoint_is_skipped(s3: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
        monkeypatch.setenv(key, s3[key])
    store = CheckpointStore("s3://lab/runs/partial", endpoint_url=s3["OFFHOURS_S3_ENDPOINT_URL"])
    store.save(10, b"ten")
    import boto3
    from botocore.config import Config

    client = boto3.client("s3", endpoint_url=s3["OFFHOURS_S3_ENDPOINT_URL"],
                          config=Config(request_checksum_calculation="when_required"))
    client.put_object(Bucket="lab", Key="runs/partial/step-000000000020/data", Body=b"no marker yet")
    latest = store.latest()
    assert latest is not None and (latest.step, latest.data) == (10, b"ten")
    # The progress the gate reads to pick victims, on S3 as on files.
    from offhours.scripts.checkpoint import latest_progress_time

    assert store.progress()["step"] == 10
    assert latest_progress_time("s3://lab/runs", s3["OFFHOURS_S3_ENDPOINT_URL"]) == pytest.approx(time.time(), abs=60)
