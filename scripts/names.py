"""The names of every object offhours reads or writes, and of every mark it puts on them: one place.

Labels and annotations on Workflows and Deployments, the workflow states the gate writes, the
Lease, the ConfigMaps, the ServiceAccounts and PriorityClass, the templates, the Argo API group,
the Event reasons. Everything else imports them from here, so a renamed object is renamed
everywhere at once, and `offhours check` verifies exactly what the templates install.
"""

from offhours import __version__

# -- the Argo Workflows API -------------------------------------------------------------------------
ARGO_GROUP = "argoproj.io"
ARGO_VERSION = "v1alpha1"
ARGO_API_VERSION = f"{ARGO_GROUP}/{ARGO_VERSION}"
"""`apiVersion` of every Argo object."""
ARGO_CREATOR_LABEL = "workflows.argoproj.io/creator"
"""Set by the Argo server on workflows it creates for a logged-in person."""
ARGO_LABEL_DOMAIN = "workflows.argoproj.io"
"""The prefix (with a slash) of labels Argo's controller and server set on workflows (phase, completed, creator, ...)."""
ARGO_RESUBMITTED_LABEL = "workflows.argoproj.io/resubmitted-from-workflow"
"""Set by `argo resubmit` on the workflow it creates: the name of the one it was made from."""
ARGO_SCHEDULED_TIME_ANNOTATION = "workflows.argoproj.io/scheduled-time"
"""Set by Argo's controller on each run a CronWorkflow creates: the firing, read by Argo as `workflow.scheduledTime`."""
KEDA_GROUP, KEDA_VERSION = "keda.sh", "v1alpha1"
"""KEDA's ScaledObjects: with one present, lending caps its maxReplicas."""
ARGO_COMPLETED_LABEL = "workflows.argoproj.io/completed"
"""Set to "true" by the Argo controller on a workflow that has ended: list selectors leave those out."""
ARGO_WORKFLOW_LABEL = "workflows.argoproj.io/workflow"
"""Set by Argo on every pod of a workflow, to the workflow's name: how the gate finds a stopped job's pods."""
FINISHED_PHASES = ("Succeeded", "Failed", "Error")
"""Argo phases of a workflow that has ended."""
POD_ENDED_PHASES = ("Succeeded", "Failed")
"""A Pod's status.phase once the kubelet has stopped all its containers."""
POD_GC_KEEPING_STRATEGIES = ("", "OnWorkflowCompletion", "OnWorkflowSuccess")
"""Argo podGC strategies that delete no pod before its workflow has ended (any other may delete one as it ends)."""
GPU_RESOURCE = "nvidia.com/gpu"
"""The extended resource a GPU pod requests (NVIDIA's device plugin): what lent replicas and research pods hold."""
ARGO_SHUTDOWN_STRATEGIES = ("Stop", "Terminate")
"""The spec.shutdown values Argo acts on; under any other its pods run on as if there were none."""

# -- images -----------------------------------------------------------------------------------------
OFFHOURS_IMAGE = f"ghcr.io/offhours/offhours:{__version__}"
"""Default image of the launcher init container, the parameter check, the exit hook and the gate
(`offhours render --image` replaces it; it is never a workflow parameter)."""
REFERENCE_JOB_IMAGE = f"ghcr.io/offhours/reference-job:{__version__}"
"""Image of the reference research job (examples/reference-job), the single-job template's example."""

# -- templates ----------------------------------------------------------------------------------------
STEPS_TEMPLATE = "offhours-steps"
"""The WorkflowTemplate that holds every step template."""
PIPELINE_TEMPLATE = "offhours-llm-pipeline"
"""The WorkflowTemplate of the LLM pipeline DAG (preprocess, pretrain, sft, rl, eval)."""
JOB_TEMPLATE = "offhours-job"
"""The WorkflowTemplate of one research job on any image."""
RETURN_GPUS = "return-gpus"
"""The exit template that gives a workflow's borrowed replicas back to the service."""
CHECK_PARAMETERS = "check-parameters"
"""The CPU-only step that checks every workflow parameter before any GPU is used."""
GRACE_PARAMETER = "termination-grace-seconds"
"""The workflow parameter the research steps take their pods' grace period from: the gate caps it at admission."""
GATE_CRON_WORKFLOW = "offhours-gate"
"""The gate's CronWorkflow, in the serving namespace."""
BACKSTOP_CRON_JOB = "offhours-backstop"
"""The batch/v1 CronJob (no Argo) that restores serving whose lending no gate tick renewed in time."""

# -- scheduling and identities --------------------------------------------------------------------------
PRIORITY_CLASS = "offhours-best-effort"
"""PriorityClass of every research pod: below every serving class, never preempting others."""
GATE_SERVICE_ACCOUNT = "offhours-gate"
"""ServiceAccount of the gate, in the serving namespace: the only one with rights on serving."""
EXIT_HOOK_SERVICE_ACCOUNT = "offhours-exit-hook"
"""ServiceAccount of the `return-gpus` exit hook, in the research namespace: marks its own workflow only."""
BACKSTOP_SERVICE_ACCOUNT = "offhours-backstop"
"""ServiceAccount of the backstop, in the serving namespace: reads the gate's records, raises serving."""
BACKSTOP_ROLE = "backstop"
"""Value of the role label on the backstop's pods."""
RESEARCH_SERVICE_ACCOUNT = "offhours-research"
"""ServiceAccount of research pods and the parameter check: only what Argo's executor needs."""
CONSOLE = "offhours-console"
"""Name of the console's ServiceAccount, Roles, Deployment, Service and NetworkPolicy (serving namespace)."""
CONSOLE_AUTH = "offhours-console-auth"
"""The console's ClusterRole and ClusterRoleBinding: create TokenReviews and SubjectAccessReviews, nothing else."""
CONSOLE_TOKEN_COOKIE = "offhours-console-token"
"""The console's cookie that holds a reader's bearer token after the login form (HttpOnly, SameSite=Strict)."""
EVENT_SOURCE = "offhours-gate"
"""The component named as the source of the Events the gate records."""

# -- ConfigMaps and the Lease ----------------------------------------------------------------------------
GATE_CONFIG_MAP = "offhours-gate-config"
"""The ConfigMap holding the gate configuration, mounted into the gate's pod."""
GATE_CONFIG_KEY = "gate.yaml"
"""The key of the gate configuration in `GATE_CONFIG_MAP`."""
LOG_ARCHIVE_CONFIGMAP = "offhours-log-archive"
"""The Argo artifact repository (research namespace) where `render --log-archive` has Argo keep every pod's main log."""
LOG_ARCHIVE_KEY = "s3"
"""The key of that repository in `LOG_ARCHIVE_CONFIGMAP` (the research WorkflowTemplates' artifactRepositoryRef)."""
STATE_CONFIGMAP_PREFIX = "offhours-state-"
"""+ service: the ConfigMap holding the gate's memory of that service."""
STATE_KEY = "state.json"
"""The key of the gate's memory in a state ConfigMap."""
LEDGER_CONFIGMAP = "offhours-lent"
"""The ConfigMap of the gate's ledger: what it lowered, one key per object UID (`policy.ownership`)."""
LEASE_NAME = "offhours-gate"
"""The coordination.k8s.io Lease that serialises the gate's ticks and the exit hooks."""
LEASE_NOTE_PREFIX = "unrecorded.offhours.io/"
"""+ service: an annotation on the Lease for a raise written while its record could not be."""

GPU_QUOTA = "offhours-gpus"
"""The ResourceQuota the gate keeps in the research namespace: requests.nvidia.com/gpu equal to the GPUs it has lent."""
WORKFLOW_QUOTA = "offhours-workflows"
"""The ResourceQuota on the count of Workflows in the research namespace: a flood is refused at creation."""

# -- admission policies (ValidatingAdmissionPolicy and its binding share the name) ------------------------
POLICY_BEST_EFFORT_PODS = "offhours-research-pods-best-effort"
"""Research pods run with what offhours lends them: best-effort priority, the scheduler, allowed tolerations."""
POLICY_GATE_ADMITS = "offhours-only-the-gate-admits"
"""A parked workflow is resumed (spec.suspend lifted) by the gate's ServiceAccount only."""
POLICY_GATE_MARKS = "offhours-gate-marks"
"""The labels and annotations that admit, park, copy and account are written by the gate (and the exit hook) only."""
POLICY_SERVING_OBJECTS = "offhours-serving-objects"
"""Research namespace ServiceAccounts cannot write serving's Deployments, HPAs, the gate's ConfigMaps, quotas, Lease."""
POLICY_GATE_POD_MARK = "offhours-gate-pod-mark"
"""The gate's ServiceAccount changes a serving pod's pod-deletion-cost annotation only (RBAC cannot name one field)."""
POLICY_EXIT_HOOK_PODS = "offhours-exit-hook-pods"
"""Only Argo's workflow controller runs pods as the exit hook's ServiceAccount, each named for the workflow it owns."""
ADMISSION_POLICIES = (POLICY_BEST_EFFORT_PODS, POLICY_GATE_ADMITS, POLICY_GATE_MARKS, POLICY_SERVING_OBJECTS,
                      POLICY_GATE_POD_MARK, POLICY_EXIT_HOOK_PODS)


def state_configmap_name(service: str) -> str:
    """Name of the ConfigMap that holds the gate's memory of `service`."""
    return f"{STATE_CONFIGMAP_PREFIX}{service}"


# -- labels ---------------------------------------------------------------------------------------------
LABEL_SERVICE = "offhours.io/service"
"""On a Deployment: the service it serves. On a workflow: the service it borrows from (tenant-written)."""
UNKNOWN_SERVICE = "unknown"
"""The `service` value on /metrics of every workflow whose service label names no configured service."""
LABEL_CONSOLE_CLIENT = "offhours.io/console-client"
"""Pods so labelled, in any namespace, may reach the console through its NetworkPolicy (Prometheus, a proxy)."""
LABEL_REPLICAS = "offhours.io/replicas"
"""On a workflow: how many replicas' worth of GPUs it borrows (tenant-written)."""
LABEL_RUN_ID = "offhours.io/run-id"
"""On a workflow: the run it belongs to; copies of a preempted run keep it, and its checkpoints."""
LABEL_STATE = "offhours.io/state"
"""On a workflow: parked, admitted, preempted or returned (the gate and the exit hook write it)."""
LABEL_COPY_OF = "offhours.io/copy-of"
"""On a parked copy of a preempted workflow: the workflow it was copied from."""
LABEL_MANAGED = "offhours.io/managed"
"""On every object offhours creates."""
LABEL_ROLE = "offhours.io/role"
"""On pods: what the pod is (research, gate, exit hook, parameter check)."""
LABEL_STAGE = "offhours.io/stage"
"""On research pods: the pipeline stage they run."""
LABEL_SCHEDULE = "offhours.io/schedule"
"""On a research CronWorkflow and its runs: the schedule's name."""
LABEL_USER = "offhours.io/user"
"""On a workflow: the person it was submitted for."""

# -- annotations ------------------------------------------------------------------------------------------
ANNOTATION_PRIORITY = "offhours.io/priority"
ANNOTATION_PREEMPTIONS = "offhours.io/preemptions"
ANNOTATION_PROGRESS = "offhours.io/last-checkpoint"
ANNOTATION_GPU_SECONDS = "offhours.io/gpu-seconds"
ANNOTATION_PARKED_FROM = "offhours.io/parked-from"
ANNOTATION_ADMITTED_AT = "offhours.io/admitted-at"
ANNOTATION_PREEMPTED_AT = "offhours.io/preempted-at"
ANNOTATION_RETURNED_AT = "offhours.io/returned-at"
ANNOTATION_CANCELLED_AT = "offhours.io/cancelled-at"
ANNOTATION_ESTIMATE = "offhours.io/estimate"
"""On a workflow requested from the console: the estimate shown before it was submitted (JSON), kept for its job page."""
ANNOTATION_ROOT = "offhours.io/first-name"
"""The name of the first workflow of a run: its copies are named after it."""
ANNOTATION_COPY_TOKEN = "offhours.io/copy-token"
"""On a parked copy the gate made: a random value the gate recorded before it made the copy, so that the copy is
known as the gate's (until its UID is recorded) even where a tenant wrote the same labels on another workflow."""
ANNOTATION_WAITING_REASON = "offhours.io/waiting-reason"
ANNOTATION_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
"""Kubernetes' own annotation on a pod: the ReplicaSet controller deletes pods of lower cost first when it scales
down. The gate writes it on the serving replicas it chose to remove, just before it lowers their Deployment."""
ANNOTATION_QUEUE_POSITION = "offhours.io/queue-position"
ANNOTATION_BORROWED_FROM = "offhours.io/borrowed-from"
"""UID of the Deployment incarnation a workflow borrowed from."""
ANNOTATION_PROVENANCE = "offhours.io/provenance"
"""A run's provenance (JSON, bounded: `offhours.scripts.runtime.provenance`): written by `offhours submit`, carried
with the first run's image digests by every parked copy, read by `offhours why` and `offhours rerun`."""
ANNOTATION_EXIT_SECONDS = "offhours.io/exit-seconds"
"""Seconds a stop is expected to take to give the GPUs back: measured at the run's last stop
(preempted-at to returned-at of the workflow it was copied from), else the declared grace; written by
the gate at admission."""

GATE_MARK_LABELS = (LABEL_STATE, LABEL_COPY_OF)
"""Labels only the gate writes (LABEL_STATE: a new workflow may carry `parked`; the exit hook writes returned/preempted)."""
GATE_MARK_ANNOTATIONS = (ANNOTATION_ADMITTED_AT, ANNOTATION_BORROWED_FROM, ANNOTATION_EXIT_SECONDS,
                         ANNOTATION_PARKED_FROM, ANNOTATION_PREEMPTED_AT, ANNOTATION_PREEMPTIONS,
                         ANNOTATION_COPY_TOKEN, ANNOTATION_ROOT)
"""Annotations with which the gate admits, parks and copies: written by its ServiceAccount only."""
EXIT_HOOK_MARK_ANNOTATIONS = (ANNOTATION_RETURNED_AT, ANNOTATION_GPU_SECONDS)
"""Annotations with which the exit hook accounts its workflow's GPUs: written by it (or the gate) only."""

# -- workflow states (values of LABEL_STATE) ------------------------------------------------------------
STATE_PARKED = "parked"
STATE_ADMITTED = "admitted"
STATE_PREEMPTED = "preempted"
STATE_RETURNED = "returned"

# -- Event reasons -----------------------------------------------------------------------------------------
# `kubectl get events --field-selector reason=GPUsLent` (or a dashboard, an alert) finds them by these
# strings, so they never change. Each is recorded on the serving Deployment it concerns; the exit hook
# records none (it has no rights on serving, it only labels its own workflow).
EVENT_GPUS_LENT = "GPUsLent"
"""A tick lent more of the Deployment's replicas to research jobs than were lent before it."""
EVENT_GPUS_RECLAIMED = "GPUsReclaimed"
"""A tick took lent replicas back for serving, or reclaimed (its action) with nothing left lent."""
EVENT_GATE_HOLD = "GateHold"
"""A tick left what is lent as it was: one Event per Deployment, its count raised at each repeat."""
EVENT_REPLICAS_ADOPTED = "ReplicasAdopted"
"""Someone else set the replicas (or the autoscaler's maxReplicas): the gate took that value as the new baseline."""
EVENT_GATE_TICK_FAILED = "GateTickFailed"
"""A Warning: the service's tick failed (observing, deciding or acting); enough in a row restore its baseline."""
EVENT_LENDING_EXPIRED = "LendingExpired"
"""A Warning from the backstop: no gate tick renewed the service's lending in time; serving got its baseline back."""
EVENT_SERVICE_RELEASED = "ServiceReleased"
"""A service left the gate configuration: what the gate had lent of it was given back and its record removed."""
EVENT_GRACE_ABOVE_CAP = "GraceAboveCap"
"""A Warning: an admitted job's pods may now outlast the service's maxGraceSeconds (its grace raised since its
admission): it was stopped and parked again, and its copy is capped when it is admitted."""
EVENT_RUN_ID_MISMATCH = "RunIdMismatch"
"""A Warning: a workflow's run-id label and run-id parameter disagree, or the parameter cannot be read before it
runs (a valueFrom, an Argo expression): where its steps write checkpoints is not the run the gate would count it
as, so it is never admitted (and stopped if it runs). Said once, as its waiting reason is first written."""
EVENT_LENT_UNSCHEDULABLE = "LentUnschedulable"
"""A Warning: an admitted job's pods stayed unschedulable past the bound; it was parked again and its replicas given
back (no work lost: it never started). The message names the pod that did not fit and where."""
EVENT_POOL_SQUATTER = "GPUsHeldWithoutAdmission"
"""A Warning: a research pod held GPUs on a serving node with no workflow the gate lists running to explain it (a
pod made directly, or one whose labels point elsewhere): counted as lent, then deleted within the grace cap."""
EVENT_REASONS = (EVENT_GPUS_LENT, EVENT_GPUS_RECLAIMED, EVENT_GATE_HOLD, EVENT_REPLICAS_ADOPTED, EVENT_GATE_TICK_FAILED,
                 EVENT_LENDING_EXPIRED, EVENT_SERVICE_RELEASED, EVENT_GRACE_ABOVE_CAP, EVENT_RUN_ID_MISMATCH,
                 EVENT_POOL_SQUATTER, EVENT_LENT_UNSCHEDULABLE)
"""Every reason the gate records."""
AGGREGATED_EVENT_REASONS = frozenset({EVENT_GATE_HOLD})
"""Reasons recorded as one Event per Deployment whose count rises: they repeat every tick while nothing changes."""


def aggregated_event_name(name: str, reason: str) -> str:
    """Name of the one Event kept per object and reason when repeats are counted."""
    return f"{name}.{reason.lower()}"

# -- the return path's metrics (the gate's process, scripts/gate/return_metrics.py) -------------------------
RETURN_PHASE_METRIC = "offhours_return_phase_seconds"
"""Histogram of each phase of a served reclaim, labels service and phase: what `calibrate` reads back."""
RETURN_RECLAIMS_METRIC = "offhours_return_reclaims_total"
"""Counter of the reclaims the gate followed, labels service and outcome (served, superseded, cancelled, abandoned)."""
