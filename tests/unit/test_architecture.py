"""The import graph of the package has no cycle, and every module sits where pyproject.toml maps it.

The layers themselves are checked by `lint-imports` (.importlinter); a cycle inside one layer is not a
layer violation, so it is refused here: a module-level graph read from the source, whatever the install.
"""

import ast
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def modules() -> dict[str, Path]:
    """Every module of the `offhours` package, by dotted name, from pyproject's folder mapping."""
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapped = setuptools["package-dir"]
    found: dict[str, Path] = {}
    for package in setuptools["packages"]:
        # The longest mapped prefix decides the folder: offhours.scripts.cli -> scripts/cli.
        prefix = max((p for p in mapped if package == p or package.startswith(p + ".")), key=len)
        folder = REPO / mapped[prefix] / package[len(prefix) + 1:].replace(".", "/")
        for path in folder.glob("*.py"):
            found[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules that `name` imports (at any depth of the file, lazy imports included)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module in known:
                out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in known)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in known)
    out.discard(name)
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_mapping_finds_the_package() -> None:
    found = modules()
    assert "offhours.scripts.gate.controller" in found and "offhours.steps.library" in found
    assert len(found) > 80


def test_no_import_cycle_between_modules() -> None:
    known = modules()
    graph = {name: imports(name, path, known) for name, path in known.items()}
    assert cycles(graph) == []


def test_a_cycle_is_found() -> None:
    # The detector itself: a three-module circle and a self-contained pair are both reported.
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    assert cycles(graph) == [["a", "b", "c"], ["d", "e"]]


def spelled_names() -> dict[str, str]:
    """The names in names.py that cannot be taken for a plain word (a domain, a file key, a reason), value -> constant."""
    tree = ast.parse((REPO / "scripts" / "names.py").read_text())
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            name, value = node.targets[0].id, node.value.value  # type: ignore[attr-defined]
            if "offhours" in value or "." in value or name.startswith("EVENT_"):
                found[value] = name
    return found


def test_object_names_are_spelled_only_in_names_py() -> None:
    names = spelled_names()
    assert {"offhours.io/service", "offhours-gate", "argoproj.io", "GPUsLent"} <= set(names)
    spelled = []
    for name, path in modules().items():
        if path.name == "names.py" or ".controlplane" in name:
            continue
        tree = ast.parse(path.read_text())
        docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                hits = [names[v] for v in names if node.value == v or (v.endswith(("/", "-")) and node.value.startswith(v))]
                spelled += [f"{path.relative_to(REPO)}:{node.lineno} spells {hit}" for hit in hits]
    assert spelled == []
