"""The web console (Flask): the pool, the queue, a job's timeline, usage per service and month, `/metrics`."""

from collections.abc import Mapping
from typing import Any

from flask import Flask, Response, abort, render_template

from offhours.scripts.console.charts import Series, line_chart
from offhours.scripts.console.source import PoolSource
from offhours.scripts.pool import usage
from offhours.scripts.pool.model import WAITING, RunView, gpus_of
from offhours.scripts.pool.operator_metrics import exposition
from offhours.scripts.pool.views import age, select_runs, sentence, stamp


def pool_charts(source: PoolSource) -> dict[str, str]:
    """One SVG per service: baseline, in service, required and lent over the history."""
    charts: dict[str, str] = {}
    names = sorted({p.service for p in source.history})
    for name in names:
        points = [p for p in source.history if p.service == name]

        def line(attr: str, points: list[Any] = points) -> list[tuple[Any, float]]:
            return [(p.at, float(getattr(p, attr))) for p in points if getattr(p, attr) is not None]

        charts[name] = line_chart([Series("baseline", "#888888", line("baseline")),
                                   Series("in service", "#1f77b4", line("replicas")),
                                   Series("required", "#d62728", line("required")),
                                   Series("lent", "#2ca02c", line("lent"))], title=f"{name} replicas, last 24 h")
    return charts


def create_app(source: PoolSource, gpus_per_replica: Mapping[str, int] | None = None) -> Flask:
    """Build the console over `source`; `gpus_per_replica`: the gate configuration's, for services whose Deployment says none."""
    app = Flask(__name__)
    app.jinja_env.globals.update(age=age, stamp=stamp, gpus_of=gpus_of, sentence=sentence, WAITING=WAITING)

    @app.get("/")
    def pool_page() -> str:
        pool = source.pool()
        return render_template("pool.html", pool=pool, charts=pool_charts(source), page="pool")

    @app.get("/queue")
    def queue_page() -> str:
        pool = source.pool()
        return render_template("queue.html", pool=pool, runs=select_runs(pool), page="queue")

    @app.get("/jobs/<name>")
    def job_page(name: str) -> str:
        pool = source.pool()
        run: RunView | None = pool.find(name)
        if run is None:
            abort(404, description=f"no offhours job {name!r}")
        return render_template("job.html", pool=pool, run=run, page="queue")

    @app.get("/usage")
    def usage_page() -> str:
        pool = source.pool()
        return render_template("usage.html", pool=pool, rows=usage.usage_by_month(pool, gpus_per_replica), page="usage")

    @app.get("/metrics")
    def metrics() -> Response:
        pool = source.pool()
        return Response(exposition(pool, source.metrics), mimetype="text/plain; version=0.0.4")

    @app.get("/healthz")
    def healthz() -> str:
        return "ok"

    @app.errorhandler(404)
    def not_found(err: Any) -> tuple[str, int]:
        return render_template("error.html", message=getattr(err, "description", "not found"), page=""), 404

    return app
