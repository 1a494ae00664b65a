"""The request half of the console: a form per template, its estimate, and cancel and resubmit on a job page.

Everything that reads templates or writes workflows goes through `PersonApi` with the person's
identity (asperson.py); the console's own rights are never used for it. Each POST carries the
console's form key (in a hidden field: an HMAC, with a random key of this process, of the person's
token): a page of another site cannot post a request in the person's name, not even to a console
without authentication, and one person's key never posts as another (with the token it was made for).
"""

import dataclasses
import hashlib
import hmac
import math
import secrets
import threading
import time
from collections.abc import Callable, Collection
from datetime import datetime, timezone
from typing import Any, Protocol

from flask import Flask, abort, g, redirect, render_template, request, url_for

from offhours.scripts.cluster.access import CANCEL_JOB, RESUBMIT_JOB, Action
from offhours.scripts.cluster.never_admitted import never_admitted
from offhours.scripts.cluster.parked import misplaced_namespace, stop_patch
from offhours.scripts.cluster.template_needs import template_refusal
from offhours.scripts.console.asperson import CallFailed, Person, PersonApi, Refused, creator_label
from offhours.scripts.console.auth import bearer_token
from offhours.scripts.console.form import (
    CHECKPOINT_FIELD,
    HOURS_FIELD,
    PRIORITY_FIELD,
    Checked,
    check_request,
    fields_of,
    submitted_values,
)
from offhours.scripts.names import ANNOTATION_ESTIMATE, ANNOTATION_PRIORITY, ARGO_CREATOR_LABEL, LABEL_RUN_ID
from offhours.scripts.policy.config import GateConfig
from offhours.scripts.policy.estimate import (
    Estimate,
    EstimateError,
    JobAhead,
    JobRequest,
    estimate_record,
    parse_estimate_record,
)
from offhours.scripts.policy.partial import Missing, partial_note
from offhours.scripts.pool.model import ADMITTED, FINISHED, RUNNING, WAITING, Pool, RunView, names_a_workflow
from offhours.scripts.pool.views import (
    CANCEL_ROUNDS,
    CANCEL_SETTLE_SECONDS,
    cancellable,
    live_copies,
    live_run_message,
    never_admitted_as_is,
    same_run,
    unfinished,
)

CSRF_FIELD = "form-key"
DEFAULT_HOURS, DEFAULT_CHECKPOINT_MINUTES = "4", "30"
KEPT_LOOKUPS = 5  # a job page reads at most this many of the run's copies for its kept estimate


class Estimator(Protocol):
    """Replays a service's history for a request (scripts/simulate/estimate.py); `source` names that history."""

    source: str

    def estimate(self, service: str, baseline: int, request: JobRequest, ahead: list[JobAhead]) -> Estimate:
        """Estimate, or EstimateError naming why none can be made."""
        ...


def queue_ahead(pool: Pool, service: str, priority: int) -> list[JobAhead]:
    """Return the service's jobs a new request would wait behind.

    Those holding lent replicas, and the parked ones of at least its priority (equal ones are older); not one the
    gate keeps out of its queue for a problem (it would hold, in every replay, replicas it never gets).
    """
    ahead = []
    for run in pool.runs:
        job = run.current
        if run.service != service or job.state in FINISHED or (job.state == WAITING and never_admitted_as_is(job)):
            continue
        if job.state in (ADMITTED, RUNNING):
            ahead.append(JobAhead(job.replicas, job.priority, running=True))
        elif job.state == WAITING and job.priority >= priority:
            ahead.append(JobAhead(job.replicas, job.priority))
    return ahead


def queue_unknown(pool: Pool, hidden_from: str | None) -> tuple[Missing, ...]:
    """Return what of the queue a request is replayed behind is not known: jobs hidden from `hidden_from`, or unread."""
    if hidden_from is not None:
        return (Missing(f"the jobs ahead of it are not known: {hidden_from} may not list the research workflows "
                        "(replayed as if none were ahead)", lower_bound=False),)
    unread = sum(1 for p in pool.problems if names_a_workflow(p))
    if unread:
        return (Missing(f"{unread} workflow(s) could not be read: jobs ahead of it may be left out",
                        lower_bound=False),)
    return ()


def _number(text: str, low: float, high: float) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and low <= value <= high else None


def minutes_text(value: object) -> str:
    """Return minutes as a person reads them (None / inf: later than the horizon)."""
    if value is None or (isinstance(value, float) and math.isinf(value)):
        return "not within the horizon"
    minutes = float(value)  # type: ignore[arg-type]
    if minutes < 1:
        return "at once (within a minute)"
    if minutes < 120:
        return f"{minutes:.0f} min"
    return f"{minutes / 60:.1f} h"


def actual_start_minutes(run: RunView) -> float | None:
    """Minutes from the run's submission to its first admission; None while it was never admitted."""
    admitted = [c.admitted for c in run.copies if c.admitted is not None]
    if not admitted or run.submitted is None:
        return None
    return max(0.0, (min(admitted) - run.submitted).total_seconds() / 60.0)


def add_request_routes(app: Flask, person_api: PersonApi, pool: Callable[[], Pool], refresh: Callable[[], None],
                       estimator: Estimator | None, services: Collection[str] | None, local_user: str = "",
                       read_now: Callable[[], Pool] | None = None,
                       admits_from: tuple[str, str] | None = None, gate_config: GateConfig | None = None,
                       find_job: Callable[[Pool, str, Action], RunView] | None = None) -> None:
    """Add /request, /request/<template>, and the job page's cancel and resubmit to `app`.

    `pool`: the pool as the reader may see it (cached); `read_now`: the whole pool read afresh, raising
    when the workflows cannot be listed (what a create checks its run id against; default: `pool`
    after `refresh`). `admits_from`: the gate's workflowNamespace and the configuration that says so (None: not
    checked); a console in another namespace creates nothing. `gate_config`: the installed gate configuration (or
    --config's): a job its admission checks would never admit is refused before it is parked, in the gate's words
    (the code `offhours submit` runs; None: not checked, the gate judges).
    """
    secret = secrets.token_bytes(32)
    ns = person_api.namespace

    def found(name: str, action: Action) -> RunView:
        """Return the one job `name` the person may do `action` on: the console's resolver (cluster/resolve.py) decides."""
        if find_job is None:  # no resolver, no lookup: never a job picked by name alone
            abort(403, description="this console resolves no job names")
        return find_job(pool(), name, action)
    # Parked where the gate does not admit from, a job waits for ever: the form says so and creates nothing.
    misplaced = None if admits_from is None else misplaced_namespace(f"namespace {ns}", ns, admits_from[0],
                                                                     admits_from[1], "console")
    # One check-then-create at a time: a double click's second POST reads the pool after the first created.
    creating = threading.Lock()
    app.jinja_env.globals.update(CSRF_FIELD=CSRF_FIELD, minutes_text=minutes_text, partial_note=partial_note)

    def form_key() -> str:
        """Return the request's identity's form key: one person's page never holds a key that posts as another."""
        token = bearer_token() if g.get("access") is not None else ""
        return hmac.new(secret, hashlib.sha256(token.encode()).digest(), hashlib.sha256).hexdigest()

    @app.context_processor
    def the_form_key() -> dict[str, str]:
        return {"form_key": form_key()}

    def person() -> Person:
        if g.access is None:
            return Person(local_user, None)
        return Person(g.access.user, bearer_token())

    def check_form_key() -> None:
        if not hmac.compare_digest(str(request.form.get(CSRF_FIELD, "")), form_key()):
            abort(400, description="this form is not the console's (its form key is missing or stale): reload the page")

    def refused(message: str, status: int, title: str = "refused") -> tuple[str, int]:
        return render_template("error.html", title=title, message=message, page="request"), status

    @app.get("/request")
    def request_list() -> Any:
        try:
            templates = person_api.templates(person())
        except Refused as err:
            return refused(str(err), 403)
        except CallFailed as err:
            return refused(str(err), 502, "unavailable")
        return render_template("request_list.html", templates=templates, namespace=person_api.namespace,
                               page="request")

    def read_template(name: str) -> dict[str, Any]:
        return person_api.template(person(), name)

    def live_refusal(run_id: str) -> str | None:
        """Return why a new workflow of `run_id` is refused (a copy of it is live, or none can be ruled out)."""
        try:
            if read_now is None:
                refresh()
            whole = read_now() if read_now is not None else pool()
        except Exception as err:  # noqa: BLE001 - unchecked is not created: one line naming the read
            return f"{run_id}: cannot check it for a live workflow ({str(err)[:300]}); nothing was created"
        live = live_copies(whole, run_id)
        if not live:
            return None
        if g.get("access") is not None and not g.access.jobs:  # names only what this identity may list
            return live_run_message(run_id, [])
        return live_run_message(run_id, live)

    def never_admitted_refusal(body: dict[str, Any]) -> str | None:
        """Return the gate's words if it would never admit `body` (its own checks, as `submit` runs them)."""
        if gate_config is None:
            return None
        try:  # the templates as the person sees them: a template's grace counts as the gate reads it
            templates: dict[str, Any] | None = {
                str((t.get("metadata") or {}).get("name", "")): t for t in person_api.templates(person())}
        except (Refused, CallFailed):
            templates = None  # unreadable here: the template's grace is the gate's to judge
        problem = never_admitted(body, gate_config, templates)
        return None if problem is None else f"{problem}. Nothing was created"

    def estimate_for(values: dict[str, str], form: Any, priority: int) -> tuple[Estimate | None, str | None,
                                                                                  dict[str, str], JobRequest | None]:
        """Return (estimate, why there is none, problems of the estimate's own fields, the request estimated)."""
        problems: dict[str, str] = {}
        hours = _number(str(form.get(HOURS_FIELD, DEFAULT_HOURS)), 0.01, 24 * 365)
        if hours is None:
            problems[HOURS_FIELD] = "expected hours: a number of hours from 0.01 to 8760"
        checkpoint = _number(str(form.get(CHECKPOINT_FIELD, DEFAULT_CHECKPOINT_MINUTES)), 1, 1440)
        if checkpoint is None:
            problems[CHECKPOINT_FIELD] = "checkpoint interval: a number of minutes from 1 to 1440"
        if problems or hours is None or checkpoint is None:
            return None, None, problems, None
        if estimator is None:
            return None, "no estimate: the console has no history to replay (see `offhours console --help`)", {}, None
        service, replicas = values.get("service", ""), values.get("replicas", "1")
        if not (replicas.isascii() and replicas.isdigit()) or int(replicas) < 1:
            return None, "no estimate until replicas is a whole number ≥ 1", {}, None
        if g.access is not None and not g.access.services:
            return None, (f"no estimate: {g.access.user or 'this identity'} may not list the serving Deployments, "
                          "whose replicas the estimate replays"), {}, None
        view = next((s for s in pool().services if s.name == service), None)
        # Before the gate's first record of a service nothing is lent: its Deployment's replicas are its baseline.
        baseline = None if view is None else view.baseline if view.baseline is not None else (
            view.replicas if not view.lent else None)
        if baseline is None:
            return None, f"no estimate: the console knows no baseline for service {service!r}", {}, None
        job = JobRequest(int(replicas), hours, checkpoint, priority)
        seen = pool()
        try:
            made = estimator.estimate(service, baseline, job, queue_ahead(seen, service, priority))
        except EstimateError as err:
            return None, f"no estimate: {err}", {}, None
        unknown = queue_unknown(seen, g.access.user or "this identity" if g.access is not None and not g.access.jobs
                                else None)
        return (dataclasses.replace(made, missing=(*unknown, *made.missing)) if unknown else made), None, {}, job

    @app.route("/request/<name>", methods=["GET", "POST"])
    def request_form(name: str) -> Any:
        try:
            template = read_template(name)
        except Refused as err:
            return refused(str(err), 403)
        except CallFailed as err:
            return refused(str(err), 404 if "(HTTP 404)" in str(err) else 502, "not found")
        unusable = template_refusal(template)  # before any field is read from it: one refusal, never a 500
        if unusable is not None:
            return refused(unusable, 422, "cannot use this template")
        if request.method == "GET":
            return render_template("request.html", template=template, name=name, fields=fields_of(template),
                                   form={HOURS_FIELD: DEFAULT_HOURS, CHECKPOINT_FIELD: DEFAULT_CHECKPOINT_MINUTES,
                                         PRIORITY_FIELD: "0"},
                                   extra={}, general=misplaced, estimate=None, no_estimate=None, page="request",
                                   source=estimator.source if estimator else None)
        check_form_key()
        form = request.form
        values = submitted_values(template, form)
        priority_text = str(form.get(PRIORITY_FIELD, "0")).strip() or "0"
        extra: dict[str, str] = {}
        try:
            priority = int(priority_text) if len(priority_text) < 12 else None
        except ValueError:
            priority = None
        checked = check_request(template, values, person_api.namespace, priority or 0, services)
        if priority is None:
            extra[PRIORITY_FIELD] = f"priority {priority_text[:20]!r}: expected a whole number"
            checked = Checked(None, checked.problems, checked.general)
        elif checked.general and checked.general.startswith("priority"):
            extra[PRIORITY_FIELD], checked = checked.general, Checked(None, checked.problems, None)
        estimate, no_estimate, estimate_problems, job = estimate_for(values, form, priority or 0)
        extra.update(estimate_problems)
        bad = checked.body is None or bool(extra)
        if form.get("action") == "submit" and misplaced is not None:
            return render_template("request.html", template=template, name=name,
                                   fields=fields_of(template, values, checked.problems), form=form, extra=extra,
                                   general=misplaced, estimate=estimate, no_estimate=no_estimate, page="request",
                                   source=estimator.source if estimator else None), 409
        if form.get("action") == "submit" and not bad:
            assert checked.body is not None
            with creating:
                why = never_admitted_refusal(checked.body) or live_refusal(
                    str(checked.body["metadata"]["labels"][LABEL_RUN_ID]))
                if why is None:
                    return create(template, name, checked.body, estimate, job, form, values, checked, extra,
                                  no_estimate)
            return render_template("request.html", template=template, name=name,
                                   fields=fields_of(template, values, checked.problems), form=form, extra=extra,
                                   general=why, estimate=estimate, no_estimate=no_estimate, page="request",
                                   source=estimator.source if estimator else None), 409
        status = 400 if bad else 200
        return render_template("request.html", template=template, name=name,
                               fields=fields_of(template, values, checked.problems), form=form, extra=extra,
                               general=checked.general or misplaced, estimate=estimate, no_estimate=no_estimate,
                               page="request", source=estimator.source if estimator else None), status

    def create(template: dict[str, Any], name: str, body: dict[str, Any], estimate: Estimate | None,
               job: JobRequest | None, form: Any, values: dict[str, str], checked: Checked, extra: dict[str, str],
               no_estimate: str | None) -> Any:
        who = person()
        stamp_person(body, who)
        if estimate is not None and job is not None:
            body["metadata"]["annotations"][ANNOTATION_ESTIMATE] = estimate_record(estimate, job, now_text())
        try:
            created = person_api.create(who, body)
        except (Refused, CallFailed) as err:
            status = 403 if isinstance(err, Refused) else 502
            return render_template("request.html", template=template, name=name,
                                   fields=fields_of(template, values, checked.problems), form=form, extra=extra,
                                   general=str(err), estimate=estimate, no_estimate=no_estimate, page="request",
                                   source=estimator.source if estimator else None), status
        refresh()
        return redirect(url_for("job_page", name=created))

    @app.post("/jobs/<name>/cancel")
    def cancel(name: str) -> Any:
        check_form_key()
        refresh()  # the run as it is now, not as the page's cached read had it: a tick may have parked a copy since
        run = found(name, CANCEL_JOB)
        live = cancellable(run)  # what the cluster says now: a copy already stopping is not stopped twice
        if not live:
            return refused(f"{run.run_id} has nothing to cancel: it is {run.state}", 409, "nothing to cancel")
        who = person()
        stopped: list[str] = []
        # Read again after the stops: a copy a gate tick parked meanwhile is stopped too (pool/views.py, CANCEL_ROUNDS).
        for _ in range(CANCEL_ROUNDS):
            for copy in live:
                try:
                    person_api.stop(who, copy.name, stop_patch(now_text()))
                except (Refused, CallFailed) as err:
                    if stopped:  # what was stopped stays stopped: the page says so, and the pool is read again
                        refresh()
                    done = f" ({', '.join(stopped)} stopping: exit handlers run)" if stopped else ""
                    if isinstance(err, Refused):
                        return refused(f"{err}{done}", 403)
                    return refused(f"{err}{done}", 502, "unavailable")
                stopped.append(copy.name)
            time.sleep(CANCEL_SETTLE_SECONDS)
            refresh()
            again = same_run(pool(), run)
            live = [c for c in cancellable(again) if c.name not in stopped] if again is not None else []
            if not live:
                break
        else:
            return refused(f"{run.run_id} still has live workflows after {CANCEL_ROUNDS} rounds of stops "
                           f"({', '.join(c.name for c in live)}): cancel it again", 409, "still live")
        return redirect(url_for("job_page", name=run.name))

    @app.post("/jobs/<name>/resubmit")
    def resubmit(name: str) -> Any:
        check_form_key()
        if misplaced is not None:
            return refused(misplaced, 409, "cannot resubmit")
        refresh()  # what the cluster says now: a page read before a stop finished must not resubmit beside live pods
        run = found(name, RESUBMIT_JOB)
        live = [c.name for c in unfinished(run)]
        if live:  # two live workflows of one run id: the gate would stop one of them as a duplicate
            return refused(f"{run.run_id} is {run.state} ({', '.join(live)}): cancel it before resubmitting", 409,
                           "cannot resubmit")
        who = person()
        try:
            original = person_api.workflow(who, run.copies[0].name)
            template_name = str(((original.get("spec") or {}).get("workflowTemplateRef") or {}).get("name") or "")
            if not template_name:
                return refused(f"{run.copies[0].name} names no WorkflowTemplate: only a templated job can be "
                               "resubmitted", 409, "cannot resubmit")
            template = person_api.template(who, template_name)
        except Refused as err:
            return refused(str(err), 403)
        except CallFailed as err:
            return refused(str(err), 502, "unavailable")
        unusable = template_refusal(template)
        if unusable is not None:
            return refused(unusable, 422, "cannot resubmit")
        params = {str(p.get("name")): str(p.get("value", "")) for p in
                  ((original.get("spec") or {}).get("arguments") or {}).get("parameters") or [] if isinstance(p, dict)}
        annotations = (original.get("metadata") or {}).get("annotations") or {}
        try:
            priority = int(str(annotations.get(ANNOTATION_PRIORITY, "0")))
        except ValueError:
            priority = 0
        values = {**fields_as_defaults(template), **params}
        checked = check_request(template, values, person_api.namespace, priority, services)
        if checked.body is None:
            problems = "; ".join(f"{k}: {v}" for k, v in checked.problems.items())
            return refused(f"{template_name} no longer accepts this job's values: {checked.general or problems}", 400,
                           "cannot resubmit")
        stamp_person(checked.body, who)
        kept = parse_estimate_record(annotations.get(ANNOTATION_ESTIMATE))
        if kept is not None and estimator is not None:
            estimate, _, _, job = estimate_for(values, {HOURS_FIELD: str(kept["hours"]),
                                                        CHECKPOINT_FIELD: str(kept["checkpointMinutes"])}, priority)
            if estimate is not None and job is not None:
                checked.body["metadata"]["annotations"][ANNOTATION_ESTIMATE] = estimate_record(estimate, job, now_text())
        # The new workflow's run id is its run-id parameter, which a tenant may have changed on the old workflow:
        # checked again here, or a resubmission joins another live run as its duplicate.
        with creating:
            why = never_admitted_refusal(checked.body) or live_refusal(
                str(checked.body["metadata"]["labels"][LABEL_RUN_ID]))
            if why is not None:
                return refused(why, 409, "cannot resubmit")
            try:
                created = person_api.create(who, checked.body)
            except Refused as err:
                return refused(str(err), 403)
            except CallFailed as err:
                return refused(str(err), 502, "unavailable")
        refresh()
        return redirect(url_for("job_page", name=created))


def fields_as_defaults(template: dict[str, Any]) -> dict[str, str]:
    """Return the template's defaults (required parameters left out)."""
    return {f.name: f.value for f in fields_of(template) if f.default is not None}


def stamp_person(body: dict[str, Any], who: Person) -> None:
    """Label the workflow with its creator, as Argo's server labels the workflows it creates for a person."""
    label = creator_label(who.user)
    if label:
        body["metadata"]["labels"][ARGO_CREATOR_LABEL] = label


def now_text() -> str:
    """Return now as the annotations' RFC 3339 seconds."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def kept_estimate(person_api: PersonApi | None, who: Person, run: RunView) -> dict[str, object] | None:
    """Return the estimate kept on the run's newest copy that has one (read as the person); None without."""
    if person_api is None:
        return None
    for copy in list(reversed(run.copies))[:KEPT_LOOKUPS]:
        try:
            workflow = person_api.workflow(who, copy.name)
        except (Refused, CallFailed):
            return None
        record = parse_estimate_record(((workflow.get("metadata") or {}).get("annotations") or {}).get(
            ANNOTATION_ESTIMATE))
        if record is not None:
            return record
    return None

