"""The tenant boundary's rules on a manifest, offline (pure): what the admission policies refuse, said the same way.

`offhours render` writes these rules as ValidatingAdmissionPolicies (cronworkflows/admission.py), which
kube-apiserver evaluates on the pod or workflow itself; `offhours validate` applies them here to a manifest
before it is submitted, so a researcher hears the refusal at their desk. Offline there is no spec.priority
(the Priority plugin sets it from the class), so the class name stands for it.
"""

import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from offhours.scripts.names import (
    EXIT_HOOK_MARK_ANNOTATIONS,
    EXIT_HOOK_SERVICE_ACCOUNT,
    GATE_MARK_ANNOTATIONS,
    GATE_MARK_LABELS,
    GPU_RESOURCE,
    LABEL_STATE,
    PRIORITY_CLASS,
    STATE_PARKED,
)
from offhours.scripts.policy.config import ResearchBoundary
from offhours.scripts.policy.image_refs import by_digest, is_image_parameter, mutable_tag_warning

BEST_EFFORT_PRIORITY = -100
"""The value of the offhours-best-effort PriorityClass: below every serving class and the default 0."""
EXIT_HOOK_MAX_PRIORITY = 0
"""The exit hook (which holds no GPU and gives them back) may run at the default priority."""
DEFAULT_SCHEDULER = "default-scheduler"
ALWAYS_TOLERATED = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
"""Added to every pod by the DefaultTolerationSeconds admission plugin (for 300 s): never a research choice."""

Found = tuple[str, str]  # (path in the document, what is wrong and what to do)
MAX_PATCH_CHARS = 64 * 1024  # a podSpecPatch longer than this is not read here (the pod's own check still applies)
_PATCHED = {"priorityclassname": "priorityClassName", "priority": "priority", "nodename": "nodeName",
            "schedulername": "schedulerName", "runtimeclassname": "runtimeClassName", "tolerations": "tolerations"}
"""The pod fields a podSpecPatch may set that decide priority, placement or runtime, by their casefolded key (Go's
JSON decoding matches keys without regard to case)."""


PatchLoader = Callable[[str], Any]
"""Parses a podSpecPatch's text (JSON here; the callers outside the policy pass one that reads YAML too)."""


def patch_fields(text: Any, load: PatchLoader = json.loads) -> dict[str, Any]:
    """Return the best-effort fields a podSpecPatch sets (the last of a repeated key, as Go's decoder keeps).

    A patch with an expression (`{{...}}`, expanded before Argo parses it) or that `load` cannot parse gives
    nothing here: the API server's policy judges the pod it becomes.
    """
    if not isinstance(text, str) or len(text) > MAX_PATCH_CHARS or "{{" in text:
        return {}
    try:
        loaded: Any = load(text)  # a repeated key keeps its last value; keys of other cases keep their order
    except Exception:  # noqa: BLE001 - a tenant's text: whatever the parser raises, nothing is read from it
        return {}
    if not isinstance(loaded, dict):
        return {}
    found: dict[str, Any] = {}
    for key, value in loaded.items():
        field = _PATCHED.get(key.casefold()) if isinstance(key, str) else None
        if field is not None:
            found[field] = value
    return found


def _priority_problem(value: Any, path: str) -> Iterator[Found]:
    """Judge a pod priority written as a number (Argo's deprecated `priority`/`podPriority`, or a patch's)."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value <= BEST_EFFORT_PRIORITY):
        return
    yield (path, f"priority is {value}; research pods run at most at {PRIORITY_CLASS} ({BEST_EFFORT_PRIORITY}): "
           f"remove it and set priorityClassName: {PRIORITY_CLASS}")


def _pod_fields_problems(fields: Mapping[str, Any], boundary: ResearchBoundary, path: str,
                         service_account: Any) -> Iterator[Found]:
    """Judge the pod fields one place sets (a workflow, its templateDefaults, a template, or a podSpecPatch)."""
    yield from pod_spec_problems({k: fields.get(k) for k in ("nodeName", "schedulerName", "runtimeClassName",
                                                             "tolerations")}, boundary, path)
    yield from _priority_class_problem(fields.get("priorityClassName"), f"{path}.priorityClassName", service_account)
    yield from _priority_problem(fields.get("priority"), f"{path}.priority")


def _template_problems(template: Mapping[str, Any], boundary: ResearchBoundary, path: str,
                       account: Any, load: PatchLoader) -> Iterator[Found]:
    """Judge a template (or templateDefaults): its own pod fields and those of its podSpecPatch."""
    account = template.get("serviceAccountName") or account
    yield from _pod_fields_problems(template, boundary, path, account)
    yield from _pod_fields_problems(patch_fields(template.get("podSpecPatch"), load), boundary,
                                    f"{path}.podSpecPatch", account)


def pod_spec_problems(spec: Mapping[str, Any], boundary: ResearchBoundary, path: str = "spec") -> Iterator[Found]:
    """Judge a pod spec by the best-effort rule (or an Argo template's pod fields, which become one)."""
    if spec.get("nodeName"):
        yield (f"{path}.nodeName", f"nodeName is set ({spec['nodeName']}), which skips the scheduler; research pods "
               "are placed by the scheduler: remove nodeName (a nodeSelector chooses the pool)")
    scheduler = spec.get("schedulerName")
    if scheduler not in (None, "", DEFAULT_SCHEDULER):
        yield (f"{path}.schedulerName", f"schedulerName is {scheduler}; research pods use {DEFAULT_SCHEDULER}: "
               "remove schedulerName")
    runtime = spec.get("runtimeClassName")
    if runtime not in (None, "") and runtime not in boundary.runtime_classes:
        allowed = ", ".join(boundary.runtime_classes) or "none (the default runtime of the cluster)"
        yield f"{path}.runtimeClassName", f"runtimeClassName {runtime} is not allowed here; allowed: {allowed}"
    tolerations = spec.get("tolerations")
    if isinstance(tolerations, list):
        allowed_keys = set(boundary.toleration_keys) | set(ALWAYS_TOLERATED)
        for i, toleration in enumerate(tolerations):
            key = toleration.get("key") if isinstance(toleration, Mapping) else None
            if key not in allowed_keys:
                yield (f"{path}.tolerations[{i}]", "tolerations may tolerate only the taint keys "
                       f"{', '.join(boundary.toleration_keys) or 'none'} (every toleration names its key); "
                       f"{'this one names none' if not key else f'not {key}'}: remove it")


def _priority_class_problem(value: Any, path: str, service_account: Any) -> Iterator[Found]:
    if value in (None, "", PRIORITY_CLASS) or service_account == EXIT_HOOK_SERVICE_ACCOUNT:
        return
    yield (path, f"priorityClassName is {value}; research pods run at most at {PRIORITY_CLASS} "
           f"({BEST_EFFORT_PRIORITY}): set {PRIORITY_CLASS}")


def pod_problems(pod: Mapping[str, Any], boundary: ResearchBoundary) -> Iterator[Found]:
    """Judge a Pod manifest for the research namespace by the best-effort rule, its class standing for its priority."""
    spec = pod.get("spec") if isinstance(pod.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    yield from pod_spec_problems(spec, boundary)
    cls = spec.get("priorityClassName")
    # The exit hook may run at the default priority only holding no GPU (as the pod policy says).
    account = None if _holds_gpu(spec) else spec.get("serviceAccountName")
    if cls in (None, "") and account != EXIT_HOOK_SERVICE_ACCOUNT:
        yield ("spec.priorityClassName", f"no priorityClassName: the pod would run at the default priority 0; "
               f"research pods run at most at {PRIORITY_CLASS} ({BEST_EFFORT_PRIORITY}): set {PRIORITY_CLASS}")
    yield from _priority_class_problem(cls, "spec.priorityClassName", account)
    if (spec.get("serviceAccountName") or spec.get("serviceAccount")) == EXIT_HOOK_SERVICE_ACCOUNT:
        # A Pod manifest is created by its submitter, never by Argo's controller (exit_hook_pods refuses it).
        yield ("spec.serviceAccountName", f"{EXIT_HOOK_SERVICE_ACCOUNT} is the exit hook's ServiceAccount: only "
               "Argo's workflow controller creates pods running as it; run yours as your own ServiceAccount")


def _holds_gpu(spec: Mapping[str, Any]) -> bool:
    """Whether a pod spec's containers or init containers request (or limit) a GPU."""
    for key in ("containers", "initContainers"):
        containers = spec.get(key)
        for container in containers if isinstance(containers, list) else []:
            resources = container.get("resources") if isinstance(container, Mapping) else None
            for part in ("requests", "limits"):
                amounts = resources.get(part) if isinstance(resources, Mapping) else None
                if isinstance(amounts, Mapping) and GPU_RESOURCE in amounts:
                    return True
    return False


def mark_problems(metadata: Mapping[str, Any], path: str = "metadata") -> Iterator[Found]:
    """Find the gate's marks on a workflow about to be created: only `parked` may be said; the rest is the gate's."""
    labels = metadata.get("labels") if isinstance(metadata.get("labels"), Mapping) else {}
    annotations = metadata.get("annotations") if isinstance(metadata.get("annotations"), Mapping) else {}
    assert isinstance(labels, Mapping) and isinstance(annotations, Mapping)
    for key in GATE_MARK_LABELS:
        if key == LABEL_STATE:
            if key in labels and labels[key] != STATE_PARKED:
                yield (f"{path}.labels.{key}", f"label {key} is {labels[key]}: the offhours gate writes this label "
                       f"(a new workflow may carry {STATE_PARKED}); leave it as it is")
        elif key in labels:
            yield (f"{path}.labels.{key}", f"{key} is written by the offhours gate only (it admits, parks and copies "
                   "jobs); leave it out")
    for key in GATE_MARK_ANNOTATIONS:
        if key in annotations:
            yield (f"{path}.annotations.{key}", f"{key} is written by the offhours gate only (it admits, parks and "
                   "copies jobs); leave it out")
    for key in EXIT_HOOK_MARK_ANNOTATIONS:
        if key in annotations:
            yield (f"{path}.annotations.{key}", f"{key} is written by the exit hook that gives its GPUs back (it "
                   "accounts GPU time); leave it out")


def workflow_problems(doc: Mapping[str, Any], boundary: ResearchBoundary,
                      load: PatchLoader = json.loads) -> Iterator[Found]:
    """Judge a Workflow, WorkflowTemplate or CronWorkflow: its marks, and the pod fields its templates set."""
    kind = doc.get("kind")
    spec = doc.get("spec") if isinstance(doc.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    if kind == "Workflow" and isinstance(doc.get("metadata"), Mapping):
        yield from mark_problems(doc["metadata"])
    if kind == "CronWorkflow":
        meta = spec.get("workflowMetadata")
        if isinstance(meta, Mapping):
            yield from mark_problems(meta, "spec.workflowMetadata")
        spec = spec.get("workflowSpec") if isinstance(spec.get("workflowSpec"), Mapping) else {}
        assert isinstance(spec, Mapping)
        prefix = "spec.workflowSpec"
    else:
        prefix = "spec"
    if isinstance(spec.get("workflowMetadata"), Mapping):
        yield from mark_problems(spec["workflowMetadata"], f"{prefix}.workflowMetadata")
    account = spec.get("serviceAccountName")
    workflow_wide = {**{k: spec.get(k) for k in ("schedulerName", "tolerations")},
                     "priorityClassName": spec.get("podPriorityClassName"), "priority": spec.get("podPriority")}
    for found_path, message in _pod_fields_problems(workflow_wide, boundary, prefix, account):
        yield found_path.replace(f"{prefix}.priorityClassName", f"{prefix}.podPriorityClassName").replace(
            f"{prefix}.priority", f"{prefix}.podPriority"), message
    yield from _pod_fields_problems(patch_fields(spec.get("podSpecPatch"), load), boundary, f"{prefix}.podSpecPatch",
                                    account)
    if isinstance(spec.get("templateDefaults"), Mapping):
        yield from _template_problems(spec["templateDefaults"], boundary, f"{prefix}.templateDefaults", account, load)
    templates = spec.get("templates")
    for i, template in enumerate(templates if isinstance(templates, list) else []):
        if isinstance(template, Mapping):
            for path, each in with_inline_templates(template, f"{prefix}.templates[{i}]"):
                yield from _template_problems(each, boundary, path, account, load)


def with_inline_templates(template: Mapping[str, Any], path: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Yield `template` and every template inlined in it (a step's or a DAG task's `inline`, at any depth), by path.

    Argo runs an inline template as a pod like any named one: what is judged of templates is judged of these.
    Walked without recursion: a tenant's nesting is as deep as they wrote it.
    """
    stack: list[tuple[str, Mapping[str, Any]]] = [(path, template)]
    while stack:
        where, each = stack.pop()
        yield where, each
        inner: list[tuple[str, Any]] = []
        steps = each.get("steps")
        for g, group in enumerate(steps if isinstance(steps, list) else []):
            for s, step in enumerate(group if isinstance(group, list) else []):
                if isinstance(step, Mapping):
                    inner.append((f"{where}.steps[{g}][{s}].inline", step.get("inline")))
        dag = each.get("dag")
        tasks = dag.get("tasks") if isinstance(dag, Mapping) else None
        for t, task in enumerate(tasks if isinstance(tasks, list) else []):
            if isinstance(task, Mapping):
                inner.append((f"{where}.dag.tasks[{t}].inline", task.get("inline")))
        stack += reversed([(p, t) for p, t in inner if isinstance(t, Mapping)])


def boundary_problems(doc: Mapping[str, Any], boundary: ResearchBoundary,
                      load: PatchLoader = json.loads) -> list[Found]:
    """Every boundary rule a research manifest breaks (Pods and Argo workflows; other kinds: none)."""
    kind = doc.get("kind")
    if kind == "Pod":
        return list(pod_problems(doc, boundary))
    if kind in ("Workflow", "WorkflowTemplate", "CronWorkflow"):
        return list(workflow_problems(doc, boundary, load))
    return []


def unpinned_image_problem(spec: Any, boundary: ResearchBoundary, template: Any = None) -> str | None:
    """Why the gate does not admit a workflow (its `spec`): an image argument by tag while digests are required.

    `template`: the WorkflowTemplate it runs, if read: an image argument the workflow leaves out runs its default,
    judged as if given.
    """
    if not boundary.require_image_digests or not isinstance(spec, Mapping):
        return None
    arguments = spec.get("arguments")
    params = arguments.get("parameters") if isinstance(arguments, Mapping) else None
    tspec = template.get("spec") if isinstance(template, Mapping) else None
    targs = tspec.get("arguments") if isinstance(tspec, Mapping) else None
    defaults = targs.get("parameters") if isinstance(targs, Mapping) else None
    if isinstance(defaults, list):
        given = {p.get("name") for p in params if isinstance(p, Mapping)} if isinstance(params, list) else set()
        params = [*(params if isinstance(params, list) else []),
                  *(d for d in defaults if isinstance(d, Mapping) and d.get("name") not in given)]
    images: set[str] = set()
    for param in params if isinstance(params, list) else []:
        if isinstance(param, Mapping) and isinstance(param.get("value"), str) \
                and is_image_parameter(str(param.get("name")), None):
            images.add(str(param["name"]))
            if "{{" in param["value"]:  # another argument's value, judged as no image is: never known pinned
                return (f"{param['name']}={param['value'][:200]} is an expression and research.requireImageDigests "
                        "is on: give the image itself, by digest (name@sha256:...)")
            warning = mutable_tag_warning(str(param["name"]), param["value"])
            if warning:
                return (f"{param['name']}={param['value'][:200]} is a mutable tag and research.requireImageDigests is "
                        "on: submit it again with the image by digest (name@sha256:...)")
    templates = spec.get("templates")
    named_templates = [(f"spec.templates[{i}]", t) for i, t in enumerate(templates if isinstance(templates, list)
                                                                           else [])]
    for top, template in [("spec.templateDefaults", spec.get("templateDefaults")), *named_templates]:
        if not isinstance(template, Mapping):
            continue
        for path, each in with_inline_templates(template, top):
            for where, image in _container_images(each, path):
                if not image:  # none of its own: templateDefaults' (judged above) or Argo refuses the pod
                    continue
                named = _ARGUMENT_IMAGE.fullmatch(image)
                if by_digest(image) or (named is not None and named.group(1) in images):
                    continue
                return (f"{where}.image is {image[:200]} and research.requireImageDigests is on: name the image by "
                        "digest (name@sha256:...) or as an image argument ({{workflow.parameters.image}})")
    return None


_ARGUMENT_IMAGE = re.compile(r"\{\{\s*workflow\.parameters\.([A-Za-z0-9_-]+)\s*\}\}")


def _container_images(template: Mapping[str, Any], path: str) -> Iterator[tuple[str, str]]:
    """Yield every container image a template's pod runs (main, script, init, sidecars, a containerSet's), by path."""
    for key in ("container", "script"):
        if isinstance(template.get(key), Mapping):
            yield f"{path}.{key}", str(template[key].get("image") or "")
    container_set = template.get("containerSet")
    lists = [("initContainers", template.get("initContainers")), ("sidecars", template.get("sidecars")),
             ("containerSet.containers", container_set.get("containers") if isinstance(container_set, Mapping)
              else None)]
    for key, containers in lists:
        for n, container in enumerate(containers if isinstance(containers, list) else []):
            if isinstance(container, Mapping):
                yield f"{path}.{key}[{n}]", str(container.get("image") or "")


_OUTRANKS = ("priorityClassName", "podPriorityClassName", "priority", "podPriority", "nodeName", "schedulerName")
"""The fields by which a pod outranks best-effort or escapes the scheduler, whatever the configuration allows."""


def admission_refusal(spec: Any, load: PatchLoader = json.loads) -> str | None:
    """Return why the gate never admits a workflow whose own spec sets its pods above best-effort (None: it may).

    The gate's half of the best-effort rule, judged before admission on the workflow as listed (its templates,
    templateDefaults and podSpecPatches); the admission policy judges every pod again as it is created.
    """
    if not isinstance(spec, Mapping):
        return None
    for path, message in workflow_problems({"kind": "Workflow", "spec": spec}, ResearchBoundary(), load):
        if path.rsplit(".", 1)[-1] in _OUTRANKS:
            return f"{path}: {message}"
    return None
