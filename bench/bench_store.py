"""Benchmark: what the checkpoint store's bounds cost, and how long a hung endpoint can hold a caller.

Real: s3proxy (Maven Central) on loopback, boto3 over real sockets, the local file system, and the
fault-injecting proxy of the tests (tests/support/fault_proxy.py) playing a hung endpoint (it
accepts connections and never answers).

Measured: the wall time until a job's resume (`latest()`) and the gate's progress read
(`latest_progress_time`, its default 5 s bound) give up against a hung endpoint with the default
policy; the median save and resume of a 1 MiB checkpoint on s3proxy and on files, in an empty
store and in one whose log holds 200 entries (a save lists the log past the newest entry it knows
and the data folder to collect; a fresh process's first resume lists the whole log). With
`--unbounded-too`, also how long a boto3 client at its defaults (no timeouts of its own choosing,
botocore's retries) waits on the same hung endpoint: minutes, so it is optional. Writes bench/results/store.json.
"""

import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
RESULTS = REPO / "bench" / "results" / "store.json"
ROUNDS, SIZE, FULL = 15, 1 << 20, 200


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def give_up(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    try:
        fn()
    except Exception:  # noqa: BLE001 - giving up is what is measured
        pass
    return time.perf_counter() - start


def save_and_resume(uri: str, endpoint: str | None) -> dict[str, float]:
    from offhours.scripts.runtime.checkpoint import CheckpointStore

    store = CheckpointStore(uri, endpoint, run_id="bench")
    data = os.urandom(SIZE)
    saves = [timed(lambda i=i: store.save(i, data)) for i in range(1, ROUNDS + 1)]  # type: ignore[misc]
    resumes = [timed(store.latest) for _ in range(ROUNDS)]
    for i in range(ROUNDS + 1, FULL + 1):
        store.save(i, b"x")
    full_saves = [timed(lambda i=i: store.save(i, data)) for i in range(FULL + 1, FULL + ROUNDS + 1)]  # type: ignore[misc]
    fresh = [timed(CheckpointStore(uri, endpoint, run_id="bench", readonly=True).latest) for _ in range(ROUNDS)]
    return {"save_1mib_median_s": statistics.median(saves), "resume_1mib_median_s": statistics.median(resumes),
            f"save_1mib_with_{FULL}_log_entries_median_s": statistics.median(full_saves),
            f"first_resume_1mib_with_{FULL}_log_entries_median_s": statistics.median(fresh)}


def main() -> None:
    from offhours.scripts.runtime.checkpoint import CheckpointStore, RetryPolicy, latest_progress_time
    from tests.support.fault_proxy import Fault, fault_proxy
    from tests.support.s3_fixture import running_s3proxy, s3_env

    out: dict[str, object] = {"machine": f"{platform.machine()} {platform.python_version()}", "cpus": os.cpu_count(),
                              "load_average_1m_at_start": os.getloadavg()[0], "policy": RetryPolicy().__dict__}
    with tempfile.TemporaryDirectory() as tmp, running_s3proxy(Path(tmp) / "s3") as endpoint:
        env = s3_env(endpoint)
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
            os.environ[key] = env[key]
        import boto3

        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="bench")
        with fault_proxy(endpoint) as proxy:
            proxy.faults.append(Fault("hang"))
            hung = CheckpointStore("s3://bench/hung/run/job", proxy.url, run_id="run", readonly=True)
            out["hung_endpoint"] = {
                "resume_gives_up_after_s": give_up(hung.latest),
                "gate_progress_read_gives_up_after_s": give_up(
                    lambda: latest_progress_time("s3://bench/hung/run", proxy.url)),
                "requests_seen": len(proxy.seen),
            }
            if "--unbounded-too" in sys.argv:  # a boto3 client left at its defaults, as the store had (minutes)
                bare = boto3.client("s3", endpoint_url=proxy.url)
                out["hung_endpoint"]["boto3_defaults_give_up_after_s"] = give_up(  # type: ignore[index]
                    lambda: bare.list_objects_v2(Bucket="bench", Prefix="hung/"))
        out["s3proxy"] = save_and_resume("s3://bench/ckpt/bench/job", endpoint)
        out["file"] = save_and_resume(f"file://{tmp}/files/bench/job", None)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
