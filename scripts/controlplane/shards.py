#!/usr/bin/env python3
"""The e2e tier in shards: N local control planes side by side, each running its share of the test files.

    python scripts/controlplane/shards.py run [--shards N] [-- PYTEST_ARGS...]   # up, test, down
    python scripts/controlplane/shards.py plan [--shards N]                       # which files go where
    python scripts/controlplane/shards.py down [--shards N]                       # stop shards left running

Why: the e2e tier mostly waits (cron minutes, the trace clock of the demo, pods' grace), so one control
plane leaves the machine's cores idle for most of the tier's 45 minutes. The tests of one file share a
cluster's namespaces (`serving`, `research`) and its `chat` service, so a file never splits; whole files
run on separate control planes, each with its own state folder, ports and pod address range
(lifecycle.py reads them from the environment), so no test sees another shard's objects.

Files are assigned by their last measured duration (bench/results/e2e_durations.json; longest first, each
to the shard with the least time so far). A file without a measurement counts as UNMEASURED_SECONDS.
Each shard's pytest writes a JUnit report; `run` prints every shard's output whole, then one line
`N passed, N failed` for the tier, and (with OFFHOURS_RECORD_MEASUREMENTS=1) records each file's
duration for the next plan.
"""

import argparse
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script: its neighbours
import measure  # noqa: E402 - after the path it is found on

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
E2E = REPO / "tests" / "e2e"
DURATIONS = REPO / "bench" / "results" / "e2e_durations.json"
UNMEASURED_SECONDS = 90.0
DEFAULT_SHARDS = 2
BASE = Path(os.environ.get("OFFHOURS_SHARDS_DIR", "/tmp/offhours-shards"))


@dataclass
class Shard:
    """One control plane of the tier: its number, its environment for lifecycle.py and pytest, its files."""

    index: int
    files: list[str] = field(default_factory=list)
    planned: float = 0.0

    @property
    def state(self) -> Path:
        """The shard's state folder (lifecycle.py's OFFHOURS_CLUSTER_DIR)."""
        return BASE / f"shard-{self.index}"

    def env(self) -> dict[str, str]:
        """Return the environment of the shard's lifecycle.py and pytest: its folder, ports and pod addresses."""
        # Ports 100 apart (etcd uses its port and +10); one /16 of loopback addresses per shard for pod IPs.
        # Numbered from 1: the ports and addresses of `make cluster-up`'s control plane (0) stay free.
        i = self.index + 1
        return {**os.environ, "OFFHOURS_CLUSTER_DIR": str(self.state), "OFFHOURS_ETCD_PORT": str(23790 + 100 * i),
                "OFFHOURS_API_PORT": str(16443 + 100 * i), "OFFHOURS_KUBELET_PORT": str(16450 + 100 * i),
                "OFFHOURS_POD_CIDR": f"127.{200 + i}.0.1/16", "OFFHOURS_ARGO_METRICS_PORT": str(9090 + 100 * i)}


def test_files() -> list[str]:
    """Return the e2e test files, relative to the repository."""
    return sorted(str(p.relative_to(REPO)) for p in E2E.glob("test_*.py"))


def durations(path: Path = DURATIONS) -> dict[str, float]:
    """Return the last measured seconds per test file (empty when none was measured)."""
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    return {name: float(seconds) for name, seconds in data.get("files", {}).items()}


def plan(files: list[str], seconds: dict[str, float], shards: int) -> list[Shard]:
    """Assign whole files to `shards` shards, longest first, each to the least loaded (ties: the lower index)."""
    if shards < 1:
        raise ValueError(f"--shards {shards}: expected 1 or more")
    out = [Shard(i) for i in range(shards)]
    for name in sorted(files, key=lambda f: (-seconds.get(f, UNMEASURED_SECONDS), f)):
        target = min(out, key=lambda s: (s.planned, s.index))
        target.files.append(name)
        target.planned += seconds.get(name, UNMEASURED_SECONDS)
    return [s for s in out if s.files]


def lifecycle(shard: Shard, command: str) -> int:
    """Run lifecycle.py `command` for `shard`, its output prefixed with the shard's number."""
    proc = subprocess.run([sys.executable, str(HERE / "lifecycle.py"), command], env=shard.env(), text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    for line in proc.stdout.splitlines():
        print(f"[shard {shard.index}] {line}", flush=True)
    return proc.returncode


@dataclass
class Outcome:
    """What one shard's pytest did: its exit status, output, the counts of its JUnit report, per-file seconds."""

    shard: Shard
    status: int
    output: str
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    seconds: float = 0.0
    per_file: dict[str, float] = field(default_factory=dict)


def run_shard(shard: Shard, pytest_args: list[str]) -> Outcome:
    """Run `shard`'s files with pytest against its control plane; read its JUnit report."""
    report = shard.state / "junit.xml"
    report.unlink(missing_ok=True)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--junitxml={report}",
                           *pytest_args, *shard.files], env=shard.env(), cwd=REPO, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    outcome = Outcome(shard, proc.returncode, proc.stdout, seconds=time.monotonic() - started)
    if report.exists():
        read_junit(report, outcome)
    return outcome


def read_junit(report: Path, outcome: Outcome) -> None:
    """Add the counts and per-file durations of JUnit `report` (pytest's) to `outcome`."""
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        name = test_file(case.get("classname", ""))
        outcome.per_file[name] = outcome.per_file.get(name, 0.0) + float(case.get("time", "0"))
        kinds = {child.tag for child in case}
        if kinds & {"failure", "error"}:
            outcome.failed += 1
        elif "skipped" in kinds:
            outcome.skipped += 1
        else:
            outcome.passed += 1


def test_file(classname: str) -> str:
    """Return the file of a JUnit test case's `classname` (a module path, maybe with a class after it)."""
    parts = classname.split(".")
    for k in range(len(parts), 0, -1):
        candidate = "/".join(parts[:k]) + ".py"
        if (REPO / candidate).exists():
            return candidate
    return classname


def record_durations(outcomes: list[Outcome], path: Path = DURATIONS) -> None:
    """Keep each file's measured seconds for the next plan (files not run this time keep theirs)."""
    known = durations(path)
    for outcome in outcomes:
        known.update({name: round(s, 1) for name, s in outcome.per_file.items()})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"what": "seconds per e2e test file, from pytest's JUnit report of the last "
                                        "sharded run (setup, call and teardown of its tests)",
                                "cores": os.cpu_count(), "files": dict(sorted(known.items()))},
                               indent=2) + "\n")


def run(shards: list[Shard], pytest_args: list[str]) -> int:
    """Start every shard's control plane, run the shards at once, stop them; return the tier's exit status."""
    if lifecycle(shards[0], "build"):  # one build (cached) before the parallel starts, never two at once
        return 1
    try:
        with ThreadPoolExecutor(len(shards)) as pool:
            started = list(pool.map(lambda s: lifecycle(s, "up"), shards))
        if any(started):
            print("[shards] a control plane did not start; see its lines above", flush=True)
            return 1
        with ThreadPoolExecutor(len(shards)) as pool:
            outcomes = list(pool.map(lambda s: run_shard(s, pytest_args), shards))
    finally:
        for shard in shards:
            lifecycle(shard, "down")
    for o in outcomes:
        print(f"\n===== shard {o.shard.index}: {len(o.shard.files)} files, {o.seconds:.0f} s "
              f"(planned {o.shard.planned:.0f} s), exit {o.status} =====", flush=True)
        print(o.output, flush=True)
    if measure.recording():
        record_durations(outcomes)
    passed, failed = sum(o.passed for o in outcomes), sum(o.failed for o in outcomes)
    skipped = sum(o.skipped for o in outcomes)
    print(f"[shards] {' | '.join(f'shard {o.shard.index}: {o.seconds:.0f} s' for o in outcomes)}")
    print(f"e2e: {passed} passed, {failed} failed, {skipped} skipped")
    statuses = [o.status for o in outcomes]
    return 0 if all(s == 0 for s in statuses) and passed else (max(statuses) or 1)


def main(argv: list[str]) -> int:
    """Run the command line (see the module's text)."""
    pytest_args: list[str] = []
    if "--" in argv:
        argv, pytest_args = argv[:argv.index("--")], argv[argv.index("--") + 1:]
    parser = argparse.ArgumentParser(prog="shards.py", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("run", "plan", "down"))
    parser.add_argument("--shards", type=int, default=int(os.environ.get("OFFHOURS_E2E_SHARDS", DEFAULT_SHARDS)))
    args = parser.parse_args(argv)
    if args.shards < 1:
        parser.error(f"--shards {args.shards}: expected 1 or more")
    shards = plan(test_files(), durations(), args.shards)
    if args.command == "plan":
        for s in shards:
            print(f"shard {s.index} ({s.planned:.0f} s): {' '.join(Path(f).name for f in s.files)}")
        return 0
    if args.command == "down":
        return max((lifecycle(Shard(i), "down") for i in range(args.shards)), default=0)
    return run(shards, pytest_args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
