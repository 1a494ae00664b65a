"""Days of vLLM-format history for a real Prometheus: a trace rendered as counters, backfilled with promtool.

Each service's per-minute trace becomes vLLM's three counters as its pods would have exposed them:
V1 servers (`engine` label, one series per engine, requests split by `finished_reason`) or older V0
ones (no `engine` label). A sample at minute m+1 holds everything counted up to the end of minute m,
so the increase between two consecutive samples is exactly one minute of the trace. Faults are
rendered on request: a stretch without samples (a gap), a restarted process (a counter reset).
"""

import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from offhours.scripts.metrics import vllm
from offhours.scripts.simulate.trace import Trace


@dataclass
class RenderedService:
    """One service's pods in the backfill: pods x engines series of each counter."""

    name: str
    trace: Trace
    pods: int = 2
    engines: int = 2  # 0: a V0 server (no engine label)
    gap: tuple[int, int] | None = None  # (first, last) sample index left out, in the first series
    reset_at: int | None = None  # minute at whose start the first series' process restarted
    drop: Sequence[str] = field(default_factory=tuple)  # counters this service does not expose


def _series(svc: RenderedService) -> list[tuple[str, float]]:
    """(labels without the metric name, share of the work) of each series of one counter."""
    out = []
    engines = max(1, svc.engines)
    for pod in range(svc.pods):
        for engine in range(engines):
            labels = f'service="{svc.name}",instance="{svc.name}-{pod}:8000",model_name="m"'
            if svc.engines:
                labels += f',engine="{engine}"'
            out.append((labels, 1.0 / (svc.pods * engines)))
    return out


def openmetrics(services: Sequence[RenderedService], start: float) -> str:
    """Render every service's counters as OpenMetrics text, timestamps from `start` (unix seconds)."""
    lines: list[str] = []
    columns = {vllm.REQUESTS: "requests", vllm.PROMPT_TOKENS: "input_tokens", vllm.GENERATION_TOKENS: "output_tokens"}
    for metric, column in columns.items():
        for svc in services:
            if metric in svc.drop:
                continue
            per_minute = getattr(svc.trace, column)
            times = start + 60.0 * np.arange(per_minute.shape[0] + 1)
            reasons = (("stop", 0.75), ("length", 0.25)) if metric == vllm.REQUESTS else ((None, 1.0),)
            for k, (labels, share) in enumerate(_series(svc)):
                for reason, part in reasons:
                    work = per_minute * share * part
                    if k == 0 and svc.reset_at is not None:
                        restarted = np.concatenate(([0.0], np.cumsum(work)))
                        values = restarted - np.where(np.arange(restarted.shape[0]) > svc.reset_at,
                                                      restarted[svc.reset_at], 0.0)
                    else:
                        values = np.concatenate(([0.0], np.cumsum(work)))
                    full = labels + (f',finished_reason="{reason}"' if reason else "")
                    for i, (t, v) in enumerate(zip(times.tolist(), values.tolist())):
                        if k == 0 and svc.gap is not None and svc.gap[0] <= i <= svc.gap[1]:
                            continue
                        lines.append(f"{metric}{{{full}}} {v!r} {t:.0f}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def backfill(services: Sequence[RenderedService], start: float, data_dir: Path) -> None:
    """Write the services' history into a Prometheus data directory (promtool tsdb create-blocks-from)."""
    promtool_blocks(openmetrics(services, start), data_dir)


def promtool_blocks(text: str, data_dir: Path) -> None:
    """Write OpenMetrics sample lines (`# EOF` added if missing) into a Prometheus data directory as blocks."""
    promtool = shutil.which("promtool")
    assert promtool, "promtool is not installed: apt-get install prometheus (make deps does it)"
    source = data_dir.parent / "history.om"
    source.write_text(text if text.rstrip().endswith("# EOF") else text.rstrip("\n") + "\n# EOF\n")
    data_dir.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data_dir)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
