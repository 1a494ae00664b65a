"""Run independent replays in parallel processes.

Each service's replay reads only its own share of the trace and its own jobs, so running them in
separate processes changes no result (tests/integration/test_simulate.py compares one process with two). The
processes are forked: they inherit the trace and the fleet instead of receiving them pickled, and
send back each replay's outcome (its events, jobs and per-minute queueing delay).
"""

import multiprocessing
import os
import signal
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

# Below this many replays a pool's start (tens of milliseconds a process) costs more than it saves.
MIN_PARALLEL_REPLAYS = 16

_task: Callable[[int], Any] | None = None


def _as_a_worker() -> None:
    # A forked worker inherits its parent's SIGTERM handler (a job's PreemptionSignal, say): one that only
    # sets a flag would keep the worker alive through the pool's terminate, and the pool's exit would wait on
    # it for ever. A worker ends on SIGTERM, as a process does by default.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _run(index: int) -> Any:
    assert _task is not None
    return _task(index)


def available_cpus() -> int:
    """Return the CPUs this process may run on (its affinity, which a container's limit narrows)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def map_replays(task: Callable[[int], T], count: int, workers: int | None = None) -> list[T]:
    """Return [task(0), ..., task(count - 1)], computed in up to `workers` forked processes.

    `workers` None: one per available CPU once there are `MIN_PARALLEL_REPLAYS` replays, else one. Forked only
    from a process running one thread: a fork copies every lock another thread holds at that instant (logging's,
    an HTTP pool's, the allocator's) but not the thread that would release it, so a child could wait for ever
    (the console, which serves on threads, replays in its own process, one after the other).
    """
    if workers is None:
        workers = available_cpus() if count >= MIN_PARALLEL_REPLAYS else 1
    workers = min(workers, count)
    if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods() or threading.active_count() > 1:
        return [task(i) for i in range(count)]
    global _task
    _task = task
    try:
        with multiprocessing.get_context("fork").Pool(workers, initializer=_as_a_worker) as pool:
            return pool.map(_run, range(count), chunksize=1)
    finally:
        _task = None
