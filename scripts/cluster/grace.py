"""The grace period a workflow gives its pods, as far as the workflow itself decides it (a tenant-written object).

Two routes lead to a pod's terminationGracePeriodSeconds:
- the grace parameter of an offhours template (`termination-grace-seconds`), which the gate caps at
  admission (`workflow.grace_capped_parameters`) and reads again on every tick (`parameter_grace`);
- the workflow's own spec (`own_grace`): a podSpecPatch (workflow-wide, in templateDefaults, on any
  template, inline ones included), a resource template's manifest, or, for a workflow of its own
  templates, Kubernetes' default where nothing sets one. The gate cannot cap these: it refuses them.

Everything here is untrusted input. A value that cannot be read as a whole number of seconds (a
parameter expanded into a patch, a `$patch` directive, a YAML merge key, a float, a patch too large
to be a patch) reads as `UNREADABLE`, which is above any cap.
"""

import json
import math
from collections.abc import Iterator
from typing import Any

import yaml

from offhours.scripts.names import GRACE_PARAMETER

UNREADABLE = math.inf
DEFAULT_POD_GRACE = 30.0  # Kubernetes' terminationGracePeriodSeconds where a pod spec sets none
_GRACE_KEY = "terminationgraceperiodseconds"  # compared casefolded: Go's JSON matches by Unicode folding (U+017F is s)
_PATCH_KEY = "podspecpatch"
# Bounds on the work one workflow's spec may cost every tick (its grace is read while the tick observes, before
# any serving write): past them it reads as unreadable. JSON is parsed in C; YAML costs milliseconds a KiB.
MAX_PATCH_CHARS = 64 * 1024  # one pod-spec patch or manifest
MAX_JSON_CHARS = 256 * 1024  # every patch and manifest of one workflow parsed as JSON
MAX_YAML_CHARS = 4 * 1024  # every patch and manifest of one workflow that had to be parsed as YAML
MAX_NODES = 20_000  # values of one workflow's spec walked at most
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser where the install has it


class _Pairs(list[tuple[Any, Any]]):
    """A JSON object kept as its (key, value) pairs: a repeated key is seen, not silently replaced."""


class _Budget:
    """What is left of one workflow's parsing bounds (`MAX_JSON_CHARS`, `MAX_YAML_CHARS`)."""

    def __init__(self) -> None:
        self.json = MAX_JSON_CHARS
        self.yaml = MAX_YAML_CHARS

    def spend(self, kind: str, chars: int) -> bool:
        """Take `chars` of the `kind` ("json" or "yaml") left; False (and nothing taken) if that is more than is left."""
        left = getattr(self, kind)
        if chars > left:
            return False
        setattr(self, kind, left - chars)
        return True


def parameter_grace(wf: dict[str, Any]) -> float | None:
    """Return the grace the workflow's arguments give a template's pods: its largest grace parameter.

    None when it sets no such parameter (the template's default applies); `UNREADABLE` when one is
    not a plain whole number (a `valueFrom`, an expression, extra keys Argo may read instead).
    """
    spec = wf.get("spec")
    arguments = spec.get("arguments") if isinstance(spec, dict) else None
    params = arguments.get("parameters") if isinstance(arguments, dict) else None
    found: list[float] = []
    for param in params if isinstance(params, list) else []:
        if not (isinstance(param, dict) and param.get("name") == GRACE_PARAMETER):
            continue
        value = param.get("value")
        plain = set(param) <= {"name", "value", "description"}
        found.append(float(value) if plain and isinstance(value, str) and value.isascii() and value.isdigit()
                     else UNREADABLE)
    return max(found) if found else None


def own_grace(wf: dict[str, Any]) -> tuple[float, str] | None:
    """Return the largest grace the workflow's own spec gives any of its pods, and where it is set.

    None when its spec sets none and it runs a WorkflowTemplate (its pods' grace is the template's,
    through the grace parameter). A workflow of its own templates that sets none anywhere gets
    Kubernetes' default for its pods (unless a workflow-wide patch sets one for all of them).
    """
    spec = wf.get("spec")
    if not isinstance(spec, dict):
        return None
    found: list[tuple[float, str]] = []
    for seconds, where in _walk(spec):
        found.append((seconds, where))
        if seconds == UNREADABLE:
            break
    runs_template = isinstance(spec.get("workflowTemplateRef"), dict)
    wide = spec.get("podSpecPatch")
    if not runs_template and _makes_pods(spec) and (not isinstance(wide, str) or _patch_grace(wide, _Budget()) is None):
        found.append((DEFAULT_POD_GRACE, "Kubernetes' default, on a pod whose spec sets none"))
    return max(found, key=lambda f: f[0]) if found else None


_POD_LESS = ("dag", "steps", "suspend")  # template kinds that create no pod: their steps are other templates
_TEMPLATE_KINDS = ("container", "script", "resource", "containerSet", "data", "http", "plugin", *_POD_LESS)


def _makes_pods(spec: dict[str, Any]) -> bool:
    """Whether a template of the workflow's own (a top-level one, or an inline one in its steps) may create a pod.

    A workflow whose own templates only call others by `templateRef` (a composed pipeline of `offhours-steps`)
    creates no pod from its own spec: its pods are those templates', as for a `workflowTemplateRef`. Anything
    not plainly a dag, steps or suspend template counts as one that may.
    """
    templates = spec.get("templates")
    stack: list[Any] = list(templates) if isinstance(templates, list) else []
    seen = 0
    while stack:
        template = stack.pop()
        seen += 1
        if seen > MAX_NODES or not isinstance(template, dict):
            return True
        kinds = [k for k in _TEMPLATE_KINDS if template.get(k) is not None]
        if not kinds or any(k not in _POD_LESS for k in kinds):
            return True
        steps, dag = template.get("steps"), template.get("dag")
        tasks: list[Any] = []
        if steps is not None:
            if not isinstance(steps, list) or not all(isinstance(group, list) for group in steps):
                return True
            tasks += [step for group in steps for step in group]
        if dag is not None:
            if not isinstance(dag, dict) or not isinstance(dag.get("tasks", []), list):
                return True
            tasks += dag.get("tasks", [])
        for task in tasks:
            if not isinstance(task, dict):
                return True
            if task.get("inline") is not None:
                stack.append(task["inline"])
    return False


def _walk(spec: dict[str, Any]) -> Iterator[tuple[float, str]]:
    """Yield (seconds, where) for every grace the spec sets: patches, manifests, any key of that name."""
    stack: list[tuple[Any, str]] = [(spec, "spec")]
    budget = _Budget()
    seen = 0
    arguments = spec.get("arguments")
    capped = arguments.get("parameters") if isinstance(arguments, dict) else None  # the gate caps these at admission
    while stack:
        node, path = stack.pop()
        seen += 1
        if seen > MAX_NODES:
            yield UNREADABLE, "spec (too large to read)"
            return
        if isinstance(node, list):
            if node is not capped:
                stack.extend((item, f"{path}[{_label(item, i)}]") for i, item in enumerate(node))
            continue
        if not isinstance(node, dict):
            continue
        if node.get("name") == GRACE_PARAMETER:
            # A step's own argument (or input default) of the grace parameter: an offhours step's pod takes its
            # grace from it, not from the workflow's argument the gate caps, unless it passes that one on.
            seconds = _step_grace(node)
            if seconds is not None:
                yield seconds, path
        for key, value in node.items():
            name = str(key).casefold()
            where = f"{path}.{str(key)[:40]}"
            if name == _PATCH_KEY:
                seconds = _patch_grace(value, budget) if isinstance(value, str) else UNREADABLE
                if seconds is not None:
                    yield seconds, where
            elif name == _GRACE_KEY:
                yield _seconds(value), where
            elif name == "manifest" and "resource" in path.rsplit(".", 1)[-1]:
                seconds = _manifest_grace(value, budget)
                if seconds is not None:
                    yield seconds, where
            elif name == "manifestfrom" and "resource" in path.rsplit(".", 1)[-1]:
                yield UNREADABLE, where
            else:
                stack.append((value, where))


_PASSED_ON = "{{workflow.parameters." + GRACE_PARAMETER + "}}"  # the workflow's own argument, as the gate capped it


def _step_grace(param: dict[str, Any]) -> float | None:
    """Return the grace a step's parameter of that name gives (None: the workflow's, passed on); else unreadable."""
    if set(param) - {"name", "value", "default", "description"}:
        return UNREADABLE  # a valueFrom, an enum...: not a plain value
    found: list[float] = []
    for key in ("value", "default"):
        value = param.get(key)
        if value is None or value == _PASSED_ON:
            continue
        found.append(float(value) if isinstance(value, str) and value.isascii() and value.isdigit() else UNREADABLE)
    return max(found) if found else None


def _label(item: Any, index: int) -> str:
    """Name a list item in a path: its `name` if it is a short plain one (tenant-written), else its index."""
    name = item.get("name") if isinstance(item, dict) else None
    if isinstance(name, str) and 0 < len(name) <= 63 and name.isascii() and name.replace("-", "").isalnum():
        return name
    return str(index)


def _seconds(value: Any) -> float:
    """Read a grace value as a pod spec does: a whole number of seconds, else unreadable."""
    # Past a float's range (a tenant's digits, kept an int by JSON or YAML): unreadable, never an OverflowError.
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 10 ** 300:
        return UNREADABLE
    return float(value)


def _patch_grace(text: str, budget: _Budget) -> float | None:
    """Return the grace a pod-spec patch sets (None: it sets none); `UNREADABLE` for one that cannot be read.

    Argo expands `{{...}}` in the patch's text before it parses it, so a parameterised patch can
    gain any key: unreadable. So is a strategic-merge directive (`$patch: replace` drops the grace).
    """
    if len(text) > MAX_PATCH_CHARS or "{{" in text or not budget.spend("json", len(text)):
        return UNREADABLE
    try:
        pairs = json.loads(text, object_pairs_hook=_Pairs)
    except (ValueError, RecursionError):
        return _yaml_patch_grace(text) if budget.spend("yaml", len(text)) else UNREADABLE
    if not isinstance(pairs, _Pairs):
        return UNREADABLE
    return _top_level(list(pairs))


def _yaml_patch_grace(text: str) -> float | None:
    """Read the top level of a YAML patch: only its keys and the grace's value are built, never the rest."""
    loader = _LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if not isinstance(node, yaml.MappingNode):
            return UNREADABLE
        pairs = []
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                return UNREADABLE  # `<<: *anchor` merges keys in that this reading would not see
            key = loader.construct_object(key_node, deep=True) if isinstance(key_node, yaml.ScalarNode) else None
            grace = isinstance(key, str) and key.casefold() == _GRACE_KEY
            pairs.append((key, loader.construct_object(value_node, deep=True) if grace else None))
        return _top_level(pairs)
    except (yaml.YAMLError, TypeError, ValueError, RecursionError):
        return UNREADABLE
    finally:
        loader.dispose()


def _top_level(pairs: list[tuple[Any, Any]]) -> float | None:
    found: list[float] = []
    for key, value in pairs:
        if not isinstance(key, str) or key.startswith("$"):
            return UNREADABLE
        if key.casefold() == _GRACE_KEY:
            found.append(_seconds(value))
    return max(found) if found else None


def _manifest_grace(value: Any, budget: _Budget) -> float | None:
    """Return the largest grace of any pod spec in a resource template's manifest (None: none); unreadable if parameterised."""
    if not isinstance(value, str) or len(value) > MAX_PATCH_CHARS or "{{" in value or not budget.spend("json", len(value)):
        return UNREADABLE
    try:
        docs: list[Any] = [json.loads(value)]
    except (ValueError, RecursionError):
        if not budget.spend("yaml", len(value)):
            return UNREADABLE
        try:
            docs = list(yaml.load_all(value, Loader=_LOADER))  # noqa: S506 - a safe loader (libyaml's, or the pure one)
        except (yaml.YAMLError, RecursionError):
            return UNREADABLE
    found: list[float] = []
    stack: list[Any] = list(docs)
    seen = 0
    while stack:
        node = stack.pop()
        seen += 1
        if seen > MAX_NODES:
            return UNREADABLE
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            keys = {str(key).casefold(): item for key, item in node.items()}
            if isinstance(keys.get("containers"), list) and _GRACE_KEY not in keys:
                # A pod spec that sets none gets Kubernetes' default: no workflow-wide patch reaches a pod the
                # manifest makes (Argo patches only the pods it creates itself).
                found.append(DEFAULT_POD_GRACE)
            for key, item in node.items():
                if str(key).casefold() == _GRACE_KEY:
                    found.append(_seconds(item))
                else:
                    stack.append(item)
    return max(found) if found else None


def patch_grace(text: Any) -> float | None:
    """Return the grace one pod-spec patch sets on its own (None: none), as `own_grace` reads one; else unreadable."""
    return _patch_grace(text, _Budget()) if isinstance(text, str) else UNREADABLE


def manifest_grace(value: Any) -> float | None:
    """Return the largest grace of any pod spec in one resource template's manifest (None: none); else unreadable."""
    return _manifest_grace(value, _Budget())
