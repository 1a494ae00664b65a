"""Per-minute traces from a Prometheus history (scripts/history): what `simulate --prometheus` replays."""

import numpy as np

from offhours.scripts.history.read import History
from offhours.scripts.simulate.trace import Trace


def traces_from_history(history: History) -> dict[str, Trace]:
    """Return each complete service's trace: finished requests, prompt and generation tokens per minute."""
    if history.step != 60.0:
        raise ValueError(f"a trace is per minute: the history's step is {history.step:g} s, not 60")
    traces = {}
    for name, svc in history.services.items():
        if svc.complete:
            traces[name] = Trace(np.asarray(svc.work["requests"], dtype=np.float64),
                                 np.asarray(svc.work["prompt_tokens"], dtype=np.float64),
                                 np.asarray(svc.work["generation_tokens"], dtype=np.float64), name)
    return traces


def baseline_replicas(history: History, name: str) -> int:
    """The most pods the service had samples from in any minute: what it runs with when nothing is lent."""
    pods = history.services[name].pods
    return int(pods.max()) if pods.size else 0
