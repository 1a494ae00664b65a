"""The console's return-path page: per service and phase, the reclaims served and their p50 and p95.

Read at each request from the Prometheus the console was given (the gate configuration's
`metrics.prometheusUrl`), through the same query and decoding as `offhours report --prometheus`
(history/return_path.py, policy/return_table.py), so the two never disagree. Only the services the
reader's pool shows are asked about. Without a Prometheus URL the page says so in one line; a
Prometheus that fails is one line naming the failure, never a number.
"""

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from flask import Flask, render_template

from offhours.scripts.history.return_path import return_rows
from offhours.scripts.metrics.prometheus import PrometheusError
from offhours.scripts.policy.return_table import PhaseRow, seconds_text
from offhours.scripts.pool.model import Pool

DAYS = 7.0  # as `offhours report --since`'s default
NO_PROMETHEUS = ("no Prometheus URL given (the gate configuration's metrics.prometheusUrl): "
                 "the return path the gate times is not shown")


@dataclass(frozen=True)
class ReturnPathReader:
    """Where the gate's histograms are read: a Prometheus URL, over the last `days`."""

    url: str
    days: float = DAYS
    now: Callable[[], float] = field(default=time.time, compare=False)  # when the range ends (a test fixes it)

    def rows(self, services: Sequence[str]) -> list[PhaseRow]:
        """Return the table for `services` over the `days` up to now."""
        return return_rows(self.url, services, self.now(), self.days * 86400.0)


def add_return_path_route(app: Flask, reader: ReturnPathReader | None, pool: Callable[[], Pool]) -> None:
    """Add GET /return-path to `app`: the table for the pool's services, or one line saying why there is none."""

    @app.get("/return-path")
    def return_path_page() -> str:
        shown = pool()
        rows: list[PhaseRow] = []
        note = NO_PROMETHEUS if reader is None else ""
        if reader is not None:
            try:
                rows = reader.rows([s.name for s in shown.services])
            except PrometheusError as err:
                note = f"Prometheus at {reader.url} could not be read: {err}"
        return render_template("return_path.html", pool=shown, rows=rows, note=note, reader=reader,
                               seconds_text=seconds_text, page="return-path")
