"""A run's provenance in its own checkpoint store, on a real S3 server (s3proxy) and on files.

Class: a run's provenance lost with its workflow (the annotation was the only copy), or a copy in the store that
a later start, another run or a planted object can make say other parameters. Mechanism: the run's first step
(`offhours check-parameters`, handed the workflow's annotations as a value) keeps the record at
`<checkpoint-uri>/<run-id>/provenance.json`, created exclusively by the first start; later starts only add image
digests (`store_record`); every read is bounded and decoded as the run's (`stored_record`, `decode`).
Invariants (generated below), whatever sequence of starts writes, on files and on S3:
- the stored record's parameters are the first start's, whatever later starts carry;
- each image's stored digest is the first any start reported for it;
- another run's record planted in the store is never read as this run's.
"""

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offhours.scripts.cli.jobs import why_text
from offhours.scripts.cli.provenance_source import texts_for_why
from offhours.scripts.names import ANNOTATION_PROVENANCE
from offhours.scripts.pool.model import build_pool
from offhours.scripts.runtime.checkpoint import RetryPolicy
from offhours.scripts.runtime.provenance import ProvenanceError, build, encode
from offhours.scripts.runtime.provenance_store import ANNOTATIONS_ENV, RECORD, store_record, stored_record
from tests.integration.test_checkpoint_store import client
from tests.support.pool_fixture import NOW, SERVING, chat_state, deployment, state_configmap, workflow

FAST = RetryPolicy(connect_timeout=2, read_timeout=2, attempts=2, deadline=20, backoff=0.05)
IMAGE = "ghcr.io/lab/t:1"
KINDS = {"run-id": "run-id", "image": "image", "input-uri": "optional-uri", "checkpoint-uri": "checkpoint-uri",
         "env": "env"}
_runs = itertools.count()


def record(run: str, input_uri: str = "s3://in/a", digest: str | None = None, base: str = "s3://lab/ck") -> str:
    values = {"run-id": run, "image": IMAGE, "input-uri": input_uri, "checkpoint-uri": base, "env": "{}"}
    made = build(run, {"metadata": {"name": "offhours-job", "resourceVersion": "7"}}, values, KINDS, "0.1.0")
    return encode(made.with_digests({IMAGE: digest}) if digest else made)


DIGESTS = st.sampled_from([None, "sha256:" + "a" * 64, "sha256:" + "b" * 64])
STARTS = st.lists(st.tuples(st.sampled_from(["s3://in/a", "s3://in/b", "s3://in/forged"]), DIGESTS),
                  min_size=1, max_size=4)


def check_starts(base: str, endpoint: str | None, starts: list[tuple[str, str | None]], plant_other: bool) -> None:
    run = f"run-{next(_runs)}"
    if plant_other:  # another run's record where this run's will be: replaced, never read as this run's
        store_record(base, "other", record("other", base=base), endpoint, FAST)
        other = Path(base.removeprefix("file://")) / "other" / RECORD if base.startswith("file://") else None
        if other is not None:
            (Path(base.removeprefix("file://")) / run).mkdir(parents=True, exist_ok=True)
            (Path(base.removeprefix("file://")) / run / RECORD).write_bytes(other.read_bytes())
        else:
            assert endpoint is not None
            env = {**os.environ, "OFFHOURS_S3_ENDPOINT_URL": endpoint}
            c = client(env)
            body = c.get_object(Bucket="lab", Key=f"{base.removeprefix('s3://lab/')}/other/{RECORD}")["Body"].read()
            c.put_object(Bucket="lab", Key=f"{base.removeprefix('s3://lab/')}/{run}/{RECORD}", Body=body)
        with pytest.raises(ProvenanceError, match="is the record of run \"other\""):
            stored_record(f"{base}/{run}", run, endpoint, policy=FAST)
    first_digest: str | None = None
    for input_uri, digest in starts:
        store_record(base, run, record(run, input_uri, digest, base), endpoint, FAST)
        first_digest = first_digest or digest
        stored = stored_record(f"{base}/{run}", run, endpoint, policy=FAST)
        assert stored is not None and stored.run == run
        assert stored.parameters["input-uri"] == starts[0][0]  # the first start's parameters, whatever came later
        assert stored.digests == ({IMAGE: first_digest} if first_digest else {})  # the first digest reported


@settings(max_examples=25, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(STARTS, st.booleans())
def test_on_files_the_store_keeps_the_first_starts_parameters_and_first_digests(
        tmp_path: Path, starts: list[tuple[str, str | None]], plant_other: bool) -> None:
    check_starts(f"file://{tmp_path}/ck", None, starts, plant_other)


@settings(max_examples=12, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(STARTS, st.booleans())
def test_on_s3_the_store_keeps_the_first_starts_parameters_and_first_digests(
        s3_creds: dict[str, str], starts: list[tuple[str, str | None]], plant_other: bool) -> None:
    check_starts("s3://lab/ck", s3_creds["OFFHOURS_S3_ENDPOINT_URL"], starts, plant_other)


def test_a_planted_record_past_the_bound_is_not_read_whole(s3_creds: dict[str, str]) -> None:
    client(s3_creds).put_object(Bucket="lab", Key=f"big/huge/{RECORD}", Body=b"{" + b" " * 5_000_000)
    assert stored_record("s3://lab/big/huge", "huge", s3_creds["OFFHOURS_S3_ENDPOINT_URL"], policy=FAST) is None
    assert stored_record("s3://lab/big/absent", "absent", s3_creds["OFFHOURS_S3_ENDPOINT_URL"], policy=FAST) is None


def check_parameters(values: dict[str, str], annotations: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run the step's program as its pod does: the store's credentials only in the run's `env` parameter."""
    schema = {k: KINDS[k] for k in values}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "OFFHOURS_"))}
    env[ANNOTATIONS_ENV] = json.dumps(annotations)
    return subprocess.run([sys.executable, "-m", "offhours.scripts.cli", "check-parameters", "--schema",
                           json.dumps(schema), "--values", json.dumps(values)], env=env, capture_output=True,
                          text=True, timeout=120)


def test_the_check_parameters_step_keeps_the_workflows_record_in_the_runs_store(s3_creds: dict[str, str]) -> None:
    s3 = s3_creds
    store_env = {k: s3[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION",
                                    "OFFHOURS_S3_ENDPOINT_URL")}
    values = {"run-id": "stepped", "image": IMAGE, "input-uri": "s3://in/a", "checkpoint-uri": "s3://lab/ck",
              "env": json.dumps(store_env)}
    done = check_parameters(values, {ANNOTATION_PROVENANCE: record("stepped"), "other": "x"})
    assert done.returncode == 0, done.stderr
    assert "provenance of run stepped recorded at s3://lab/ck/stepped/provenance.json" in done.stdout
    assert done.stdout.strip().splitlines()[-1].endswith("parameter(s) ok")  # the termination message stays the check's
    stored = stored_record("s3://lab/ck/stepped", "stepped", s3["OFFHOURS_S3_ENDPOINT_URL"], policy=FAST)
    assert stored is not None and stored.parameters["input-uri"] == "s3://in/a"
    # A store it cannot reach is one warning: the check still passes (the workflow's annotation is the record).
    unreachable = {**store_env, "OFFHOURS_S3_ENDPOINT_URL": "http://127.0.0.1:9", "OFFHOURS_STORE_ATTEMPTS": "1",
                   "OFFHOURS_STORE_CONNECT_TIMEOUT": "1"}
    done = check_parameters({**values, "run-id": "unreached", "env": json.dumps(unreachable)},
                            {ANNOTATION_PROVENANCE: record("unreached")})
    assert done.returncode == 0 and "warning: provenance of run unreached not stored" in done.stdout
    # Another run's record on the workflow is not stored as this run's.
    done = check_parameters({**values, "run-id": "mine"}, {ANNOTATION_PROVENANCE: record("someone-else")})
    assert done.returncode == 0 and "is the record of run \"someone-else\"" in done.stdout
    assert stored_record("s3://lab/ck/mine", "mine", s3["OFFHOURS_S3_ENDPOINT_URL"], policy=FAST) is None


def test_the_image_that_runs_the_step_has_the_s3_client() -> None:
    text = (Path(__file__).resolve().parents[2] / "Dockerfile").read_text()
    assert 'pip install --no-cache-dir ".[s3]"' in text


def _workflow_without_record(run: str, base: str) -> dict[str, Any]:
    wf = workflow(run, "chat", 1, "succeeded", "Succeeded", run_id=run)
    wf["spec"]["arguments"] = {"parameters": [{"name": "run-id", "value": run}, {"name": "checkpoint-uri",
                                                                                  "value": base}]}
    return wf


def test_why_shows_the_stores_record_when_no_workflow_carries_one(s3_creds: dict[str, str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OFFHOURS_S3_ENDPOINT_URL", s3_creds["OFFHOURS_S3_ENDPOINT_URL"])
    store_record("s3://lab/ck", "kept", record("kept", "s3://in/kept", "sha256:" + "c" * 64),
                 s3_creds["OFFHOURS_S3_ENDPOINT_URL"], FAST)
    pool = build_pool([state_configmap("chat", chat_state())], [deployment("chat", 10, 10)],
                      [_workflow_without_record("kept", "s3://lab/ck"), _workflow_without_record("lost", "s3://lab/ck")],
                      SERVING, NOW)
    kept = why_text(pool.find("kept"), pool, provenance=texts_for_why(pool.find("kept")))
    assert f"image: {IMAGE} (runs as ghcr.io/lab/t@sha256:{'c' * 64})" in kept
    assert "input-uri: s3://in/kept" in kept and "offhours rerun kept" in kept
    assert "provenance: none recorded" in why_text(pool.find("lost"), pool, provenance=texts_for_why(pool.find("lost")))
    monkeypatch.setenv("OFFHOURS_S3_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("OFFHOURS_STORE_ATTEMPTS", "1")
    down = why_text(pool.find("kept"), pool, provenance=texts_for_why(pool.find("kept")))
    assert "provenance: none recorded" in down and "provenance: its checkpoint store could not be read" in down
