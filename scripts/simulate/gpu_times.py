"""The fleet file's return-path times from a GPU check (bench/gpu/gpu_check.py's JSON): pure, no I/O.

- coldStartMinutes: a real `vllm serve --load-format dummy` start to /health (engine set-up, no weights read)
  plus the weights read from disk cold, at the check's measured rate, for a model of `model_gib`. Without
  the vLLM figure the engine's set-up was not measured, so the configured value stands (said, not guessed).
- wakeMinutes: vLLM's level-1 wake where measured; else `model_gib` at the measured pinned-host-to-GPU rate.
- graceMinutes: the reference job's slowest stop from SIGTERM to its checkpointed exit.

Every value comes with a note saying what it includes or why it was left as configured.
"""

import math
from dataclasses import dataclass
from typing import Any

SCHEMA = "offhours-gpu-check/1"


class GpuCheckError(ValueError):
    """The document is not a GPU check this can read, or holds nothing to calibrate with; names what is wrong."""


@dataclass(frozen=True)
class ReturnTimes:
    """Fleet file values in minutes (None: not measured, the configured value stands) and a note for each."""

    cold_start_minutes: float | None
    wake_minutes: float | None
    grace_minutes: float | None
    notes: dict[str, str]


def _number(section: Any, key: str, where: str) -> float | None:
    """Return the finite number >= 0 at section[key]; None where the section was skipped, failed or lacks it."""
    if not isinstance(section, dict) or key not in section:
        return None
    value = section[key]
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise GpuCheckError(f"{where}.{key}: {value!r} is not a number of seconds or GiB >= 0")
    return float(value)


def _why_not(section: Any) -> str:
    if isinstance(section, dict):
        for key in ("skipped", "error"):
            if key in section:
                return f"{key}: {section[key]}"
    return "not in the document"


def return_times(doc: Any, model_gib: float | None = None) -> ReturnTimes:
    """Turn a GPU check into the fleet's start, wake and grace times for a model of `model_gib` (default: the check's)."""
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise GpuCheckError(f"not a GPU check document (its schema must be {SCHEMA!r})")
    if doc.get("gpu") is False:
        raise GpuCheckError(f"the check found no GPU ({doc.get('reason', 'no reason given')}): nothing to calibrate")
    if model_gib is not None and not (math.isfinite(model_gib) and model_gib > 0):
        raise GpuCheckError(f"model size {model_gib!r} GiB must be above 0")
    load, pinned, vllm, job = (doc.get(k) for k in ("modelLoad", "pinnedTransfer", "vllm", "referenceJob"))
    notes: dict[str, str] = {}
    measured_gib = _number(load, "modelGiB", "modelLoad")
    size = model_gib if model_gib is not None else measured_gib if measured_gib else None
    cold_rate = _number(load, "coldGiBPerSecond", "modelLoad")

    start = None
    engine = _number(vllm, "coldStartSeconds", "vllm")
    if engine is not None and cold_rate and size:
        seconds = engine + size / cold_rate
        start = seconds / 60.0
        notes["coldStartMinutes"] = (f"vLLM's own start with dummy weights {engine:g} s + {size:g} GiB read cold at "
                                     f"{cold_rate:g} GiB/s ({size / cold_rate:.1f} s)")
    elif cold_rate and size:
        notes["coldStartMinutes"] = (f"kept as configured: vLLM's own start was not measured ({_why_not(vllm)}); "
                                     f"the weights alone take {size / cold_rate:.1f} s ({size:g} GiB cold at "
                                     f"{cold_rate:g} GiB/s)")
    else:
        notes["coldStartMinutes"] = f"kept as configured: no cold load measured ({_why_not(load)})"

    wake = None
    vllm_wake = _number(vllm, "wakeSeconds", "vllm")
    wake_rate = _number(pinned, "wakeGiBPerSecond", "pinnedTransfer")
    if vllm_wake is not None:
        wake = vllm_wake / 60.0
        notes["wakeMinutes"] = f"vLLM's level-1 wake answered in {vllm_wake:g} s"
    elif wake_rate and size:
        wake = size / wake_rate / 60.0
        notes["wakeMinutes"] = (f"{size:g} GiB from pinned host memory to the GPU at {wake_rate:g} GiB/s; vLLM's own "
                                f"wake bookkeeping not measured ({_why_not(vllm)})")
    else:
        notes["wakeMinutes"] = f"not measured ({_why_not(pinned)})"

    grace = None
    stop = _number(job, "maxSeconds", "referenceJob")
    if stop is not None:
        grace = stop / 60.0
        notes["graceMinutes"] = f"the reference job's slowest stop, SIGTERM to its checkpointed exit: {stop:g} s"
    else:
        notes["graceMinutes"] = f"kept as configured: the reference job's stop not measured ({_why_not(job)})"
    if start is None and wake is None and grace is None:
        raise GpuCheckError("the check holds no figure to calibrate with: " + "; ".join(notes.values()))
    return ReturnTimes(start, wake, grace, notes)


MAX_MINUTES = 60.0  # the fleet file's bound (schemas/fleet.schema.json)


def fleet_document(raw: dict[str, Any], times: ReturnTimes) -> dict[str, Any]:
    """Return the fleet document `raw` with the measured times in it (the others as they were).

    A time beyond the fleet file's bound is refused, not cut: a start of more than an hour is a failure to name.
    """
    out = dict(raw)
    for key, value in (("coldStartMinutes", times.cold_start_minutes), ("wakeMinutes", times.wake_minutes),
                       ("graceMinutes", times.grace_minutes)):
        if value is None:
            continue
        if value > MAX_MINUTES:
            raise GpuCheckError(f"{key}: {value:.1f} minutes measured, beyond the fleet file's bound of "
                                f"{MAX_MINUTES:g}: {times.notes[key]}")
        out[key] = round(value, 4)
    return out
