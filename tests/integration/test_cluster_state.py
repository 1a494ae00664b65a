"""The local control plane's process bookkeeping: stale pid files never block a start or kill a stranger."""

import importlib.util
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

CLUSTER = Path(__file__).resolve().parents[2] / "scripts" / "controlplane" / "lifecycle.py"


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.setenv("OFFHOURS_CLUSTER_DIR", str(tmp_path / "state"))
    spec = importlib.util.spec_from_file_location("offhours_cluster_under_test", CLUSTER)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (tmp_path / "state" / "pids").mkdir(parents=True)
    return module


@pytest.fixture
def stranger() -> Iterator[subprocess.Popen[bytes]]:
    """A live process that the cluster did not start (as when a pid is reused after a reboot)."""
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_pid_files_of_a_killed_cluster_do_not_count_as_running(cluster: ModuleType,
                                                               stranger: subprocess.Popen[bytes]) -> None:
    pids = cluster.STATE / "pids"
    (pids / "etcd").write_text(str(dead_pid()))
    (pids / "kube-apiserver").write_text(str(stranger.pid))  # the pid now belongs to someone else
    assert cluster.running_processes() == []
    cluster.down()
    assert list(pids.iterdir()) == []
    assert stranger.poll() is None, "down() signalled a process the cluster did not start"


def test_a_live_cluster_process_is_running_and_down_stops_it(cluster: ModuleType) -> None:
    # Every process the cluster starts names its state folder on its command line, as this one does.
    # Started through a shell that exits, so it is not this test's child and is reaped when it ends.
    spawn = f"setsid python3 -c 'import time; time.sleep(60)' {cluster.STATE} >/dev/null 2>&1 & echo $!"
    pid = int(subprocess.run(["sh", "-c", spawn], check=True, capture_output=True, text=True).stdout)
    for _ in range(100):  # as with Popen(start_new_session=True): a session leader, so killpg reaches it
        if os.getsid(pid) == pid:
            break
        time.sleep(0.05)
    try:
        (cluster.STATE / "pids" / "etcd").write_text(str(pid))
        assert cluster.running_processes() == ["etcd"]
        cluster.down()
        assert cluster.running_processes() == []
        assert not cluster.is_ours(pid)
    finally:
        subprocess.run(["kill", "-9", str(pid)], capture_output=True)


def test_up_refuses_while_a_cluster_runs(cluster: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                         tmp_path: Path) -> None:
    monkeypatch.setattr(cluster, "ARGO_CRDS", tmp_path)
    monkeypatch.setattr(cluster, "running_processes", lambda: ["etcd", "kube-apiserver"])
    monkeypatch.setattr(cluster, "build", lambda: pytest.fail("built although a cluster is running"))
    with pytest.raises(SystemExit, match=r"already up \(etcd, kube-apiserver running\)"):
        cluster.up()


def test_a_process_just_started_is_the_clusters_even_before_its_command_line_is_readable(cluster: ModuleType,
                                                                                      tmp_path: Path) -> None:
    """Fault: right after Popen, /proc/PID/cmdline can still be empty (the exec under way): the pod runner, alive,
    was taken for one that had exited at start, `make cluster-up` failed and left it running."""
    for _ in range(60):
        proc = subprocess.Popen(["sh", "-c", "sleep 5", "sh", str(cluster.STATE)], start_new_session=True)
        try:
            assert cluster.is_ours(proc.pid)
        finally:
            proc.kill()
            proc.wait()
