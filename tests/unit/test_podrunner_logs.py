"""The local pod runner's log folder: what it serves as a kubelet, and what it never reads.

Each pod's output is kept at NS/POD/main.log as it comes, so a runner that did not run the pod
(the daemon, while a test's runner ran it) or a runner restarted since still serves its log. The
names come from a URL anyone on the machine can send: only Kubernetes object names reach the
folder, never a path.
"""

import io
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offhours.scripts.controlplane.podrunner import LocalPodRunner


def _runner(log_dir: Path | None) -> LocalPodRunner:
    return LocalPodRunner(api=None, server="", ca_file="", log_dir=log_dir)  # type: ignore[arg-type]


class _Process:
    def __init__(self, text: str) -> None:
        self.stdout = io.StringIO(text)


def test_output_is_kept_in_the_folder_and_served_by_another_runner(tmp_path: Path) -> None:
    ran = _runner(tmp_path)
    output: list[str] = []
    ran._keep_output(_Process("started\nstart at step 450 of 900\n"), output,  # type: ignore[arg-type]
                     ran._log_path("research", "train-z-job-1"))
    assert output == ["started\n", "start at step 450 of 900\n"]
    assert (tmp_path / "research" / "train-z-job-1" / "main.log").read_text() == "started\nstart at step 450 of 900\n"
    # The daemon never ran it and has no memory of it: it serves it from the folder.
    assert _runner(tmp_path).lines_of("research", "train-z-job-1") == ["started\n", "start at step 450 of 900\n"]
    assert _runner(tmp_path).lines_of("research", "nosuch") is None
    assert _runner(None).lines_of("research", "train-z-job-1") is None  # no folder: only what it ran itself


def test_what_a_runner_holds_in_memory_is_served_first(tmp_path: Path) -> None:
    runner = _runner(tmp_path)
    runner.outputs[("research", "p")] = ["live\n"]
    assert runner.lines_of("research", "p") == ["live\n"]


@given(st.sampled_from(["..", "../..", "a/b", "", ".", "A", "x" * 260, "-a", "a-", "a\x00b", "%2e%2e"]))
def test_a_name_that_is_no_kubernetes_name_never_reaches_the_folder(name: str) -> None:
    # Invariant: whatever the URL carries, a namespace or pod that is not a DNS-1123 name maps to no file.
    runner = _runner(Path("/nonexistent-log-folder"))
    assert runner._log_path(name, "pod") is None and runner._log_path("research", name) is None
    assert runner.lines_of(name, "pod") is None


def test_an_unwritable_folder_keeps_the_output_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    runner = _runner(blocked)
    output: list[str] = []
    monkeypatch.setattr("offhours.scripts.controlplane.podrunner.log.error", lambda *a: None)
    path: Any = runner._log_path("research", "p")
    runner._keep_output(_Process("a\nb\n"), output, path)  # type: ignore[arg-type]
    assert output == ["a\n", "b\n"]
    assert runner.errors and "cannot keep the log" in runner.errors[0]
