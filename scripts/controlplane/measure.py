#!/usr/bin/env python3
"""Measured durations of the local control plane, kept in bench/results/controlplane.json, and the docs' figures from them.

    python scripts/controlplane/measure.py run e2e_tier -- CMD...   # run CMD; on success record its duration
    python scripts/controlplane/measure.py docs                    # rewrite the docs' figures from the file

`make cluster-up` measures a first build (every component built, none from the cache) and each
start; `make e2e` measures the tier. They print the figure; they write it (the file and the docs' pages) only
with OFFHOURS_RECORD_MEASUREMENTS=1, so that starting a sandbox never changes a person's checkout.
Each record names the machine's cores and load, since a shared
2-core machine and a quiet one differ several times over. The docs' pages (PAGES) carry each figure between
`<!-- measured:KEY -->` and `<!-- /measured -->`; a record rewrites it there, and a unit test
refuses a page whose figure is not the file's (a figure typed by hand goes stale).
"""

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench" / "results" / "controlplane.json"
# The documentation pages that state the figures (each figure in one of them).
PAGES = (REPO / "docs" / "getting-started" / "sandbox.md", REPO / "docs" / "development" / "local-control-plane.md")
# What each figure is, as the docs say it (the duration and the machine come from the record).
WHAT = {
    "first_build": "a first build of the control plane (every component from an empty cache)",
    "cluster_up": "`make cluster-up` with the binaries cached",
    "e2e_tier": "the e2e tier (`make e2e`)",
}
MARK = re.compile(r"<!-- measured:([a-z0-9_]+) -->(.*?)<!-- /measured -->", re.S)


def load(path: Path = RESULTS) -> dict[str, Any]:
    """Return the recorded measurements (empty when none was recorded)."""
    return dict(json.loads(path.read_text())) if path.exists() else {}


RECORD_ENV = "OFFHOURS_RECORD_MEASUREMENTS"


def recording() -> bool:
    """Return whether measurements are written (the maintainer's opt-in), not only printed."""
    return os.environ.get(RECORD_ENV) == "1"


class LoadSampler:
    """The 1-minute load average, sampled every `every` seconds while a measurement runs (a context manager).

    A long measurement's load is its mean over the run: the load at its end says little (a 50-minute build
    that shared the cores with tests the whole time can end on a quiet machine).
    """

    def __init__(self, every: float = 15.0) -> None:
        self.every = every
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while True:
            self.samples.append(os.getloadavg()[0])
            if self._stop.wait(self.every):
                return

    def __enter__(self) -> "LoadSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(os.getloadavg()[0])

    @property
    def mean(self) -> float:
        """The mean of the samples (the load now if none was taken)."""
        return sum(self.samples) / len(self.samples) if self.samples else os.getloadavg()[0]


def measured(key: str, seconds: float, load: float | None = None) -> dict[str, Any] | None:
    """Print `key`'s measurement; record it where recording is on (see `recording`); return the record if written.

    `load`: the mean load average over the run (a LoadSampler's); without it, the load at the end.
    """
    if not recording():
        print(f"[measure] {key}: {seconds:.0f} s (not recorded: set {RECORD_ENV}=1 to write it into "
              f"{RESULTS.relative_to(REPO)} and the docs)", file=sys.stderr)
        return None
    entry = record(key, seconds, mean_load=load)
    print(f"[measure] {key}: {entry['seconds']:.0f} s recorded in {RESULTS.relative_to(REPO)}", file=sys.stderr)
    return entry


def record(key: str, seconds: float, path: Path = RESULTS, pages: Sequence[Path] = PAGES,
           mean_load: float | None = None) -> dict[str, Any]:
    """Record `key` as taking `seconds` on this machine now; rewrite the pages' figures; return the record.

    `mean_load`: the mean load average during the run, recorded as `loadAverageMean`; `loadAverage` is
    the load at the end.
    """
    if key not in WHAT:
        raise ValueError(f"unknown measurement {key!r}: expected one of {', '.join(sorted(WHAT))}")
    if not (seconds >= 0 and seconds < 1e7):
        raise ValueError(f"{key}: {seconds!r} is no duration in seconds")
    results = load(path)
    entry = {"seconds": round(seconds, 1), "cores": os.cpu_count(), "loadAverage": round(os.getloadavg()[0], 1),
             "at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    if mean_load is not None:
        if not (mean_load >= 0 and mean_load < 1e4):
            raise ValueError(f"{key}: {mean_load!r} is no load average")
        entry["loadAverageMean"] = round(mean_load, 1)
    results[key] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    for page in pages:
        if page.exists():
            page.write_text(rewrite(page.read_text(), results))
    return entry


def phrase(key: str, results: dict[str, Any]) -> str:
    """Return the docs' figure for `key`: the duration in words and where it was measured, or that it was not."""
    entry = results.get(key)
    if not entry:
        return f"{WHAT[key]}: not measured yet (bench/results/controlplane.json has no `{key}`)"
    seconds = float(entry["seconds"])
    took = f"about {seconds / 60:.0f} minutes" if seconds >= 120 else f"about {seconds:.0f} s"
    load = f"a mean load average of {entry['loadAverageMean']:g}" if "loadAverageMean" in entry else \
        f"load average {entry['loadAverage']:g}"
    return f"{WHAT[key]} took {took} on {entry['cores']} cores at {load} ({entry['at'][:10]})"


def rewrite(text: str, results: dict[str, Any]) -> str:
    """Return a page's `text` with each marked figure replaced by the file's (an unknown key is an error)."""
    def figure(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in WHAT:
            raise ValueError(f"a page marks an unknown measurement {key!r}")
        return f"<!-- measured:{key} -->{phrase(key, results)}<!-- /measured -->"
    return MARK.sub(figure, text)


def main(argv: list[str]) -> int:
    """Run the command line (see the module's text)."""
    if argv[:1] == ["docs"] and len(argv) == 1:
        for page in PAGES:
            page.write_text(rewrite(page.read_text(), load()))
        return 0
    if len(argv) >= 4 and argv[0] == "run" and argv[2] == "--":
        started = time.monotonic()
        with LoadSampler() as sampler:
            status = subprocess.call(argv[3:])
        if status == 0:  # a failed run stopped early: its time is not the tier's
            measured(argv[1], time.monotonic() - started, load=sampler.mean)
        return status
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
