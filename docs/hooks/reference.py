"""The documentation's reference pages, generated from the code at every `mkdocs build` (an MkDocs hook).

Nothing here is committed as Markdown, so the reference cannot drift from what it describes:

- `reference/cli.md`: every verb of `offhours`, walked from the argparse parser that
  `offhours.scripts.cli.main.parser()` builds (nested verbs such as `schedule list` included);
- `reference/gate-config.md` and `reference/simulator-files.md`: every field of the JSON Schemas in
  `schemas/` (the gate configuration, the simulator's fleet and jobs files), with its type, bounds and text;
- `reference/templates.md`: every parameter of the WorkflowTemplates, and every object an install creates,
  read from what `offhours render` writes;
- `reference/names.md`: the `/metrics` families as `offhours.scripts.pool.operator_metrics` writes them
  (rendered from a one-service pool, so names, types, help and labels are the page's own), and every name
  of `offhours.scripts.names` (Event reasons, labels, annotations, objects) with its docstring;
- `development/architecture.md`: ARCHITECTURE.md as it is at the top of the repository.

`mkdocs.yml` names this file under `hooks:`; the unit tests import it by path (it is no module of the
`offhours` package, so the package's import layers do not see it).
"""

from __future__ import annotations

import argparse
import ast
import functools
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = REPO / "schemas"
GENERATED_NOTE = "<!-- generated at build time by docs/hooks/reference.py: edit the code it reads, not this page -->\n"


def _cell(text: Any) -> str:
    """Return `text` fit for one Markdown table cell (pipes escaped, lines joined)."""
    return " ".join(str(text).split()).replace("|", "\\|")


# -- the command line ----------------------------------------------------------------------------------------


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:  # type: ignore[type-arg]
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def verbs(parser: argparse.ArgumentParser | None = None) -> list[tuple[str, argparse.ArgumentParser, bool]]:
    """Return every command of `offhours` as (its words, its parser, whether `offhours --help` lists it), depth first."""
    if parser is None:
        from offhours.scripts.cli.main import parser as build

        parser = build()
    out: list[tuple[str, argparse.ArgumentParser, bool]] = []

    def walk(words: str, node: argparse.ArgumentParser, shown: bool) -> None:
        sub = _subparsers(node)
        if sub is None:
            return
        listed = {a.dest for a in sub._choices_actions}
        for name, child in sub.choices.items():
            child_words = f"{words} {name}".strip()
            out.append((child_words, child, shown and name in listed))
            walk(child_words, child, shown and name in listed)

    walk("", parser, True)
    return out


def _value(action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        return " \\| ".join(f"`{c}`" for c in action.choices)
    metavar = action.metavar if isinstance(action.metavar, str) else None
    return f"`{metavar or action.dest.upper()}`"


def _default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS) or action.required:
        return ""
    if isinstance(action.default, (list, tuple)) and not action.default:
        return ""
    return f"`{action.default}`"


def _usage(parser: argparse.ArgumentParser) -> str:
    # A fixed width: the page is the same on every terminal that builds it.
    formatter_class = parser.formatter_class
    parser.formatter_class = functools.partial(formatter_class, width=100)  # type: ignore[assignment]
    try:
        return parser.format_usage().strip()
    finally:
        parser.formatter_class = formatter_class


def cli_page() -> str:
    """Return the CLI reference page, one section per command."""
    from offhours.scripts.cli.main import parser as build

    root = build()
    lines = [GENERATED_NOTE, "# Command line", "",
             f"`offhours`: {root.description} Every command below is read from the parser the program itself "
             "builds (`scripts/cli/main.py`), so this page is always the installed version's. `offhours COMMAND "
             "--help` prints the same. The in-pod commands run inside offhours' own pods; `offhours --help` does "
             "not list them.", ""]
    for words, parser, shown in verbs(root):
        lines += [f"## offhours {words}", ""]
        if not shown:
            lines += ["*In-pod command: offhours' own pods run it; `offhours --help` does not list it.*", ""]
        lines += ["```text", _usage(parser), "```", ""]
        text = parser.description or ""
        if text:
            lines += [" ".join(text.split()), ""]
        rows = []
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            name = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.dest}`"
            meaning = "" if action.help in (None, argparse.SUPPRESS) else action.help % vars(action) \
                if "%(" in (action.help or "") else action.help
            required = " (required)" if action.required and action.option_strings else ""
            rows.append(f"| {name} | {_value(action)} | {_default(action)} | {_cell(meaning or '')}{required} |")
        sub = _subparsers(parser)
        if sub is not None:
            listed = [a.dest for a in sub._choices_actions]
            lines += ["Commands: " + ", ".join(f"[`{words} {n}`](#offhours-{words.replace(' ', '-')}-{n})"
                                               for n in sub.choices if n in listed), ""]
        if rows:
            lines += ["| argument | value | default | meaning |", "|---|---|---|---|", *rows, ""]
    return "\n".join(lines)


# -- the JSON Schemas ----------------------------------------------------------------------------------------


def _type(node: dict[str, Any]) -> str:
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#def-{name})"
    if "enum" in node:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in node["enum"])
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    kind = node.get("type", "")
    if isinstance(kind, list):
        return " or ".join(kind)
    if "oneOf" in node or "anyOf" in node:
        return " or ".join(_type(n) for n in node.get("oneOf", node.get("anyOf", [])))
    return str(kind)


BOUNDS = (("minimum", "≥ {}"), ("exclusiveMinimum", "> {}"), ("maximum", "≤ {}"), ("exclusiveMaximum", "< {}"),
          ("minLength", "length ≥ {}"), ("maxLength", "length ≤ {}"), ("minItems", "≥ {} items"),
          ("maxItems", "≤ {} items"), ("minProperties", "≥ {} entries"), ("pattern", "matches `{}`"),
          ("default", "default `{}`"))


def _bounds(node: dict[str, Any]) -> str:
    parts = [template.format(node[key]) for key, template in BOUNDS if key in node]
    names = node.get("propertyNames")
    if isinstance(names, dict) and "pattern" in names:
        parts.append(f"names match `{names['pattern']}`")
    return "; ".join(parts)


def schema_rows(node: dict[str, Any], path: str = "", required: bool = False) -> list[tuple[str, dict[str, Any], bool]]:
    """Return (dotted path, schema node, required) for `node`'s every field, nested objects flattened in."""
    rows: list[tuple[str, dict[str, Any], bool]] = []
    if path:
        rows.append((path, node, required))
    needed = set(node.get("required", ()))
    for name, child in node.get("properties", {}).items():
        rows += schema_rows(child, f"{path}.{name}" if path else name, name in needed)
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        rows += schema_rows(extra, f"{path}.<name>" if path else "<name>")
    items = node.get("items")
    if isinstance(items, dict):
        rows += schema_rows(items, f"{path}[]" if path else "[]")
    return rows


def _table(node: dict[str, Any]) -> list[str]:
    lines = ["| field | type | bounds | meaning |", "|---|---|---|---|"]
    for path, child, required in schema_rows(node):
        text = child.get("description", "") + (" Required." if required else "")
        lines.append(f"| `{path}` | {_type(child)} | {_cell(_bounds(child))} | {_cell(text)} |")
    return lines


def schema_section(schema: dict[str, Any], level: str) -> list[str]:
    """Return a schema's Markdown: its top-level fields, then each definition under a heading one below `level`."""
    lines = _table(schema) + [""]
    if schema.get("required"):
        lines += ["Required at the top level: " + ", ".join(f"`{r}`" for r in schema["required"]) + ".", ""]
    for name, definition in schema.get("definitions", schema.get("$defs", {})).items():
        lines += [f"{level}# `{name}` {{#def-{name}}}", ""]
        if definition.get("description"):
            lines += [" ".join(definition["description"].split()), ""]
        lines += _table(definition) + [""]
    return lines


def gate_config_page() -> str:
    """Return the gate configuration's reference: its schema, then the example file the library installs."""
    schema = json.loads((SCHEMAS / "gate-config.schema.json").read_text())
    example = (REPO / "cronworkflows" / "gate-config.example.yaml").read_text()
    lines = [GENERATED_NOTE, "# Gate configuration", "",
             f"{schema.get('title', '')}: read from `schemas/gate-config.schema.json`, which `offhours gate`, "
             "`offhours render --gate-config` and `offhours check` validate every file against (an invalid "
             "file is refused naming the field). Fields of objects are written `parent.child`; `<name>` "
             "is a key you choose (a service's name).", "", "## Fields", ""]
    lines += schema_section(schema, "#")
    lines += ["## The example file", "", "`cronworkflows/gate-config.example.yaml`, as the library ships it:", "",
              "```yaml", example.rstrip(), "```", ""]
    return "\n".join(lines)


def simulator_files_page() -> str:
    """Return the reference of `offhours simulate --fleet` and `--jobs` files, from their schemas."""
    lines = [GENERATED_NOTE, "# Simulator files", "",
             "`offhours simulate --fleet FILE --jobs FILE` (see [Tune the policy](../operators/tune.md)) reads "
             "these files, validated by `schemas/fleet.schema.json` and `schemas/jobs.schema.json`.", ""]
    for title, name in (("Fleet file (`--fleet`)", "fleet"), ("Jobs file (`--jobs`)", "jobs")):
        schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
        lines += [f"## {title}", "", schema.get("description", schema.get("title", "")), ""]
        lines += schema_section(schema, "##")
    return "\n".join(lines)


# -- names and metrics ---------------------------------------------------------------------------------------


def names_entries() -> list[tuple[str, str, str, str]]:
    """Return (section, constant, value, docstring) for every string or tuple constant of scripts/names.py, in order."""
    from offhours.scripts import names

    source = (REPO / "scripts" / "names.py").read_text()
    comments = {i + 1: line.strip("# -").strip() for i, line in enumerate(source.splitlines())
                if line.startswith("# --")}
    body = ast.parse(source).body
    out: list[tuple[str, str, str, str]] = []
    section = ""
    for index, node in enumerate(body):
        for line in sorted(comments):
            if line < node.lineno:
                section = comments[line]
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name = node.targets[0].id
        value = getattr(names, name)
        if isinstance(value, (tuple, frozenset)):
            value = ", ".join(sorted(str(v) for v in value)) if isinstance(value, frozenset) else \
                ", ".join(str(v) for v in value)
        if not isinstance(value, str):
            continue
        following = body[index + 1] if index + 1 < len(body) else None
        doc = following.value.value if isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant) \
            and isinstance(following.value.value, str) else ""
        out.append((section, name, value, doc))
    return out


def metric_families() -> list[tuple[str, str, str, list[str]]]:
    """Return (name, type, help, label names) of every `/metrics` family, from the console's own exposition."""
    from offhours.scripts.pool.model import Pool, ServiceView
    from offhours.scripts.pool.operator_metrics import MetricsState, exposition

    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    service = ServiceView(name="SERVICE", namespace="serving", deployment="vllm", baseline=4, replicas=3, ready=3,
                          required=2, lent=1, target=3, action="lend", decided_at=now, gpus_per_replica=4)
    pool = Pool(services=(service,), runs=(), read_at=now)
    state = MetricsState(services=frozenset({"SERVICE"}))
    state.update(pool)
    families: dict[str, list[Any]] = {}
    for line in exposition(pool, state).splitlines():
        if line.startswith("# HELP "):
            name, _, text = line[len("# HELP "):].partition(" ")
            families[name] = [name, "", text, []]
        elif line.startswith("# TYPE "):
            name, _, kind = line[len("# TYPE "):].partition(" ")
            families[name][1] = kind
        elif line and not line.startswith("#"):
            series = line.split(" ", 1)[0]
            family = next(n for n in sorted(families, key=len, reverse=True) if series.startswith(n))
            if "{" in series:
                for pair in series[series.index("{") + 1:-1].split(","):
                    label = pair.split("=", 1)[0]
                    if label not in families[family][3] and label != "le":
                        families[family][3].append(label)
    return [(n, k, h, labels) for n, k, h, labels in families.values()]


def names_page() -> str:
    """Return the reference of metrics, Event reasons and every name offhours reads or writes."""
    lines = [GENERATED_NOTE, "# Metrics, Events and names", "",
             "Generated from `scripts/pool/operator_metrics.py` (the console's `/metrics`) and "
             "`scripts/names.py` (the one place every name offhours reads or writes is defined).", "",
             "## Metrics", "",
             "`offhours console` serves these at `/metrics` (Prometheus text format 0.0.4); see "
             "[Observe](../operators/observe.md).", "",
             "| metric | type | labels | meaning |", "|---|---|---|---|"]
    for name, kind, text, labels in metric_families():
        lines.append(f"| `{name}` | {kind} | {', '.join(f'`{x}`' for x in labels)} | {_cell(text)} |")
    lines.append("")
    entries = names_entries()
    events = [e for e in entries if e[1].startswith("EVENT_") and e[1] != "EVENT_SOURCE" and e[1] != "EVENT_REASONS"]
    lines += ["## Event reasons", "",
              "Recorded on the serving Deployment a decision concerns, by the source `offhours-gate` "
              "(`kubectl get events --field-selector reason=GPUsLent`). These strings never change.", "",
              "| reason | when |", "|---|---|"]
    lines += [f"| `{value}` | {_cell(doc)} |" for _, _, value, doc in events]
    lines += ["", "## Every name", "",
              "Labels, annotations, states, objects and the Argo API, grouped as `scripts/names.py` groups them.", ""]
    section = None
    for group, name, value, doc in entries:
        if group != section:
            section = group
            lines += ["", f"### {group[:1].upper() + group[1:]}", "", "| constant | value | meaning |", "|---|---|---|"]
        lines.append(f"| `{name}` | `{_cell(value)}` | {_cell(doc)} |")
    return "\n".join(lines) + "\n"


def templates_page() -> str:
    """Return the WorkflowTemplates' parameters and the list of what an install creates, from the rendering itself."""
    from offhours.workflows.render import manifests

    rendered = manifests()
    lines = [GENERATED_NOTE, "# Templates and install", "",
             "Read from what `offhours render` writes (with the bundled example configuration), so every "
             "parameter, default and description is the templates' own. `argo template get NAME` shows the same "
             "on a cluster.", "", "## What an install creates", "",
             "| file | kind | name | namespace |", "|---|---|---|---|"]
    for file, manifest in rendered.items():
        meta = manifest.get("metadata", {})
        lines.append(f"| `{file}` | {manifest.get('kind', '')} | `{meta.get('name', '')}` | {meta.get('namespace', '')} |")
    lines += ["", "The rendering includes the Namespaces: read [Uninstall](../operators/uninstall.md) before "
              "deleting what it applied.", ""]
    for file, manifest in rendered.items():
        if manifest.get("kind") != "WorkflowTemplate":
            continue
        parameters = manifest.get("spec", {}).get("arguments", {}).get("parameters", [])
        if not parameters:
            continue
        name = manifest["metadata"]["name"]
        lines += [f"## {name}", ""]
        text = manifest["metadata"].get("annotations", {}).get("workflows.argoproj.io/description", "")
        if text:
            lines += [" ".join(text.split()), ""]
        lines += ["| parameter | default | meaning |", "|---|---|---|"]
        for parameter in parameters:
            default = f"`{_cell(parameter['value'])}`" if "value" in parameter else "required"
            lines.append(f"| `{parameter['name']}` | {default} | {_cell(parameter.get('description', ''))} |")
        lines.append("")
    return "\n".join(lines)


def architecture_page() -> str:
    """Return ARCHITECTURE.md (kept at the top of the repository, where a reader of the code looks first)."""
    return GENERATED_NOTE + (REPO / "ARCHITECTURE.md").read_text()


PAGES = {
    "reference/cli.md": cli_page,
    "reference/gate-config.md": gate_config_page,
    "reference/simulator-files.md": simulator_files_page,
    "reference/names.md": names_page,
    "reference/templates.md": templates_page,
    "development/architecture.md": architecture_page,
}


def on_files(files: Any, config: Any) -> Any:
    """Add the generated pages to the build (MkDocs event: before the navigation is read)."""
    from mkdocs.structure.files import File

    for uri, build in PAGES.items():
        files.append(File.generated(config, uri, content=build()))
    return files
