"""The web console (Flask): the pool, the queue, a job's timeline, usage per service and month, `/metrics`.

With an authenticator (`offhours console --auth kubernetes`, the in-cluster install) every page but
`/healthz` needs a bearer token, and shows only what its identity may list (auth.py); without one
(`--auth local`, the operator's own kubeconfig on a laptop) it shows what the console can read.
"""

import dataclasses
import ipaddress
import os
from collections.abc import Callable, Collection, Mapping
from typing import Any

from flask import Flask, Response, abort, g, redirect, render_template, request

from offhours.scripts.cluster.access import READ_JOBS, AccessReviewer, Action
from offhours.scripts.cluster.resolve import AmbiguousJob, Unresolved, resolve
from offhours.scripts.console.asperson import Person, PersonApi
from offhours.scripts.console.auth import MAX_TOKEN_BYTES, Access, Authenticator, ReviewUnavailable, bearer_token
from offhours.scripts.console.charts import Series, line_chart
from offhours.scripts.console.protection import LOGIN_LIMIT, protect, review_allowed, review_failed, secure_cookie
from offhours.scripts.console.request_pages import Estimator, actual_start_minutes, add_request_routes, kept_estimate
from offhours.scripts.console.return_path_page import ReturnPathReader, add_return_path_route
from offhours.scripts.console.source import PoolSource
from offhours.scripts.inputs.limits import FORM_BYTES
from offhours.scripts.names import CONSOLE_TOKEN_COOKIE
from offhours.scripts.policy.config import GateConfig
from offhours.scripts.pool import usage
from offhours.scripts.pool.model import WAITING, Pool, RunView, gpus_of, names_a_workflow
from offhours.scripts.pool.operator_metrics import exposition
from offhours.scripts.pool.store_progress import Stored, store_progress, stored_checkpoint_text
from offhours.scripts.pool.views import age, cancellable, select_runs, sentence, stamp, unfinished
from offhours.scripts.runtime.provenance import describe

PAGE_ROWS = 500  # a page lists at most this many rows, whatever tenants submit; the CLI lists them all


SERVICES_PER_PAGE = 20  # the pool page: services (and their charts) per page, whatever the fleet's size
CHART_POINTS = 120  # points drawn per line: the history thinned evenly, its newest point always kept


def thinned(points: list[Any], most: int = CHART_POINTS) -> list[Any]:
    """At most `most` of `points`, evenly spaced, the last one always among them."""
    if len(points) <= most:
        return points
    step = len(points) / most
    return [points[int(i * step)] for i in range(most - 1)] + [points[-1]]


def page_number(text: str | None, pages: int) -> int:
    """Return the 1-based page a `?page=` asks for, clamped to the pages there are (anything else: the first)."""
    try:
        number = int(str(text)) if text is not None and str(text).isdigit() and len(str(text)) < 10 else 1
    except ValueError:
        number = 1
    return min(max(1, number), max(1, pages))


def loopback_host(host: str) -> bool:
    """Whether a Host header (`name[:port]`, `[v6][:port]`) names this machine's loopback."""
    name = host[1:host.find("]")] if host.startswith("[") else host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    if name.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def pool_charts(source: PoolSource, names: list[str] | None = None) -> dict[str, str]:
    """One SVG per service (of `names`, else all): baseline, in service, required and lent over the history."""
    charts: dict[str, str] = {}
    names = sorted({p.service for p in source.history}) if names is None else names
    for name in names:
        points = thinned(source.series(name))

        def line(attr: str, points: list[Any] = points) -> list[tuple[Any, float]]:
            return [(p.at, float(getattr(p, attr))) for p in points if getattr(p, attr) is not None]

        charts[name] = line_chart([Series("baseline", "#888888", line("baseline")),
                                   Series("in service", "#1f77b4", line("replicas")),
                                   Series("required", "#d62728", line("required")),
                                   Series("lent", "#2ca02c", line("lent"))], title=f"{name} replicas, last 24 h")
    return charts


def visible(pool: Pool, access: Access | None) -> Pool:
    """Return the part of `pool` that `access` may see (all of it without authentication), with a note on what is hidden."""
    if access is None:
        return pool
    hidden = []
    if not access.services:
        hidden.append("services (it may not list deployments in the serving namespace)")
    if not access.jobs:
        hidden.append("jobs and usage (it may not list workflows in the research namespace)")
    if not hidden:
        return pool
    note = f"signed in as {access.user or 'an unnamed identity'}, which is not shown " + " nor ".join(hidden)
    # A skipped workflow's problem names it (a tenant's name): hidden with the jobs, never a side channel.
    problems = pool.problems if access.jobs else tuple(p for p in pool.problems if not names_a_workflow(p))
    return dataclasses.replace(pool, services=pool.services if access.services else (),
                               runs=pool.runs if access.jobs else (), problems=(*problems, note))


def create_app(source: PoolSource, gpus_per_replica: Mapping[str, int] | None = None,
               services: Collection[str] | None = None, auth: Authenticator | None = None,
               person_api: PersonApi | None = None, estimator: Estimator | None = None, local_user: str = "",
               looked: str = "", admits_from: tuple[str, str] | None = None, secure_cookies: bool | None = None,
               gate_config: GateConfig | None = None, local_access: AccessReviewer | None = None,
               return_path: ReturnPathReader | None = None,
               progress: Callable[[RunView], Stored | None] = store_progress) -> Flask:
    """Build the console over `source`.

    `gpus_per_replica`: the gate configuration's, for services whose Deployment says none; `services`:
    the configuration's service names, the only `service` labels `/metrics` shows; `auth`: who may read
    what (None: no authentication, for an operator's local use). `person_api`: requests, cancel and
    resubmit, done as the person (None: the console only shows); `estimator`: the replays behind a
    request's estimate; `local_user`: who the person is without authentication (the kubeconfig's
    user); `looked`: where the pool was read, named when it is empty; `admits_from`: the gate configuration's
    workflowNamespace and which configuration says so (None: none was read): requests and resubmits from
    another namespace are refused, as `offhours submit` refuses them. `secure_cookies`: set the Secure flag on
    cookies even when the request did not come over TLS (a TLS-terminating proxy in front; default: the
    environment's OFFHOURS_CONSOLE_SECURE_COOKIES=1); protection.py says what guards every request. `gate_config`:
    the gate configuration whose admission checks refuse, at submit, a job the gate would never admit.
    `local_access`: without authentication, what the console's own credentials may do to a job (default: the
    pool reader's access reviews); a job page, cancel or resubmit resolves its name through it (cluster/resolve.py).
    `return_path`: where /return-path reads the gate's return-path histograms (None: the page says there is no Prometheus).
    `progress`: a run's newest progress read from its own checkpoint store (bounded): the job page's last checkpoint,
    never the progress annotation, which anyone who may patch the workflow can write.
    """
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = FORM_BYTES  # a larger body is refused (413) before any of it is read
    app.jinja_env.globals.update(provenance_lines=lambda run: describe(run.run_id, [c.provenance for c in run.copies]))
    app.jinja_env.globals.update(age=age, stamp=stamp, gpus_of=gpus_of, sentence=sentence, WAITING=WAITING,
                                 requests_enabled=person_api is not None, looked=looked,
                                 actual_start_minutes=actual_start_minutes)
    if services is not None:
        source.metrics.services = frozenset(services)
    # /logout only clears the cookie: it must work when the token was revoked or the API server is down.
    open_paths = ("/healthz", "/login", "/logout", "/static/")

    def unauthorized(message: str) -> tuple[str, int, dict[str, str]]:
        return (render_template("login.html", message=message, page=""), 401,
                {"WWW-Authenticate": 'Bearer realm="offhours-console"'})

    @app.before_request
    def authenticate() -> Any:
        g.access = None
        if auth is None and not loopback_host(request.host):
            # Without authentication the console acts with the operator's kubeconfig: a page whose DNS name
            # was rebound to 127.0.0.1 would read it as its own origin (the form key too) and post as them.
            return render_template("error.html", title="misdirected", message="this console without "
                                   "authentication answers loopback host names only (localhost, 127.0.0.1, [::1])",
                                   page=""), 421
        if auth is None or request.path.startswith(open_paths):
            return None
        token = bearer_token()
        if not token:
            return unauthorized("This console needs a Kubernetes bearer token.")
        access = reviewed(token)
        if not isinstance(access, Access):
            return access
        g.access = access
        return None

    def reviewed(token: str) -> Any:
        """Return the token's Access, or the answer that refuses it (503 when it cannot be reviewed, else 401)."""
        assert auth is not None
        if not review_allowed(limiter):  # guesses through a header or cookie count like sign-in attempts
            return render_template("error.html", title="too many attempts", message="too many tokens refused from "
                                   f"this address (at most {LOGIN_LIMIT}): wait a minute", page=""), 429
        try:
            access = auth.access(token)
        except ReviewUnavailable as err:
            return render_template("error.html", title="unavailable", message=str(err), page=""), 503
        if access is None:
            review_failed(limiter)
            return unauthorized("The API server does not accept this token.")
        return access

    # After `authenticate`, so a misdirected or unauthenticated request is refused as such before its CSRF check.
    if secure_cookies is None:
        secure_cookies = os.environ.get("OFFHOURS_CONSOLE_SECURE_COOKIES", "") in ("1", "true", "yes")
    limiter = protect(app, secure_cookies)

    def pool_for_reader() -> Pool:
        return visible(source.pool(), g.access)

    @app.route("/login", methods=["GET", "POST"])
    @limiter.limit(LOGIN_LIMIT, methods=["POST"])
    def login() -> Any:
        if auth is None:
            return redirect("/")
        if request.method == "GET":
            return render_template("login.html", message="Sign in with a Kubernetes bearer token.", page="")
        token = str(request.form.get("token", "")).strip()
        if not token or len(token.encode()) > MAX_TOKEN_BYTES:
            return unauthorized("Paste a bearer token (`kubectl create token NAME`).")
        access = reviewed(token)
        if not isinstance(access, Access):
            return access
        answer = redirect("/")
        answer.set_cookie(CONSOLE_TOKEN_COOKIE, token, httponly=True, samesite="Strict", secure=secure_cookie(app))
        return answer

    @app.post("/logout")
    def logout() -> Any:
        answer = redirect("/login")
        answer.delete_cookie(CONSOLE_TOKEN_COOKIE)
        return answer

    @app.get("/")
    def pool_page() -> str:
        pool = pool_for_reader()
        pages = -(-len(pool.services) // SERVICES_PER_PAGE)
        number = page_number(request.args.get("page"), pages)
        shown = pool.services[(number - 1) * SERVICES_PER_PAGE:number * SERVICES_PER_PAGE]
        return render_template("pool.html", pool=pool, shown=shown, number=number, pages=pages,
                               first=(number - 1) * SERVICES_PER_PAGE + 1,
                               charts=pool_charts(source, [s.name for s in shown]), page="pool")

    @app.get("/queue")
    def queue_page() -> str:
        pool = pool_for_reader()
        runs = select_runs(pool)
        return render_template("queue.html", pool=pool, runs=runs[:PAGE_ROWS], more=len(runs) - PAGE_ROWS,
                               page="queue")

    def lookup_access() -> AccessReviewer | None:
        """Who asks, as the API server answers for them: the signed-in person, else the console's own kubeconfig."""
        if g.access is not None:
            return g.access.reviewer
        return local_access if local_access is not None else getattr(source.reader, "access", None)

    def find_job(pool: Pool, name: str, action: Action) -> RunView:
        """Return the one job `name` the person may do `action` on (cluster/resolve.py), else abort naming why."""
        reviewer = lookup_access()
        if reviewer is None:
            abort(403, description="cannot tell what this identity may do to jobs: no job is shown or touched")
        try:
            return resolve(pool.runs, name, action, reviewer)
        except AmbiguousJob as err:
            abort(409, description=str(err))
        except Unresolved as err:
            abort(404, description=str(err))

    @app.get("/jobs/<name>")
    def job_page(name: str) -> str:
        pool = pool_for_reader()
        run = find_job(pool, name, READ_JOBS)
        who = Person(g.access.user, bearer_token()) if g.access is not None else Person(local_user, None)
        return render_template("job.html", pool=pool, run=run, page="queue",
                               last_checkpoint=stored_checkpoint_text(progress(run)),
                               kept=kept_estimate(person_api, who, run), can_cancel=bool(cancellable(run)),
                               can_resubmit=not unfinished(run))  # from what Argo says now, not what was asked

    @app.get("/usage")
    def usage_page() -> str:
        pool = pool_for_reader()
        skipped: list[str] = []
        rows = usage.usage_by_month(pool, gpus_per_replica, skipped)
        pool = dataclasses.replace(pool, problems=(*pool.problems, *skipped[:PAGE_ROWS]))
        return render_template("usage.html", pool=pool, rows=rows[:PAGE_ROWS], more=len(rows) - PAGE_ROWS,
                               page="usage")

    @app.get("/metrics")
    def metrics() -> Response:
        if g.access is not None and not g.access.metrics:
            return Response(f"{g.access.user} may not get /metrics\n", status=403, mimetype="text/plain")
        pool = source.pool()
        return Response(exposition(pool, source.metrics), mimetype="text/plain; version=0.0.4")

    @app.get("/healthz")
    def healthz() -> str:
        return "ok"

    add_return_path_route(app, return_path, pool_for_reader)

    if person_api is not None:
        # A run id is checked against every workflow the console reads, listed afresh (the cache may predate a click).
        add_request_routes(app, person_api, pool_for_reader, source.refresh, estimator, services, local_user,
                           read_now=lambda: source.reader.read(require_workflows=True), admits_from=admits_from,
                           gate_config=gate_config, find_job=find_job)

    @app.errorhandler(400)
    def bad_request(err: Any) -> tuple[str, int]:
        return render_template("error.html", title="bad request", message=getattr(err, "description", "bad request"),
                               page=""), 400

    @app.errorhandler(404)
    def not_found(err: Any) -> tuple[str, int]:
        return render_template("error.html", message=getattr(err, "description", "not found"), page=""), 404

    @app.errorhandler(403)
    def forbidden(err: Any) -> tuple[str, int]:
        return render_template("error.html", title="refused", message=getattr(err, "description", "refused"),
                               page=""), 403

    @app.errorhandler(409)
    def ambiguous(err: Any) -> tuple[str, int]:
        return render_template("error.html", title="ambiguous", message=getattr(err, "description", "conflict"),
                               page=""), 409

    return app
