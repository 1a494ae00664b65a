"""The grace period of the GPU pods a workflow runs through the WorkflowTemplates it refers to (pure: no I/O).

`grace.own_grace` reads the workflow's own spec. A workflow also runs what it refers to, and a tenant may
write WorkflowTemplates in the research namespace: `spec.workflowTemplateRef` (the template's spec merged
under the workflow's, as Argo runs it), and `templateRef` in steps, dag tasks, lifecycle hooks and exit
handlers. This walks that graph as Argo would run it, from the entrypoint, the exit handler and the hooks,
and returns the largest grace any GPU pod of it may get:
- a template's podSpecPatch (else the templateDefaults'), and the workflow-wide podSpecPatch, which Argo
  applies to every pod it creates (both are counted: the larger is taken, whichever Argo lets win);
- a research step's patch (`runtime.pod_patch`) gives its `termination-grace-seconds` input: the argument
  its caller passes, else the input's default; passed on from the workflow's own argument, it is the value
  the gate caps at admission;
- a GPU pod whose patches set none gets Kubernetes' default.
A pod that asks for nothing but CPU and memory holds no GPU: its grace does not delay serving.

What cannot be read is unknown (`TemplateGrace.unknown`, the reason in words), never a number: a
ClusterWorkflowTemplate (the gate has no right to read them), a template missing or not read, one too
large, a patch or grace argument that is an expression, a graph deeper than `MAX_DEPTH` or making more than
`MAX_CALLS` template calls. Everything here is tenant-written: any shape is read defensively.
"""

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from offhours.scripts.cluster.grace import DEFAULT_POD_GRACE, MAX_NODES, UNREADABLE, manifest_grace, patch_grace
from offhours.scripts.names import GRACE_PARAMETER
from offhours.scripts.runtime.pod_patch import grace_input

MAX_TEMPLATES = 500  # WorkflowTemplates of the namespace the gate reads in one tick
MAX_TEMPLATE_NODES = 20_000  # values of one WorkflowTemplate: past it, it is too large to read every tick
MAX_DEPTH = 32  # templates calling templates, from the entrypoint
MAX_CALLS = 1_000  # template calls walked for one workflow
CLUSTER_SCOPED = "ClusterWorkflowTemplate/"  # how `direct_refs` names a reference to one

_CAPPED = "capped"  # the workflow's own grace argument, passed on: the gate caps it at admission
_PASSED_ON = "{{workflow.parameters." + GRACE_PARAMETER + "}}"
_FROM_INPUT = "{{inputs.parameters." + GRACE_PARAMETER + "}}"
_CPU_ONLY = frozenset({"cpu", "memory", "ephemeral-storage"})  # resources that are no device (a GPU, a MIG slice...)
_POD_KINDS = ("container", "script", "containerSet", "data", "http", "plugin")

Grace = float | str | None  # seconds (math.inf: unreadable), `_CAPPED`, or None (not set)


@dataclass(frozen=True)
class TemplateGrace:
    """The largest grace a GPU pod reached through a template gets, and where; or why it cannot be known."""

    seconds: float | None = None  # None: no GPU pod reached through a template sets one above the gate's cap
    where: str = ""
    unknown: str | None = None


class _Unknown(Exception):
    """The walk cannot tell: the message says why (a person reads it as the waiting reason)."""


def _shown(name: Any) -> str:
    text = str(name)
    return text if len(text) <= 63 else text[:60] + "..."


def direct_refs(spec: Any) -> tuple[str, ...]:
    """Return the WorkflowTemplates the workflow's own spec refers to, sorted (a ClusterWorkflowTemplate prefixed).

    What the gate compares at admission with what it judged: a reference changed in between is not admitted.
    A reference that is not a plain name reads as "?" (the walk says it is unknown).
    """
    found: set[str] = set()
    stack: list[Any] = [spec]
    seen = 0
    while stack:
        node = stack.pop()
        seen += 1
        if seen > MAX_NODES:
            found.add("?")  # too large to list: `own_grace` says so too
            break
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            for key, value in node.items():
                if key in ("workflowTemplateRef", "templateRef"):
                    name = value.get("name") if isinstance(value, dict) else None
                    name = name if isinstance(name, str) and name else "?"
                    found.add(CLUSTER_SCOPED + name if isinstance(value, dict) and value.get("clusterScope") else name)
                else:
                    stack.append(value)
    return tuple(sorted(found))


def template_grace(spec: Any, templates: Mapping[str, Any] | None,
                   too_large: dict[str, bool] | None = None) -> TemplateGrace:
    """Return the largest grace of a GPU pod the workflow runs through a template it refers to (see the module).

    `templates`: the WorkflowTemplates of its namespace by name, as read this tick (None: not read). A
    workflow that refers to none returns an empty `TemplateGrace`, whatever `templates` is. `too_large`:
    whether each template is too large to read, by name, filled in as the walk measures them; shared by the
    walks of one read of `templates`, each template is measured once (hundreds of jobs may run one template).
    """
    if not isinstance(spec, dict) or not direct_refs(spec):
        return TemplateGrace()
    walk = _Walk(templates, too_large)
    try:
        walk.run(spec)
    except _Unknown as err:
        return TemplateGrace(unknown=str(err))
    if not walk.found:
        return TemplateGrace()
    seconds, where = max(walk.found, key=lambda f: f[0])
    return TemplateGrace(seconds, where)


_Scope = dict[str, tuple[str, Any, str]]  # template name -> (where, template, the scope its own calls resolve in)


class _Walk:
    def __init__(self, templates: Mapping[str, Any] | None, too_large: dict[str, bool] | None) -> None:
        self.templates: Mapping[str, Any] = templates or {}
        self.too_large = too_large if too_large is not None else {}
        self.unread = templates is None  # then any namespaced template is unknown (a ClusterWorkflowTemplate is anyway)
        self.scopes: dict[str, _Scope] = {}
        self.calls = 0
        self.found: list[tuple[float, str]] = []
        self.wide: tuple[str, Any] | None = None  # the workflow-wide podSpecPatch
        self.defaults: tuple[str, Any] | None = None  # templateDefaults' podSpecPatch

    def run(self, spec: dict[str, Any]) -> None:
        base: dict[str, Any] = {}
        root: _Scope = {}
        label = ""
        ref = spec.get("workflowTemplateRef")
        if ref is not None:
            name = self._referred(ref, "spec.workflowTemplateRef")
            # Its templates run as the workflow's own: their calls resolve among the workflow's templates.
            root.update({key: (where, template, "") for key, (where, template, _) in self._scope(name).items()})
            base, label = self._spec(name), f"WorkflowTemplate {_shown(name)} "
        for where, template in _named(spec.get("templates"), "spec.templates"):
            root[str(template.get("name"))] = (where, template, "")
        self.scopes[""] = root

        def pick(key: str) -> tuple[str, Any]:
            """Return the workflow's value and where it is, else its template's: Argo lays the workflow's spec over it."""
            return (f"spec.{key}", spec[key]) if spec.get(key) is not None else (f"{label}spec.{key}", base.get(key))

        at, wide = pick("podSpecPatch")
        self.wide = None if wide is None else (at, wide)
        at, defaults = pick("templateDefaults")
        if defaults is not None:
            if not isinstance(defaults, dict):
                raise _Unknown(f"{at} is not an object")
            if defaults.get("podSpecPatch") is not None:
                self.defaults = (f"{at}.podSpecPatch", defaults["podSpecPatch"])
        at, entry = pick("entrypoint")
        if entry is not None:
            # The entrypoint gets the workflow's arguments: its grace argument is the one the gate caps.
            self._call("", {"template": entry}, None, 0, at, passed=_CAPPED)
        at, on_exit = pick("onExit")
        if on_exit is not None:
            self._call("", {"template": on_exit}, None, 0, at)
        self._hooks("", base.get("hooks"), None, 0, f"{label}spec.hooks")
        self._hooks("", spec.get("hooks"), None, 0, "spec.hooks")

    # -- references ---------------------------------------------------------------------------
    def _referred(self, ref: Any, where: str) -> str:
        """Return the name of the WorkflowTemplate `ref` names; unknown for a ClusterWorkflowTemplate or no name."""
        if not isinstance(ref, dict):
            raise _Unknown(f"{where} is not a reference to a template")
        name = ref.get("name")
        if not isinstance(name, str) or not name:
            raise _Unknown(f"{where} names no WorkflowTemplate")
        if ref.get("clusterScope"):
            raise _Unknown(f"{where} runs ClusterWorkflowTemplate {_shown(name)}, which the gate may not read")
        if self.unread:
            raise _Unknown("the WorkflowTemplates of its namespace could not be read this tick")
        if name not in self.templates:
            raise _Unknown(f"{where} runs WorkflowTemplate {_shown(name)}, which is not in its namespace (or not "
                           f"among the first {MAX_TEMPLATES} the gate reads)")
        return name

    def _spec(self, name: str) -> dict[str, Any]:
        template = self.templates.get(name)
        spec = template.get("spec") if isinstance(template, dict) else None
        if not isinstance(spec, dict):
            raise _Unknown(f"WorkflowTemplate {_shown(name)} has no spec that can be read")
        return spec

    def _scope(self, name: str) -> _Scope:
        """Return the templates of WorkflowTemplate `name` by name (their own calls resolve among them)."""
        if name in self.scopes:
            return self.scopes[name]
        spec = self._spec(name)
        if name not in self.too_large:
            self.too_large[name] = _too_large(spec)
        if self.too_large[name]:
            raise _Unknown(f"WorkflowTemplate {_shown(name)} is too large to read (over {MAX_TEMPLATE_NODES} values)")
        scope: _Scope = {}
        for where, template in _named(spec.get("templates"), f"WorkflowTemplate {_shown(name)}"):
            scope[str(template.get("name"))] = (where, template, name)
        self.scopes[name] = scope
        return scope

    # -- calls --------------------------------------------------------------------------------
    def _call(self, scope: str, step: Any, caller: Grace, depth: int, where: str, passed: Grace = None) -> None:
        """Walk what one step (a dag task, a hook, an entrypoint) runs; `caller`: the calling template's grace input."""
        self.calls += 1
        if self.calls > MAX_CALLS:
            raise _Unknown(f"its templates make more than {MAX_CALLS:,} template calls")
        if depth >= MAX_DEPTH:
            raise _Unknown(f"its templates call each other more than {MAX_DEPTH} levels deep")
        if not isinstance(step, dict):
            raise _Unknown(f"{where} is not a step")
        if step.get("templateRef") is not None:
            ref = step["templateRef"]
            name = self._referred(ref, f"{where}.templateRef")
            inner = self._scope(name)
            target = ref.get("template")
            if not isinstance(target, str) or target not in inner:
                raise _Unknown(f"{where}.templateRef: WorkflowTemplate {_shown(name)} has no template {_shown(target)}")
            at, template, resolves = inner[target]
        elif step.get("inline") is not None:
            at, template, resolves = f"{where}.inline", step["inline"], scope
        elif step.get("template") is not None:
            target = step["template"]
            found = self.scopes[scope].get(target) if isinstance(target, str) else None
            if found is None:
                raise _Unknown(f"{where} runs template {_shown(target)}, which is not there")
            at, template, resolves = found
        else:
            return  # runs nothing Argo would accept
        if not isinstance(template, dict):
            raise _Unknown(f"{at} is not a template")
        grace = passed if passed is not None else _passed(step.get("arguments"), template, caller, where)
        self._template(resolves, template, grace, depth + 1, at)

    def _hooks(self, scope: str, hooks: Any, caller: Grace, depth: int, where: str) -> None:
        if hooks is None:
            return
        if not isinstance(hooks, dict):
            raise _Unknown(f"{where} is not an object")
        for key, hook in hooks.items():
            self._call(scope, hook, caller, depth, f"{where}.{_shown(key)}")

    def _template(self, scope: str, template: dict[str, Any], grace: Grace, depth: int, where: str) -> None:
        for at, step in _steps(template, where):
            self._call(scope, step, grace, depth, at)
            self._hooks(scope, step.get("hooks"), grace, depth, f"{at}.hooks")
            if step.get("onExit") is not None:
                self._call(scope, {"template": step["onExit"]}, grace, depth, f"{at}.onExit")
        resource = template.get("resource")
        if resource is not None:
            manifest = resource.get("manifest") if isinstance(resource, dict) else None
            if not isinstance(resource, dict) or resource.get("manifestFrom") is not None:
                raise _Unknown(f"{where}.resource: its manifest cannot be read")
            if manifest is not None:
                seconds = manifest_grace(manifest)
                if seconds == UNREADABLE:
                    raise _Unknown(f"{where}.resource.manifest: its pods' grace cannot be read")
                if seconds is not None:
                    self.found.append((seconds, f"{where}.resource.manifest"))
        if any(template.get(kind) is not None for kind in _POD_KINDS):
            self._pod(template, grace, where)

    def _pod(self, template: dict[str, Any], grace: Grace, where: str) -> None:
        """Count the grace of the pod `template` creates, if it may hold a GPU."""
        patches: list[tuple[str, Any]] = []
        if template.get("podSpecPatch") is not None:
            patches.append((f"{where}.podSpecPatch", template["podSpecPatch"]))
        elif self.defaults is not None:
            patches.append(self.defaults)  # templateDefaults is merged under the template's own fields
        if self.wide is not None:
            patches.append(self.wide)
        gpu = _asks_for_devices(template)
        sets = False
        found: list[tuple[float, str]] = []
        for at, text in patches:
            if isinstance(text, str) and grace_input(text) is not None:
                gpu = sets = True
                if grace != _CAPPED:
                    found.append((UNREADABLE if grace is None else float(grace), f"{at} (its {GRACE_PARAMETER})"))
                continue
            seconds = patch_grace(text)
            # A patch may add any resource, a GPU included: a pod it touches counts as one that may hold a GPU.
            if seconds == UNREADABLE or not isinstance(text, str) or "resource" in text.casefold():
                gpu = True
            if seconds is not None:
                sets = True
                found.append((seconds, at))
        if not gpu:
            return
        if not sets:
            found.append((DEFAULT_POD_GRACE, f"{where}: Kubernetes' default, on a GPU pod whose spec sets none"))
        for seconds, at in found:
            if math.isinf(seconds):
                raise _Unknown(f"{at}: its grace is not a whole number of seconds (an expression or a parameter)")
        self.found.extend(found)


def _named(templates: Any, where: str) -> Iterable[tuple[str, dict[str, Any]]]:
    """Yield (where, template) for each template of a `templates` list; unknown for anything not one."""
    if templates is None:
        return
    if not isinstance(templates, list):
        raise _Unknown(f"{where}: its templates are not a list")
    for template in templates:
        if not isinstance(template, dict) or not isinstance(template.get("name"), str):
            raise _Unknown(f"{where}: a template without a name")
        yield f"{where} template {_shown(template['name'])}", template


def _steps(template: dict[str, Any], where: str) -> Iterable[tuple[str, dict[str, Any]]]:
    """Yield (where, step) for every step and dag task of a template."""
    steps, dag = template.get("steps"), template.get("dag")
    if steps is not None:
        if not isinstance(steps, list) or not all(isinstance(group, list) for group in steps):
            raise _Unknown(f"{where}.steps cannot be read")
        for group in steps:
            for step in group:
                if not isinstance(step, dict):
                    raise _Unknown(f"{where}.steps: a step is not an object")
                yield f"{where} step {_shown(step.get('name'))}", step
    if dag is not None:
        tasks = dag.get("tasks") if isinstance(dag, dict) else None
        if not isinstance(tasks, list) or not all(isinstance(task, dict) for task in tasks):
            raise _Unknown(f"{where}.dag cannot be read")
        for task in tasks:
            yield f"{where} task {_shown(task.get('name'))}", task


def _passed(arguments: Any, template: dict[str, Any], caller: Grace, where: str) -> Grace:
    """Return the grace input a call gives `template`: its argument of that name, else the input's own value."""
    params = arguments.get("parameters") if isinstance(arguments, dict) else None
    for param in params if isinstance(params, list) else []:
        if isinstance(param, dict) and param.get("name") == GRACE_PARAMETER:
            return _value(param, ("value",), caller, where)
    inputs = template.get("inputs")
    declared = inputs.get("parameters") if isinstance(inputs, dict) else None
    for param in declared if isinstance(declared, list) else []:
        if isinstance(param, dict) and param.get("name") == GRACE_PARAMETER:
            return _value(param, ("value", "default"), None, where)
    return None


def _value(param: dict[str, Any], keys: tuple[str, ...], caller: Grace, where: str) -> Grace:
    """Read a grace parameter's value: a whole number, the workflow's capped one passed on, or the caller's input."""
    if set(param) - {"name", "value", "default", "description", "enum"}:
        return UNREADABLE  # a valueFrom...: not a plain value
    for key in keys:
        value = param.get(key)
        if value is None:
            continue
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            # Past a float's range (a tenant's digits, kept an int by JSON): unreadable, as such a digit string is.
            return float(value) if value < 10 ** 300 else UNREADABLE
        if not isinstance(value, str):
            return UNREADABLE
        if value.isascii() and value.isdigit():
            return float(value)
        if value == _PASSED_ON:
            return _CAPPED
        if value == _FROM_INPUT:
            return UNREADABLE if caller is None else caller
        return UNREADABLE
    return None


def _asks_for_devices(template: dict[str, Any]) -> bool:
    """Whether any container of the template asks for a resource beyond CPU and memory (a GPU, a device claim)."""
    out: list[Any] = [c for c in (template.get("container"), template.get("script")) if c is not None]
    for key in ("containerSet", "initContainers", "sidecars"):
        extra = template.get(key)
        if key == "containerSet" and extra is not None:
            extra = extra.get("containers") if isinstance(extra, dict) else None
        if extra is not None or key == "containerSet" and template.get(key) is not None:
            out.extend(extra if isinstance(extra, list) else [None])
    for container in out:
        if not isinstance(container, dict):
            return True
        resources = container.get("resources")
        if resources is None:
            continue
        if not isinstance(resources, dict) or resources.get("claims"):
            return True
        for part in ("requests", "limits"):
            values = resources.get(part)
            if values is None:
                continue
            if not isinstance(values, dict) or any(str(k) not in _CPU_ONLY for k in values):
                return True
    return False


def _too_large(node: Any) -> bool:
    stack, seen = [node], 0
    while stack:
        item = stack.pop()
        seen += 1
        if seen > MAX_TEMPLATE_NODES:
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def template_grace_problem(spec: Any, templates: Mapping[str, Any] | None, cap_seconds: float,
                           service: str, too_large: dict[str, bool] | None = None) -> str | None:
    """Return why a workflow may not be admitted for the grace of the pods its templates run; None if it may."""
    found = template_grace(spec, templates, too_large)
    if found.unknown is not None:
        return f"its pods' grace period cannot be known: {found.unknown}"
    if found.seconds is None or found.seconds <= cap_seconds:
        return None
    return (f"its pods' grace period is set in a template it runs ({found.where}: {found.seconds:.0f} s), above "
            f"{service}'s maxGraceSeconds {cap_seconds:g}: set terminationGracePeriodSeconds to at most "
            f"{cap_seconds:g} s on every GPU pod it runs, or pass {GRACE_PARAMETER} on from the workflow's arguments")
