"""Counter samples: a series' three vLLM counters at a moment, the only state rates need between ticks.

Pure values, kept here so that the gate's record (which persists them) and the metrics readers (which
produce them) share one definition without the policy importing the readers.
"""

from dataclasses import dataclass

Counters = tuple[float, float, float]
"""Requests finished, prompt tokens, generation tokens: the counters a rate is taken of, in this order."""


@dataclass(frozen=True)
class CounterSample:
    """One series' three counters at a moment: what the next tick needs to compute its rates."""

    at: float
    counters: Counters
