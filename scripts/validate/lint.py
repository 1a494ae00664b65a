"""Checks no schema makes: references between templates, `{{...}}` tags, DAG edges, exit templates, image tags.

The catalog holds the WorkflowTemplates and ClusterWorkflowTemplates that `templateRef`s may
point to: those among the checked manifests plus the library's own.
"""

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from offhours.scripts.policy.image_refs import is_image_parameter, mutable_tag_warning
from offhours.scripts.validate.problems import ERROR, WARNING, Problem, json_path

Path = list[str | int]

_TAG = re.compile(r"\{\{(=?)\s*(.*?)\s*\}\}", re.S)
_SIMPLE_PARAM = re.compile(r"^(inputs|workflow)\.parameters\.([A-Za-z0-9_.-]+)\Z")
_EXPR_PARAM = re.compile(r"\b(inputs|workflow)\.parameters(?:\[\s*'([^']+)'\s*\]|\[\s*\"([^\"]+)\"\s*\]|\.([A-Za-z0-9_]+))")
_NODE_REF = re.compile(r"^(tasks|steps)\.([A-Za-z0-9_-]+)\.(.+)\Z")
_EXPR_NODE_REF = re.compile(r"\b(tasks|steps)(?:\[\s*'([^']+)'\s*\]|\.([A-Za-z0-9_]+))")
_DEPENDS_TOKEN = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z]+)?")
_DEPENDS_RESULTS = {
    "Succeeded", "Failed", "Errored", "Skipped", "Omitted", "Daemoned", "AnySucceeded", "AllFailed",
}
_LOOP_FIELDS = ("withItems", "withParam", "withSequence")


@dataclass
class Catalog:
    """Templates reachable by `templateRef`: (cluster scope, WorkflowTemplate name) -> template name -> template."""

    templates: dict[tuple[bool, str], dict[str, dict[str, Any]]] = field(default_factory=dict)
    arguments: dict[tuple[bool, str], set[str]] = field(default_factory=dict)

    def add(self, doc: dict[str, Any]) -> None:
        """Add a WorkflowTemplate or ClusterWorkflowTemplate document."""
        kind = doc.get("kind")
        if kind not in ("WorkflowTemplate", "ClusterWorkflowTemplate"):
            return
        key = (kind == "ClusterWorkflowTemplate", str((doc.get("metadata") or {}).get("name")))
        spec = doc.get("spec") or {}
        self.templates[key] = {str(t.get("name")): t for t in spec.get("templates") or [] if isinstance(t, dict)}
        self.arguments[key] = {p.get("name") for p in (spec.get("arguments") or {}).get("parameters") or []}


def _strings(node: Any, path: Path) -> Iterator[tuple[Path, str]]:
    if isinstance(node, str):
        yield path, node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(value, [*path, key])
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _strings(value, [*path, i])


def _names(items: Any) -> set[str]:
    return {str(i.get("name")) for i in items or [] if isinstance(i, dict)}


def _declared(template: dict[str, Any], side: str, what: str) -> set[str]:
    return _names(((template.get(side) or {}).get(what)))


def _required_inputs(template: dict[str, Any]) -> set[str]:
    params = (template.get("inputs") or {}).get("parameters") or []
    return {p["name"] for p in params if "value" not in p and "default" not in p and "valueFrom" not in p}


class _DocumentLint:
    def __init__(self, doc: dict[str, Any], file: str, index: int, catalog: Catalog) -> None:
        self.doc = doc
        self.file = file
        self.index = index
        self.catalog = catalog
        self.problems: list[Problem] = []
        kind = doc.get("kind")
        self.base: Path = ["spec", "workflowSpec"] if kind == "CronWorkflow" else ["spec"]
        spec: Any = doc.get("spec") or {}
        if kind == "CronWorkflow":
            spec = spec.get("workflowSpec") or {}
        self.spec: dict[str, Any] = spec if isinstance(spec, dict) else {}
        self.local: dict[str, dict[str, Any]] = {
            str(t.get("name")): t for t in self.spec.get("templates") or [] if isinstance(t, dict)
        }
        self.workflow_params = _names((self.spec.get("arguments") or {}).get("parameters"))
        ref = self.spec.get("workflowTemplateRef")
        if ref:
            self.workflow_params |= self.catalog.arguments.get((bool(ref.get("clusterScope")), ref.get("name")), set())
        # A library WorkflowTemplate (no entrypoint, no arguments) is called from other workflows,
        # whose parameters it cannot know: its workflow.parameters references are not checked.
        self.check_workflow_params = bool(self.spec.get("entrypoint") or self.spec.get("arguments") or ref)

    def report(self, path: Path, message: str, severity: str = ERROR) -> None:
        self.problems.append(Problem(self.file, self.index, json_path(path), message, severity))

    def run(self) -> list[Problem]:
        self.check_entry_and_exit()
        for i, template in enumerate(self.spec.get("templates") or []):
            if isinstance(template, dict):
                self.check_template(template, [*self.base, "templates", i])
        for path, text in _strings({k: v for k, v in self.spec.items() if k != "templates"}, list(self.base)):
            self.check_tags(path, text, template=None, nodes=None, in_loop=False)
        self.check_image_tags()
        return self.problems

    # -- images by digest ----------------------------------------------------------------------
    def check_image_tags(self) -> None:
        """Warn on an image argument given by a mutable tag: a preempted job's resumed copy could pull other code.

        Only a job (a Workflow, or a CronWorkflow's runs): a WorkflowTemplate's default is judged where it is used.
        """
        if self.doc.get("kind") not in ("Workflow", "CronWorkflow"):
            return
        for i, param in enumerate((self.spec.get("arguments") or {}).get("parameters") or []):
            if not isinstance(param, dict) or not isinstance(param.get("value"), str):
                continue
            if is_image_parameter(str(param.get("name")), None):
                warning = mutable_tag_warning(str(param["name"]), param["value"])
                if warning:
                    self.report([*self.base, "arguments", "parameters", i, "value"], warning, WARNING)

    # -- entrypoint, onExit, hooks, workflowTemplateRef -------------------------------------
    def check_entry_and_exit(self) -> None:
        ref = self.spec.get("workflowTemplateRef")
        if ref:
            key = (bool(ref.get("clusterScope")), str(ref.get("name")))
            if key not in self.catalog.templates:
                kind = "ClusterWorkflowTemplate" if key[0] else "WorkflowTemplate"
                self.report([*self.base, "workflowTemplateRef", "name"], f"{kind} {key[1]!r} is not known")
        entry = self.spec.get("entrypoint")
        if entry and not ref and entry not in self.local:
            self.report([*self.base, "entrypoint"], f"entrypoint {entry!r} is not a template of this workflow")
        if self.doc.get("kind") == "Workflow" and not entry and not ref:
            self.report([*self.base, "entrypoint"], "a Workflow needs an entrypoint or a workflowTemplateRef")
        on_exit = self.spec.get("onExit")
        if on_exit and not ref and on_exit not in self.local:
            self.report([*self.base, "onExit"], f"exit template {on_exit!r} is not a template of this workflow"
                        " (to call a shared one, use hooks.exit with a templateRef)")
        for name, hook in (self.spec.get("hooks") or {}).items():
            if isinstance(hook, dict):
                self.check_call(hook, [*self.base, "hooks", name], allow_local=not ref)

    # -- one template ------------------------------------------------------------------------
    def check_template(self, template: dict[str, Any], path: Path) -> None:
        self.check_resources(template, path)
        nodes: dict[str, dict[str, Any]] = {}
        if template.get("dag"):
            tasks = template["dag"].get("tasks") or []
            nodes = {str(t.get("name")): t for t in tasks if isinstance(t, dict)}
            self.check_dag(tasks, [*path, "dag", "tasks"])
        if template.get("steps"):
            for g, group in enumerate(template["steps"]):
                for s, step in enumerate(group or []):
                    if isinstance(step, dict):
                        nodes[str(step.get("name"))] = step
                        self.check_call(step, [*path, "steps", g, s])
        for t, task in enumerate((template.get("dag") or {}).get("tasks") or []):
            if isinstance(task, dict):
                self.check_call(task, [*path, "dag", "tasks", t])
        kind = "dag" if template.get("dag") else "steps" if template.get("steps") else None
        for p, text in _strings(template, path):
            node_path = p[len(path):]
            in_loop = self._in_loop(template, node_path)
            self.check_tags(p, text, template=template, nodes=(kind, nodes) if kind else None, in_loop=in_loop)

    @staticmethod
    def _in_loop(template: dict[str, Any], rel: Path) -> bool:
        node: Any = None
        if len(rel) >= 3 and rel[0] == "dag" and rel[1] == "tasks":
            node = template["dag"]["tasks"][rel[2]]
        elif len(rel) >= 3 and rel[0] == "steps" and isinstance(rel[2], int):
            node = template["steps"][rel[1]][rel[2]]
        return isinstance(node, dict) and any(f in node for f in _LOOP_FIELDS)

    def check_resources(self, template: dict[str, Any], path: Path) -> None:
        containers: list[tuple[Path, Any]] = []
        for key in ("container", "script"):
            if template.get(key):
                containers.append(([*path, key], template[key]))
        for key in ("initContainers", "sidecars"):
            for i, c in enumerate(template.get(key) or []):
                containers.append(([*path, key, i], c))
        for i, c in enumerate((template.get("containerSet") or {}).get("containers") or []):
            containers.append(([*path, "containerSet", "containers", i], c))
        for cpath, container in containers:
            if not isinstance(container, dict):
                continue
            for p, text in _strings(container.get("resources"), [*cpath, "resources"]):
                if "{{" in text:
                    self.report(p, "a {{...}} tag inside resources is rejected by Argo at submit;"
                                " patch the quantity in through podSpecPatch")

    def check_dag(self, tasks: list[Any], path: Path) -> None:
        names = [str(t.get("name")) for t in tasks if isinstance(t, dict)]
        edges: dict[str, set[str]] = {n: set() for n in names}
        for i, task in enumerate(tasks):
            if not isinstance(task, dict):
                continue
            deps: set[str] = set()
            for d, dep in enumerate(task.get("dependencies") or []):
                if dep not in edges:
                    self.report([*path, i, "dependencies", d], f"depends on unknown task {dep!r}")
                deps.add(dep)
            depends = task.get("depends")
            if isinstance(depends, str):
                for token in _DEPENDS_TOKEN.findall(depends):
                    name, _, result = token.partition(".")
                    if result and result not in _DEPENDS_RESULTS:
                        self.report([*path, i, "depends"], f"unknown task result {result!r} in {depends!r}")
                    if name not in edges:
                        self.report([*path, i, "depends"], f"depends on unknown task {name!r}")
                    deps.add(name)
            edges[str(task.get("name"))] = deps & set(edges)
        cycle = _find_cycle(edges)
        if cycle:
            self.report(path, "dependency cycle: " + " -> ".join(cycle))

    # -- calls to templates ----------------------------------------------------------------
    def check_call(self, call: dict[str, Any], path: Path, allow_local: bool = True) -> None:
        target: dict[str, Any] | None = None
        if call.get("templateRef"):
            ref = call["templateRef"]
            key = (bool(ref.get("clusterScope")), str(ref.get("name")))
            kind = "ClusterWorkflowTemplate" if key[0] else "WorkflowTemplate"
            if key not in self.catalog.templates:
                self.report([*path, "templateRef", "name"], f"{kind} {key[1]!r} is not known")
                return
            target = self.catalog.templates[key].get(ref.get("template"))
            if target is None:
                self.report([*path, "templateRef", "template"],
                            f"{kind} {key[1]!r} has no template {ref.get('template')!r}")
                return
        elif call.get("template") and allow_local:
            target = self.local.get(call["template"])
            if target is None:
                self.report([*path, "template"], f"template {call['template']!r} is not a template of this workflow")
                return
        if target is None:
            return
        declared = _declared(target, "inputs", "parameters")
        given = (call.get("arguments") or {}).get("parameters") or []
        for a, arg in enumerate(given):
            if isinstance(arg, dict) and arg.get("name") not in declared:
                # Argo ignores an argument the called template does not declare: a likely mistake, not an error.
                self.report([*path, "arguments", "parameters", a],
                            f"template {target.get('name')!r} declares no input parameter {arg.get('name')!r}", WARNING)
        missing = _required_inputs(target) - _names(given)
        if missing:
            self.report([*path, "arguments"], f"template {target.get('name')!r} needs input parameter(s) "
                        + ", ".join(sorted(missing)))

    # -- {{...}} tags ------------------------------------------------------------------------
    def check_tags(self, path: Path, text: str, template: dict[str, Any] | None,
                   nodes: tuple[str, dict[str, dict[str, Any]]] | None, in_loop: bool) -> None:
        for is_expr, body in _TAG.findall(text):
            refs = self._param_refs(body, bool(is_expr))
            for scope, name in refs:
                if scope == "inputs":
                    if template is None:
                        self.report(path, f"{{{{inputs.parameters.{name}}}}} is used outside a template")
                    elif name not in _declared(template, "inputs", "parameters"):
                        self.report(path, f"input parameter {name!r} is not declared by template "
                                    f"{template.get('name')!r}")
                elif self.check_workflow_params and name not in self.workflow_params:
                    # A WorkflowTemplate's parameters may be supplied only at submission (argo submit -p); so may
                    # those a `when` or an expression tag names: Argo resolves neither before the run, and accepts
                    # the manifest (its own examples/conditionals.yaml does it).
                    templated = self.doc.get("kind") in ("WorkflowTemplate", "ClusterWorkflowTemplate")
                    lenient = templated or bool(is_expr) or (bool(path) and path[-1] == "when")
                    self.report(path, f"workflow parameter {name!r} is not declared in spec.arguments"
                                + ("" if templated else f" (fine if given at submit: argo submit -p {name}=...)"),
                                WARNING if lenient else ERROR)
            for kind, node, rest in self._node_refs(body, bool(is_expr)):
                self.check_node_ref(path, kind, node, rest, nodes)
            if not is_expr and (body == "item" or body.startswith("item.")) and not in_loop:
                self.report(path, "{{item}} is used outside a withItems/withParam/withSequence loop")

    @staticmethod
    def _param_refs(body: str, is_expr: bool) -> list[tuple[str, str]]:
        if not is_expr:
            match = _SIMPLE_PARAM.match(body)
            return [(match.group(1), match.group(2))] if match else []
        return [(m.group(1), m.group(2) or m.group(3) or m.group(4)) for m in _EXPR_PARAM.finditer(body)]

    @staticmethod
    def _node_refs(body: str, is_expr: bool) -> list[tuple[str, str, str]]:
        if not is_expr:
            match = _NODE_REF.match(body)
            return [(match.group(1), match.group(2), match.group(3))] if match else []
        return [(m.group(1), m.group(2) or m.group(3), "") for m in _EXPR_NODE_REF.finditer(body)]

    def check_node_ref(self, path: Path, kind: str, node: str, rest: str,
                       nodes: tuple[str, dict[str, dict[str, Any]]] | None) -> None:
        if nodes is None or nodes[0] != ("dag" if kind == "tasks" else "steps"):
            if kind == "steps" and node == "name" or kind == "tasks" and node == "name":
                return
            self.report(path, f"{{{{{kind}.{node}...}}}} is used outside a {'DAG' if kind == 'tasks' else 'steps'}"
                        " template")
            return
        target_node = nodes[1].get(node)
        if target_node is None:
            self.report(path, f"{kind}.{node}: no such {'task' if kind == 'tasks' else 'step'} in this template")
            return
        match = re.match(r"outputs\.parameters\.([A-Za-z0-9_.-]+)$", rest)
        if match:
            target = self._target(target_node)
            if target is not None and match.group(1) not in _declared(target, "outputs", "parameters"):
                self.report(path, f"{kind}.{node} (template {target.get('name')!r}) declares no output parameter "
                            f"{match.group(1)!r}")

    def _target(self, call: dict[str, Any]) -> dict[str, Any] | None:
        if call.get("templateRef"):
            ref = call["templateRef"]
            return self.catalog.templates.get((bool(ref.get("clusterScope")), str(ref.get("name"))), {}).get(
                ref.get("template"))
        if call.get("template"):
            return self.local.get(call["template"])
        return None


def _find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(edges.get(node, ())):
            if state.get(dep) == 1:
                return [*stack[stack.index(dep):], dep]
            if dep not in state:
                found = visit(dep)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


ARGO_KINDS = ("Workflow", "WorkflowTemplate", "CronWorkflow", "ClusterWorkflowTemplate")


def lint_problems(doc: dict[str, Any], file: str, index: int, catalog: Catalog) -> list[Problem]:
    """Check one Argo document's references against itself and the catalog."""
    if doc.get("kind") not in ARGO_KINDS or not isinstance(doc.get("spec"), dict):
        return []
    return sorted(set(_DocumentLint(doc, file, index, catalog).run()))


def build_catalog(docs: Sequence[dict[str, Any]]) -> Catalog:
    """Build the catalog of templateRef targets from documents."""
    catalog = Catalog()
    for doc in docs:
        catalog.add(doc)
    return catalog
