"""`offhours logs` of a preempted run whose first attempt's pod is gone: read back from Argo's log archive, bounded.

Real: s3proxy 4.0.0 on loopback (the S3 server), boto3 over real sockets, the artifact repository ConfigMap as
`offhours render --log-archive` writes it (its endpoint is s3proxy's), the archive at the keys its keyFormat makes
(`PREFIX/<namespace>/<workflow>/<pod>/main.log`, as Argo's executor writes a pod's main log when it ends). Not
real: the API server's pod listing and live log (a fake core: the live attempt's pod only), and Argo's executor
itself, whose upload the objects stand in for (kwok pods run no executor, so the e2e tier cannot make them).
"""

import argparse
import os
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes import client as kube

from offhours.scripts.cli import logs
from offhours.scripts.cluster.log_archive import repository_configmap
from offhours.scripts.names import ANNOTATION_ADMITTED_AT
from offhours.scripts.pool.model import build_pool
from tests.support.access import may_all
from tests.support.pool_fixture import NOW, SERVING, chat_state, deployment, state_configmap, ts, workflow
from tests.support.s3_fixture import s3_client as client
from tests.support.s3_fixture import with_credentials
from tests.unit.test_logs_attempts import _Core

PREFIX = "offhours-logs"


class _ArchivedCore(_Core):
    """The fake core's pods and logs, and the archive's ConfigMap as render writes it (s3proxy's endpoint)."""

    def __init__(self, logs_: dict[str, bytes | None], endpoint: str) -> None:
        super().__init__(logs_)
        self.repository = repository_configmap("research", f"s3://lab/{PREFIX}", endpoint.removeprefix("http://"),
                                               "s3-cred", insecure=True)

    def read_namespaced_config_map(self, name: str, namespace: str, **_: Any) -> Any:
        assert name == self.repository["metadata"]["name"]
        return SimpleNamespace(data=self.repository["data"])


def run_logs(monkeypatch: pytest.MonkeyPatch, s3: dict[str, str], live: dict[str, bytes | None],
             trusted: bool = True) -> int:
    with_credentials(s3, monkeypatch)
    if trusted:  # the endpoint the reader trusts with its credentials
        monkeypatch.setenv("OFFHOURS_S3_ENDPOINT_URL", s3["OFFHOURS_S3_ENDPOINT_URL"])
    else:
        monkeypatch.delenv("OFFHOURS_S3_ENDPOINT_URL", raising=False)
    original = workflow("train-z", "chat", 1, "preempted", phase="Failed", created=60, run_id="z",
                        annotations={ANNOTATION_ADMITTED_AT: ts(55)})
    copy = workflow("train-z-p1", "chat", 1, "admitted", phase="Running", created=30, run_id="z")
    pool = build_pool([state_configmap("chat", chat_state())], [deployment("chat", 10, 10)], [original, copy],
                      SERVING, NOW)
    reader = SimpleNamespace(research_namespace="research", core=_ArchivedCore(live, s3["OFFHOURS_S3_ENDPOINT_URL"]),
                             api=kube.ApiClient(), access=may_all())
    monkeypatch.setattr(logs, "_reader", lambda args: reader)
    monkeypatch.setattr(logs, "read_pool", lambda args, reader=None: pool)
    return logs._guarded(logs._cmd_logs)(argparse.Namespace(name="z", step=None, follow=False, command="logs"))


def put(s3: dict[str, str], key: str, body: bytes) -> None:
    client(s3).put_object(Bucket="lab", Key=key, Body=body)


def test_a_stopped_attempt_s_log_is_read_back_from_the_archive_and_marked(
        monkeypatch: pytest.MonkeyPatch, s3: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    put(s3, f"{PREFIX}/research/train-z/train-z-job-1/main.log",
        b"start at step 0 of 900\nSIGTERM: checkpointed at step 450\n")
    # Another workflow whose name extends this one's, and a key deeper than Argo writes: neither is this attempt's.
    put(s3, f"{PREFIX}/research/train-z-other/train-z-other-job-1/main.log", b"someone else's run\n")
    put(s3, f"{PREFIX}/research/train-z/train-z-job-1/extra/main.log", b"not a pod log\n")
    assert run_logs(monkeypatch, s3, {"train-z-p1-job-2": b"start at step 450 of 900\n"}) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == [
        "==> train-z / train-z-job-1 (attempt 1 of 2, preempted, pod gone: its log from the log archive) <==",
        "start at step 0 of 900", "SIGTERM: checkpointed at step 450",
        "==> train-z-p1 / train-z-p1-job-2 (attempt 2 of 2, running, resumed from the last checkpoint) <==",
        "start at step 450 of 900"]


def test_an_archived_log_past_the_cap_is_cut_and_said(
        monkeypatch: pytest.MonkeyPatch, s3: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """A 3 MiB archived log with a cap of 4 KiB: the first 4 KiB printed, the cut named, the read ranged."""
    line = b"step log line " + b"x" * 50 + b"\n"
    put(s3, f"{PREFIX}/research/train-z/train-z-job-1/main.log", line * (3 * 1024 * 1024 // len(line)))
    monkeypatch.setattr(logs, "LOG_BYTES", 4096)
    asked: list[str] = []
    real = logs.ArchiveReader.chunks

    def counted(self: Any, key: str, cap: int, chunk: int) -> Iterator[bytes]:
        for piece in real(self, key, cap, chunk):
            asked.append(str(len(piece)))
            yield piece

    monkeypatch.setattr(logs.ArchiveReader, "chunks", counted)
    assert run_logs(monkeypatch, s3, {"train-z-p1-job-2": b"start at step 450 of 900\n"}) == 0
    out = capsys.readouterr().out.splitlines()
    shown = out[1:out.index("(log longer than 4096 bytes: cut there: 4096 bytes shown)")]
    assert sum(len(x) + 1 for x in shown) <= 4096 + 1 and shown[0].startswith("step log line")
    assert sum(int(n) for n in asked) <= 4097  # the GET asked for the cap and one byte, not the 3 MiB


def test_an_archive_that_cannot_be_read_fails_the_command_naming_it(
        monkeypatch: pytest.MonkeyPatch, s3: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(os.environ, "AWS_SECRET_ACCESS_KEY", "wrong")
    bad = {**s3, "AWS_SECRET_ACCESS_KEY": "wrong"}
    assert run_logs(monkeypatch, bad, {"train-z-p1-job-2": b"start at step 450 of 900\n"}) == 1
    captured = capsys.readouterr()
    assert "start at step 450 of 900" in captured.out  # the live attempt is still printed
    assert captured.err.startswith("logs: 1 pod log(s) could not be read; the first: log archive s3://lab/"
                                   f"{PREFIX}/research/train-z/"), captured.err
    assert "Traceback" not in captured.err and len(captured.err.splitlines()) == 1



def test_an_endpoint_named_only_by_the_archive_s_configmap_is_sent_no_request(
        monkeypatch: pytest.MonkeyPatch, s3: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """Fault: a tenant points the research namespace's archive ConfigMap at its own server to collect signed requests."""
    made: list[object] = []
    monkeypatch.setattr(logs, "ArchiveReader", lambda *a, **k: made.append(a))
    run_logs(monkeypatch, s3, {"train-z-p1-job-2": b"live\n"}, trusted=False)  # the stopped attempt: archive only
    seen = capsys.readouterr()
    out = seen.out + seen.err
    assert made == [], "an archive reader was made for the ConfigMap's endpoint"
    assert "set OFFHOURS_S3_ENDPOINT_URL to the endpoint you trust" in out, out
