"""The sandbox's own load as the console's estimate replays it: what `offhours demo --keep` serves, recorded by it.

The sandbox replays the bundled trace scaled to its fleet (a hundredth of the trace's requests, or so), `speed`
times faster than the clock, with a gate configuration whose durations are wall seconds. Replaying the raw trace
against that configuration (`--history-trace`) replays a load a hundred times the fleet's: every day said "not
within the horizon" for jobs the sandbox admitted in 25 s. So the sandbox writes down what it replays (REPLAY_FILE
in its folder), and `offhours console --history-sandbox` replays exactly that load, in the sandbox's time, and
answers in wall time (simulate/estimate.py: sped_up_history, HistoryEstimator's speed).
"""

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from offhours.scripts.inputs.errors import InputError
from offhours.scripts.inputs.jsondoc import load_json
from offhours.scripts.inputs.text import read_bytes

REPLAY_FILE = "replay.json"
REPLAY_BYTES = 4096


def write_replay(folder: Path, scale: float, speed: float, start_minute: int, began: float) -> Path:
    """Record what the sandbox replays from now on: the trace's scale, its speed, where it began and when (unix s)."""
    path = folder / REPLAY_FILE
    path.write_text(json.dumps({"trace": "bundled", "scale": scale, "speed": speed, "startMinute": start_minute,
                                "began": began}) + "\n")
    return path


def read_replay(folder: Path) -> dict[str, float]:
    """Return the sandbox's replay record; InputError naming the file and what is wrong (none: no sandbox ran)."""
    path = folder / REPLAY_FILE
    try:
        raw = load_json(read_bytes(path, REPLAY_BYTES), str(path))
    except FileNotFoundError:
        raise InputError(str(path), "is missing: no sandbox has run here (`make sandbox` starts one)") from None
    except OSError as err:
        raise InputError(str(path), f"cannot be read ({err.strerror})") from None
    numbers = {}
    for key in ("scale", "speed", "startMinute", "began"):
        value = raw.get(key) if isinstance(raw, dict) else None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise InputError(str(path), f"has no number {key!r}: not a sandbox's replay record")
        numbers[key] = float(value)
    if numbers["speed"] < 1 or numbers["scale"] <= 0:
        raise InputError(str(path), "has a speed below 1 or a scale of 0: not a sandbox's replay record")
    return numbers


def sandbox_estimator(folder: Path, config: Any, clock: Callable[[], float] = time.time) -> Any:
    """Return the console's estimator of the sandbox recorded in `folder`, under the installed gate configuration."""
    from offhours.scripts.simulate.estimate import HistoryEstimator, sped_up_history
    from offhours.scripts.simulate.trace import load_trace

    replay = read_replay(folder)
    loader = sped_up_history(load_trace(), replay["scale"], replay["speed"], int(replay["startMinute"]), replay["began"],
                             clock)
    return HistoryEstimator(config, loader, f"the sandbox's own load: the bundled trace at {replay['scale']:.4f}x, "
                            f"replayed at {replay['speed']:g}x", speed=replay["speed"])
