"""The Argo Workflow codec: what offhours reads from and writes to a Workflow object.

One place for both `Cluster`s (the Kubernetes one and the in-memory fake): reading a workflow as
the gate's `Job`, building a stopped run's parked copy, and the tolerant parsers these need.
Labels and annotations are tenant-writable, so nothing here trusts a value's type or form.
"""

import copy
import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from offhours.scripts.cluster.arguments import namespaced_template_name, submitted_arguments
from offhours.scripts.cluster.grace import own_grace, parameter_grace
from offhours.scripts.cluster.template_grace import direct_refs
from offhours.scripts.inputs.yamldoc import read_patch
from offhours.scripts.names import (
    ANNOTATION_ADMITTED_AT,
    ANNOTATION_BORROWED_FROM,
    ANNOTATION_CANCELLED_AT,
    ANNOTATION_COPY_TOKEN,
    ANNOTATION_EXIT_SECONDS,
    ANNOTATION_GPU_SECONDS,
    ANNOTATION_PARKED_FROM,
    ANNOTATION_PREEMPTED_AT,
    ANNOTATION_PREEMPTIONS,
    ANNOTATION_PRIORITY,
    ANNOTATION_PROGRESS,
    ANNOTATION_PROVENANCE,
    ANNOTATION_QUEUE_POSITION,
    ANNOTATION_RETURNED_AT,
    ANNOTATION_ROOT,
    ANNOTATION_WAITING_REASON,
    ARGO_API_VERSION,
    ARGO_CREATOR_LABEL,
    ARGO_LABEL_DOMAIN,
    ARGO_SCHEDULED_TIME_ANNOTATION,
    ARGO_SHUTDOWN_STRATEGIES,
    FINISHED_PHASES,
    LABEL_COPY_OF,
    LABEL_REPLICAS,
    LABEL_RUN_ID,
    LABEL_SERVICE,
    LABEL_STATE,
    LABEL_USER,
    POD_GC_KEEPING_STRATEGIES,
    STATE_ADMITTED,
    STATE_PARKED,
    STATE_RETURNED,
)
from offhours.scripts.names import GRACE_PARAMETER as GRACE_PARAMETER
from offhours.scripts.policy.boundary import admission_refusal
from offhours.scripts.policy.plan import ADMITTED, PARKED, UNMANAGED, Job
from offhours.scripts.runtime.provenance import ProvenanceError, decode, encode, pinned_arguments

# The Workflow resource's plural in Argo's API.
PLURAL = "workflows"
MIN_PRIORITY, MAX_PRIORITY = -1000, 1000  # `offhours submit` refuses others; the gate reads them as a problem
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?\Z")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
MAX_EXIT_SECONDS = 86_400  # a longer stop is not a measurement: ignored


def workflow_job(wf: dict[str, Any], service: str | None = None) -> Job | None:
    """Read a workflow as a `Job`, or None if it is finished, stopped or not offhours'.

    Labels and annotations are written by tenants too: every value is parsed defensively. A
    value the gate cannot trust (a replica count that is not a small positive integer) makes the
    job's `problem`: it is never admitted, and it is stopped if it runs. A workflow that cannot be
    read at all, whatever the exception, is such a job too: its fault, never its service's tick.
    """
    try:
        return _read_job(wf, service)
    except Exception as err:  # noqa: BLE001 - one tenant's object must not fail every job of the service
        return _unreadable_job(wf, service, err)


def _unreadable_job(wf: Any, service: str | None, err: Exception) -> Job | None:
    meta = wf.get("metadata") if isinstance(wf, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    labels = _str_map(meta.get("labels"))
    if service is not None and labels.get(LABEL_SERVICE) != service:
        return None
    spec = wf.get("spec") if isinstance(wf, dict) else None
    suspended = isinstance(spec, dict) and bool(spec.get("suspend"))
    admitted = labels.get(LABEL_STATE) == STATE_ADMITTED and not suspended
    return Job(name=str(meta.get("name", "")), service=labels.get(LABEL_SERVICE, ""), replicas=0,
               state=ADMITTED if admitted else PARKED, uid=str(meta.get("uid") or ""),
               problem=f"the workflow could not be read ({type(err).__name__}: {str(err)[:200]})")


def _read_job(wf: dict[str, Any], service: str | None) -> Job | None:
    meta, spec, status = _dict(wf.get("metadata")), _dict(wf.get("spec")), _dict(wf.get("status"))
    labels = _str_map(meta.get("labels"))
    annotations = _str_map(meta.get("annotations"))
    if service is not None and labels.get(LABEL_SERVICE) != service:
        return None
    if status.get("phase") in FINISHED_PHASES or spec.get("shutdown") in ARGO_SHUTDOWN_STRATEGIES:
        return None
    finishing = _work_done(str(meta.get("name", "")), status)
    state = labels.get(LABEL_STATE)
    # Returned: its exit hook says it gave its GPUs back. Read as running without admission all the same: the label
    # and the status are anyone's to write, so only the gate's record of what it admitted makes it returned (the
    # gate then lists it no more). Never preempted: the gate's stop is the shutdown above, so a workflow so labelled
    # without one runs again (`argo retry`), whatever its status says.
    returned = state == STATE_RETURNED and finishing
    # Argo's verbs leave our label as it was: `retry` or `resubmit` of a preempted (or returned) workflow
    # runs it again under that label, `suspend` of a running one keeps its pods. Only a workflow the gate
    # parked (or created parked) is parked; anything else not admitted runs without admission: counted
    # against nothing, adopted or stopped like any other.
    # `argo suspend` starts no new step but leaves running pods running: suspended with a pod still
    # pending or running is a workflow that holds GPUs, whatever its label says. Labelled admitted, one that
    # never had a pod is parked (an admission that never landed, whatever a tenant labelled it): it waits in
    # the queue and what it was lent is serving's again; one suspended after a step ran is its owner's pause,
    # counted and stoppable, never resumed by the gate's next admission.
    if spec.get("suspend") and (state in (None, STATE_PARKED) and not _pods_live(status)
                                or state == STATE_ADMITTED and not _ever_ran(status)):
        state = PARKED
    elif state != STATE_ADMITTED:
        state = UNMANAGED
    else:
        state = ADMITTED
    identity = run_identity(wf)
    replicas, problem = tenant_replicas(labels.get(LABEL_REPLICAS))
    priority, priority_problem = tenant_priority(annotations.get(ANNOTATION_PRIORITY))
    # Which run it is comes first: a workflow the gate cannot place in one run is never admitted, whatever else.
    problem = identity.problem or problem or priority_problem or admission_refusal(spec, read_patch)  # hook: boundary
    position = annotations.get(ANNOTATION_QUEUE_POSITION, "")
    learnt = _seconds(annotations.get(ANNOTATION_EXIT_SECONDS))
    own = own_grace(wf)
    refs = direct_refs(spec)
    return Job(
        name=str(meta.get("name", "")),
        service=labels.get(LABEL_SERVICE, ""),
        replicas=replicas,
        state=state,
        priority=priority,
        created=_timestamp(meta.get("creationTimestamp")) or 0.0,
        progress_at=_timestamp(annotations.get(ANNOTATION_PROGRESS)),
        started=_timestamp(status.get("startedAt")),
        parked_from=_object_name(annotations.get(ANNOTATION_PARKED_FROM)),
        run_id=identity.run_id,
        run_problem=identity.problem,
        checkpoint_prefix=_checkpoint_prefix(wf, identity),
        finishing=finishing,
        problem=problem,
        uid=str(meta.get("uid") or ""),
        borrowed_from=annotations.get(ANNOTATION_BORROWED_FROM) or None,
        copy_of=labels.get(LABEL_COPY_OF) or None,
        copy_token=annotations.get(ANNOTATION_COPY_TOKEN) or None,
        waiting_reason=annotations.get(ANNOTATION_WAITING_REASON),
        queue_position=_whole(position),
        exit_seconds=learnt if learnt is not None else _seconds(_parameters(wf).get(GRACE_PARAMETER)),
        exit_learnt=learnt is not None,
        template=namespaced_template_name(wf),
        arguments=tuple(submitted_arguments(wf)),
        grace_parameter=parameter_grace(wf),
        own_grace=None if own is None else own[0],
        own_grace_at=None if own is None else own[1],
        pods_kept=_pods_kept(spec, status),
        returned=returned,
        template_refs=refs,
        template_spec=spec if refs else None,
        cancelled=cancelled(wf),
    )


class CancelledWorkflow(ValueError):
    """The workflow carries the cancel's mark: its run was cancelled, and no copy of it is made."""


def cancelled(wf: dict[str, Any]) -> bool:
    """Whether the workflow carries the mark `offhours cancel` writes (`stop_patch`): its run was cancelled.

    Tenant-written like any annotation, and honoured all the same: it can only keep the workflow that carries it
    (and the copies made of it) from running, never another workflow, whatever run id it claims.
    """
    annotations = _dict(_dict(wf.get("metadata")).get("annotations"))
    return bool(annotations.get(ANNOTATION_CANCELLED_AT))


def _pods_kept(spec: dict[str, Any], status: dict[str, Any]) -> bool:
    """Whether no pod GC of the workflow (its own spec, or the template it was stored from) deletes a pod as it ends.

    With `OnPodSuccess` the pod that checkpointed and exited is gone by the time the gate reads the
    pods, and the stop would be measured from the quick ones left. An unknown strategy counts as deleting.
    """
    for owner in (spec, _dict(status.get("storedWorkflowTemplateSpec"))):
        gc = owner.get("podGC")
        if gc is None:
            continue
        strategy = gc.get("strategy", "") if isinstance(gc, dict) else None
        if strategy not in POD_GC_KEEPING_STRATEGIES:
            return False
    return True


def succeeded(wf: dict[str, Any]) -> bool | None:
    """Whether a workflow's own work succeeded: True, False (it ended otherwise or was shut down), None (still going).

    Success is what Argo's controller writes on the root node: `Succeeded`, with the time it finished. It says so
    before the workflow's phase does (while only its exit handler runs). `status.phase` alone is no evidence:
    Argo's CRDs have no status subresource, so a tenant may write its own workflow's phase, and a workflow whose
    node status Argo offloaded shows no root node; either reads as ended, never as succeeded.
    """
    meta, spec, status = _dict(wf.get("metadata")), _dict(wf.get("spec")), _dict(wf.get("status"))
    root = _dict(_dict(status.get("nodes")).get(str(meta.get("name", ""))))
    if root.get("phase") == "Succeeded" and root.get("finishedAt"):
        return True
    if status.get("phase") in FINISHED_PHASES or root.get("phase") in ("Failed", "Error") \
            or spec.get("shutdown") in ARGO_SHUTDOWN_STRATEGIES:
        return False
    return None


def exit_seconds_text(seconds: float) -> str:
    """Write an exit time as the annotation holds it: whole seconds."""
    return str(max(0, round(seconds)))


def measured_exit_seconds(wf: dict[str, Any]) -> float | None:
    """How long the workflow's last stop took to give its GPUs back (preempted-at to returned-at), if both are stamped."""
    annotations = _str_map(_dict(wf.get("metadata")).get("annotations"))
    stopped, returned = (_timestamp(annotations.get(a)) for a in (ANNOTATION_PREEMPTED_AT, ANNOTATION_RETURNED_AT))
    if stopped is None or returned is None or not 0 <= returned - stopped <= MAX_EXIT_SECONDS:
        return None
    return returned - stopped


def grace_capped_parameters(wf: dict[str, Any], cap_seconds: float) -> list[Any] | None:
    """Return the workflow's arguments with its grace period at most `cap_seconds` (whole seconds); None if so already.

    The research steps take their pod's terminationGracePeriodSeconds from this workflow parameter,
    so what the gate writes here at admission bounds every pod created after it: the time Argo's
    stop (SIGTERM, then SIGKILL after the pod's grace) or the scheduler's preemption may take. A value
    that is not a whole number (tenant-written), a `valueFrom`, or no such parameter at all is
    replaced by the cap; the other parameters are kept as they are.
    """
    cap = max(0, int(cap_seconds))
    params = _dict(_dict(wf.get("spec")).get("arguments")).get("parameters")
    params = params if isinstance(params, list) else []
    out: list[Any] = []
    found = changed = False
    for param in params:
        if not (isinstance(param, dict) and param.get("name") == GRACE_PARAMETER):
            out.append(param)
            continue
        found = True
        value = param.get("value")
        declared = _whole(value) if isinstance(value, str) else None
        if declared is not None and declared <= cap and set(param) <= {"name", "value", "description"}:
            out.append(param)
        else:
            out.append({"name": GRACE_PARAMETER, "value": str(cap)})
            changed = True
    if not found:
        out.append({"name": GRACE_PARAMETER, "value": str(cap)})
        changed = True
    return out if changed else None


def own_grace_refusal(wf: dict[str, Any], job: Job, cap_seconds: float) -> str | None:
    """Why `wf` as read now may not be admitted or adopted; None if it may.

    Refused: its own spec gives its pods more than the cap, or it refers to other WorkflowTemplates than
    when the tick judged them (`Job.template_refs`).

    The tick checked the workflow as it listed it; an admission reads it again to cap its parameter, and
    whatever a tenant changed in between is in that read. A job whose work has ended is not checked (the tick
    does not check it either: only its exit handler runs).
    """
    if job.finishing:
        return None
    own = own_grace(wf)
    if own is not None and own[0] > cap_seconds:
        shown = "not a whole number of seconds" if math.isinf(own[0]) else f"{own[0]:.0f} s"
        return f"its pods' grace period is now its own ({own[1]}: {shown}), above the cap of {cap_seconds:g} s"
    if direct_refs(_dict(wf.get("spec"))) != job.template_refs:
        # The tick judged its pods' grace by the templates it referred to then: judged again on the next tick.
        return "the WorkflowTemplates it refers to changed since the tick read it (its pods' grace is judged again)"
    return None


def _seconds(value: str | None) -> float | None:
    """Return a whole number of seconds (a declared grace, an exit time) up to a day; None if it is not one."""
    seconds = _whole(value)
    return float(seconds) if seconds is not None and seconds <= MAX_EXIT_SECONDS else None



def _whole(text: str | None) -> int | None:
    """Return `text` as a whole number of ASCII digits, None for anything else.

    `str.isdigit` alone also accepts digits `int` refuses ("²"): a tenant's annotation must never
    turn reading the workflow into an exception.
    """
    return int(text) if text is not None and text.isascii() and text.isdigit() else None


def tenant_replicas(text: str | None) -> tuple[int, str | None]:
    """Return the replicas a workflow borrows (its label, tenant-written): a small whole number > 0, else 0 and why."""
    text = text or ""
    replicas = (_whole(text) or 0) if len(text) <= 4 else 0
    if replicas <= 0:
        return 0, f"label {LABEL_REPLICAS}={text!r} is not a positive whole number of replicas"
    return replicas, None


def tenant_priority(text: str | None) -> tuple[int, str | None]:
    """Return a workflow's admission priority (its annotation, tenant-written), and the problem if it is out of bounds.

    Unreadable is the default (0), as `offhours submit` writes it; a number outside the bounds submit
    enforces is a tenant's attempt to jump the queue: 0, and a problem (the job is never admitted).
    """
    priority = _signed(text)
    if priority is None:
        return 0, None
    if not MIN_PRIORITY <= priority <= MAX_PRIORITY:
        return 0, f"annotation {ANNOTATION_PRIORITY}={priority} is outside {MIN_PRIORITY}..{MAX_PRIORITY}"
    return priority, None


# The run-id argument of a scheduled run (`offhours schedule`): `<prefix>-{{=NIGHT_EXPRESSION}}`, which Argo
# resolves from the run's `workflow.scheduledTime` (the scheduled-time annotation its controller writes).
NIGHT_EXPRESSION = ("sprig.replace('T', '-', sprig.replace(':', '', sprig.replace('-', '', "
                    "sprig.substr(0, 16, workflow.scheduledTime))))")
_NIGHT_SUFFIX = "-{{=" + NIGHT_EXPRESSION + "}}"
_NIGHT_ID = re.compile(r"-(\d{8})-(\d{4})$")  # what that expression gives: the firing's date and minute
# How far the API server's clock (creationTimestamp) may trail the Argo controller's (scheduledTime).
SCHEDULE_SKEW_SECONDS = 60.0
RUN_ID_PARAMETER = "run-id"


@dataclass(frozen=True)
class RunIdentity:
    """Which run a workflow is: its `offhours.io/run-id` label and its `run-id` parameter, read once.

    The steps write checkpoints under the parameter (`<checkpoint-uri>/<run-id>/<step>`), the gate and every
    reader group by the label: both are tenant-written, so when they disagree, or the parameter is not a value
    the gate can know before the steps run, the workflow is never admitted (`problem`) and answers to every id
    it names (`ids`): a live workflow of either one is a live copy of both.
    """

    run_id: str | None  # what its checkpoints are under: the parameter if readable, else the label (None: neither)
    label: str | None = None  # the label's value, if it is a run id
    parameter: str | None = None  # the parameter's value as the steps read it, if it can be known and is a run id
    problem: str | None = None  # why the run id cannot be trusted; None: one run id (or none at all)

    @property
    def ids(self) -> tuple[str, ...]:
        """Every run id the workflow answers to (its parameter and its label, once each)."""
        return tuple(dict.fromkeys(i for i in (self.parameter, self.label) if i))


def run_identity(wf: dict[str, Any]) -> RunIdentity:
    """Read a workflow's run identity (see `RunIdentity`); never raises, whatever a tenant wrote.

    A run id that names a scheduled run's firing (`<prefix>-YYYYMMDD-HHMM`, UTC as Argo writes it) later than the
    workflow's creation is not its run: a scheduled run's workflow is created as its CronWorkflow fires, and the
    creationTimestamp is the API server's (every other mark, a tenant may write). Taken first, the id would be
    the tenant's run: the scheduled run, once it fires, would wait behind it.
    """
    identity = _run_identity(wf)
    if identity.problem is None:
        created = _timestamp(_dict(wf.get("metadata")).get("creationTimestamp"))
        early = next((run for run in identity.ids if before_its_night(run, created)), None)
        if early is not None:
            return replace(identity, problem=f"it was created before the time its run id names ({early}: a "
                                             "scheduled run's, created when its CronWorkflow fires, never before)")
    return identity


def night_of(run: str) -> float | None:
    """Return the firing a run id names if it ends as a scheduled run's does (`-YYYYMMDD-HHMM`, UTC); else None."""
    found = _NIGHT_ID.search(run)
    if found is None:
        return None
    try:
        night = datetime.strptime(found.group(1) + found.group(2), "%Y%m%d%H%M").replace(tzinfo=timezone.utc)
    except ValueError:
        return None  # no date: an ordinary run id
    return night.timestamp()


def before_its_night(run: str, created: float | None) -> bool:
    """Whether `run` names a scheduled run's firing later than `created` (or no creation time is known)."""
    night = night_of(run)
    return night is not None and (created is None or night > created + SCHEDULE_SKEW_SECONDS)


def _run_identity(wf: dict[str, Any]) -> RunIdentity:
    meta = _dict(wf.get("metadata"))
    raw_label = _dict(meta.get("labels")).get(LABEL_RUN_ID)
    label = raw_label if isinstance(raw_label, str) and _is_name(raw_label, 63) else None
    params = _dict(_dict(wf.get("spec")).get("arguments")).get("parameters")
    declared = [p for p in params if isinstance(p, dict) and p.get("name") == RUN_ID_PARAMETER] \
        if isinstance(params, list) else []
    if not declared:
        return RunIdentity(label, label)
    shown = f"{LABEL_RUN_ID}={str(raw_label)[:80]!r}" if raw_label is not None else f"no {LABEL_RUN_ID} label"
    if len(declared) > 1:
        return RunIdentity(label, label, problem=f"it sets the {RUN_ID_PARAMETER} parameter {len(declared)} times: "
                                                   "which one its steps read is not known")
    parameter, why = _run_id_parameter(declared[0], _str_map(meta.get("annotations")))
    if parameter is None:
        return RunIdentity(label, label, problem=f"its {RUN_ID_PARAMETER} parameter {why}: its steps' checkpoint "
                                                   f"store is not known ({shown})")
    if raw_label is not None and raw_label != parameter:
        return RunIdentity(parameter, label, parameter,
                           problem=f"its {RUN_ID_PARAMETER} parameter {parameter!r} and its label {shown} disagree: "
                                   "its steps write the parameter's checkpoints, the gate reads the label")
    return RunIdentity(parameter, label, parameter)


def _run_id_parameter(param: dict[str, Any], annotations: dict[str, str]) -> tuple[str | None, str]:
    """Return the run id a `run-id` parameter gives the steps, or None and why it cannot be known here."""
    value = param.get("value")
    if "valueFrom" in param:
        return None, "is a valueFrom (read when the workflow runs)"
    if not isinstance(value, str):
        return None, "has no text value"
    if value.endswith(_NIGHT_SUFFIX) and "{{" not in value[:-len(_NIGHT_SUFFIX)]:
        # A scheduled run: Argo resolves it from the scheduled time its controller recorded, and so can the gate.
        night = _night(annotations.get(ARGO_SCHEDULED_TIME_ANNOTATION))
        if not night:
            return None, f"is a scheduled run's, without the {ARGO_SCHEDULED_TIME_ANNOTATION} annotation it is read from"
        value = f"{value[:-len(_NIGHT_SUFFIX)]}-{night}"
    elif "{{" in value:
        return None, f"is an Argo expression ({value[:80]!r}), resolved only when the workflow runs"
    if not _is_name(value, 63):
        return None, f"{value[:80]!r} is not a run id (a DNS label of at most 63 characters)"
    return value, ""


def _night(scheduled: str | None) -> str | None:
    """Return what `NIGHT_EXPRESSION` gives for a scheduled time (sprig's substr keeps a shorter text whole)."""
    if not scheduled:
        return None
    return scheduled[:16].replace("-", "").replace(":", "").replace("T", "-")


def _object_name(value: str | None) -> str | None:
    """Return a tenant-written object name if it is one (a DNS subdomain); None for anything else.

    As strict as the API server (each dot-separated part begins and ends with a letter or digit): the gate names
    its copies after such a value, and a name the API server refuses would fail the park, and the stop after it.
    """
    return value if value and len(value) <= 253 and value.isascii() and bool(_SUBDOMAIN.fullmatch(value)) else None


def _is_name(value: str, limit: int) -> bool:
    # fullmatch: `$` also matches before a trailing newline, which no label value or object name may hold.
    return len(value) <= limit and value.isascii() and bool(_NAME.fullmatch(value))


def _signed(text: str | None) -> int | None:
    """Return `text` as a whole number (ASCII digits, an optional sign, at most 20 characters), None for anything else."""
    if text is None or len(text) > 20:
        return None
    digits = text[1:] if text[:1] in ("-", "+") else text
    number = _whole(digits)
    return None if number is None else (-number if text.startswith("-") else number)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str_map(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _work_done(name: str, status: dict[str, Any]) -> bool:
    """Whether the workflow's own work has ended and only its exit handler runs (Argo's `<name>.onExit` node)."""
    nodes = _dict(status.get("nodes"))
    root = _dict(nodes.get(name))
    if root.get("phase") in ("Succeeded", "Failed", "Error", "Skipped", "Omitted"):
        return True
    return any(isinstance(n, dict) and str(n.get("name", "")) == f"{name}.onExit" for n in nodes.values())


def _ever_ran(status: dict[str, Any]) -> bool:
    """Whether the workflow ever had a pod: an admission that never landed has none, an owner's suspend after a step has.

    Suspended and never run, it holds nothing whatever its label says (it waits, parked); suspended after a
    step ran, its owner paused it (`argo suspend`) and it stays counted and stoppable. An offloaded node
    status (`offloadNodeStatusVersion`) may hide its pods: it ran, the safe side.
    """
    if status.get("offloadNodeStatusVersion"):
        return True
    return any(isinstance(n, dict) and n.get("type") == "Pod" for n in _dict(status.get("nodes")).values())


def _pods_live(status: dict[str, Any]) -> bool:
    """Whether any of the workflow's pods is still pending or running (Argo's Pod nodes).

    A workflow whose node status Argo offloaded (`offloadNodeStatusVersion`: its nodes are in Argo's database,
    not on the object) may have pods running that the object does not show: live, the safe side.
    """
    if status.get("offloadNodeStatusVersion"):
        return True
    return any(isinstance(n, dict) and n.get("type") == "Pod" and n.get("phase") in ("Pending", "Running")
               for n in _dict(status.get("nodes")).values())


def _parameters(wf: dict[str, Any]) -> dict[str, str]:
    params = _dict(_dict(wf.get("spec")).get("arguments")).get("parameters")
    if not isinstance(params, list):
        return {}
    return {str(p.get("name")): str(p.get("value")) for p in params if isinstance(p, dict) and p.get("value") is not None}


def checkpoint_prefix(wf: dict[str, Any]) -> str | None:
    """Where a workflow's steps record progress, as the gate reads it (offhours why reads the same place)."""
    return _checkpoint_prefix(wf, run_identity(wf))


def _checkpoint_prefix(wf: dict[str, Any], identity: RunIdentity) -> str | None:
    """Where the steps record progress: `<checkpoint-uri>/<run-id>`, the run id as they read it (the parameter)."""
    uri = _parameters(wf).get("checkpoint-uri")
    return f"{str(uri).rstrip('/')}/{identity.parameter}" if uri and identity.parameter else None


def _int(value: str | None, default: int) -> int:
    try:
        number = int(value) if value is not None else default
    except ValueError:
        return default
    return number if abs(number) <= 1_000_000 else default


def _timestamp(value: Any) -> float | None:
    """Return a time as epoch seconds from a number or RFC 3339 text; None for anything else (tenants write these)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if not value:
        return None
    try:
        number = float(value)
        return number if math.isfinite(number) else None
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except (ValueError, OverflowError):
        return None


def parked_copy_name(root: str, preemptions: int) -> str:
    """Name the parked copy after a run's `preemptions`-th stop.

    `root` is the name of the run's first workflow, carried on every copy, so names are unique by
    construction (`train-p2456` and `train-p7789` have different roots) and deterministic, so
    parking is idempotent. Cut to fit, it still ends in a letter or digit (a DNS subdomain's part must).
    """
    return f"{_cut(root, 230)}-p{preemptions}"


def _cut(name: str, limit: int) -> str:
    """Return the first `limit` characters of a DNS subdomain, without a trailing '.' or '-' (so more may follow)."""
    return name[:limit].rstrip(".-") or "x"


def build_parked_copy(old: dict[str, Any], token: str = "", reported: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Return a new Workflow that runs `old` again from its checkpoints: same spec and run id, parked.

    Only what defines the job is copied (spec, labels, annotations); status, identity and the
    records of the old run (admission, preemption, return, waiting reason) are not. The copy is
    linked to its original by label (`offhours.io/copy-of`: the original's UID) and keeps the run
    id; the preemption count goes up by one, so preemptions are told apart from failures. It carries
    `token`, the value the gate recorded for this stop (none: no token). A workflow whose run was cancelled
    (`cancelled`) is never copied: `CancelledWorkflow`. Its images run by the digests its run first reported
    (`reported`: image reference -> digest, as the original's pods report them; the provenance record's win).
    """
    meta = old["metadata"]
    if cancelled(old):
        raise CancelledWorkflow(f"workflow {meta.get('name')} carries {ANNOTATION_CANCELLED_AT}: its run was "
                                "cancelled, no copy is parked")
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if not k.startswith(f"{ARGO_LABEL_DOMAIN}/")}
    labels[LABEL_STATE] = STATE_PARKED
    labels[LABEL_COPY_OF] = str(meta.get("uid") or "")
    # The gate creates the copy, so Argo stamps no creator on it: it keeps its original's, as offhours' user.
    creator = (meta.get("labels") or {}).get(ARGO_CREATOR_LABEL)
    if isinstance(creator, str) and creator and LABEL_USER not in labels:
        labels[LABEL_USER] = creator
    # Its run label is the run its steps write (the parameter, as the gate reads it), else the original's label if
    # that is a run id; never a value that is no label value: the create would fail, and the stop after it.
    identity = run_identity(old)
    run = identity.parameter or identity.label
    if run:
        labels[LABEL_RUN_ID] = run
    else:
        labels.pop(LABEL_RUN_ID, None)
    dropped = (ANNOTATION_ADMITTED_AT, ANNOTATION_PREEMPTED_AT, ANNOTATION_RETURNED_AT, ANNOTATION_BORROWED_FROM,
               ANNOTATION_WAITING_REASON, ANNOTATION_QUEUE_POSITION, ANNOTATION_GPU_SECONDS)
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in dropped}
    annotations[ANNOTATION_PREEMPTIONS] = str(max(0, _int(annotations.get(ANNOTATION_PREEMPTIONS), 0)) + 1)
    annotations[ANNOTATION_PARKED_FROM] = meta["name"]
    annotations.pop(ANNOTATION_COPY_TOKEN, None)  # the original's own, if it is a copy: this copy's is another
    if token:
        annotations[ANNOTATION_COPY_TOKEN] = token
    # The run's first name, if it is one: a tenant's value that is no object name would make the create fail.
    annotations[ANNOTATION_ROOT] = root = _object_name(annotations.get(ANNOTATION_ROOT)) or meta["name"]
    spec = copy.deepcopy(old["spec"])
    spec.pop("shutdown", None)
    spec["suspend"] = True
    _carry_provenance(annotations, spec, run, reported or {})
    name = parked_copy_name(root, int(annotations[ANNOTATION_PREEMPTIONS]))
    return {
        "apiVersion": old.get("apiVersion", ARGO_API_VERSION),
        "kind": "Workflow",
        "metadata": {"name": name, "namespace": meta.get("namespace"), "labels": labels, "annotations": annotations},
        "spec": spec,
    }


def provenance_at_stop(wf: dict[str, Any], reported: Mapping[str, str]) -> dict[str, str]:
    """Return the annotation to write with a stop: the run's record with the digests its pods report now, or nothing.

    Written in the stop's own patch, while the pods that report them still exist: once stopped they end and may be
    deleted before the copy is made, and the copy's images are pinned by the record (its digests win). A record
    that is not this run's, or one that gains nothing, is left as it is.
    """
    meta = _dict(wf.get("metadata"))
    text = _dict(meta.get("annotations")).get(ANNOTATION_PROVENANCE)
    run = run_identity(wf).run_id
    if not isinstance(text, str) or not run or not reported:
        return {}
    try:
        record = decode(text, run)
    except ProvenanceError:
        return {}
    pinned = record.with_digests(reported)
    return {} if pinned.digests == record.digests else {ANNOTATION_PROVENANCE: encode(pinned)}


def _carry_provenance(annotations: dict[str, str], spec: dict[str, Any], run: str | None,
                      reported: Mapping[str, str]) -> None:
    """Pin the copy's image arguments to its run's first digests; carry the record with them, or none at all.

    A record that is not this run's (malformed, oversized, another run's) is dropped, never carried: the copy's
    arguments are then pinned by what its original's pods reported only.
    """
    text = annotations.pop(ANNOTATION_PROVENANCE, None)
    record = None
    if text is not None and run:
        try:
            record = decode(text, run).with_digests(reported)
            annotations[ANNOTATION_PROVENANCE] = encode(record)
        except ProvenanceError:
            record = None
    arguments = spec.get("arguments")
    if isinstance(arguments, dict) and isinstance(arguments.get("parameters"), list):
        arguments["parameters"] = pinned_arguments(arguments["parameters"], record, reported)


def is_own_copy(existing: dict[str, Any], original: dict[str, Any], made: Collection[str], token: str = "") -> bool:
    """Whether `existing` is a parked copy of `original` the gate made (its UID is one of `made`, the gate's record).

    Linked by the original's UID, and its own UID one the gate recorded making: the link is a label, which anyone
    may write; the UID is the API server's. Or it carries `token`, the one recorded for this stop: a copy the gate
    made but whose UID it never learnt (the create's answer was lost, or the gate died before recording it), known
    as the next tick's `lineages_of` knows it. The token is random and first written by the gate's own create.
    """
    meta = _dict(existing.get("metadata"))
    uid = str(_dict(original.get("metadata")).get("uid") or "")
    if not uid or _str_map(meta.get("labels")).get(LABEL_COPY_OF) != uid:
        return False
    return str(meta.get("uid") or "") in made or bool(token) and \
        _str_map(meta.get("annotations")).get(ANNOTATION_COPY_TOKEN) == token


def same_workflow(wf: dict[str, Any], job: Job, what: str) -> str | None:
    """Why `wf`, read by `job`'s name, is not the workflow the tick listed (another UID: deleted and made again)."""
    uid = str(_dict(wf.get("metadata")).get("uid") or "")
    if job.uid and uid != job.uid:
        return (f"{what} workflow {job.name}: it is another workflow now (uid {uid[:40]}, the tick listed {job.uid}): "
                "it was deleted and made again since")
    return None


def elsewhere(copy_: dict[str, Any]) -> dict[str, Any]:
    """Return the copy under a name the API server makes unique (`generateName`): its own is taken by another workflow.

    Names of the gate's objects are never a tenant's choice: a decoy under the copy's usual name
    neither fails the park nor is taken for the copy.
    """
    out = copy.deepcopy(copy_)
    name = out["metadata"].pop("name")
    out["metadata"]["generateName"] = f"{_cut(name, 240)}-"
    return out
