"""The documentation site: README stays short, nothing the former README said is lost, the site builds strictly.

The former README (1,510 lines, to commit 95bdd79) moved into the site under docs/. What it said is
kept as one fingerprint per line (tests/data/former_readme.json, written by `python
tests/unit/test_docs_site.py fingerprint OLD_README`): each line, with its heading marks, link syntax
and spacing normalised away (a move changes heading levels, relative paths and links, never words), must
still be a line of README or of a page under docs/, unless REWORDED names it with the reason.
"""

import argparse
import ast
import hashlib
import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
FORMER = REPO / "tests" / "data" / "former_readme.json"
README_LIMIT = 200
# Fingerprints of former README lines deliberately reworded in the move, each with where it went and why.
REWORDED_LAYOUT = ("docs/researchers/checkpoints.md: the store's layout is a log of exclusive entries over uniquely "
                   "named data now (issue 33: a crash-consistent store); the `step-N/COMPLETE` layout is gone")
REWORDED_SAVE = ("docs/researchers/checkpoints.md: an interrupted save is never published now (one exclusive log "
                 "entry after the bytes), so the marker-last and debris text no longer holds (issue 33)")
REWORDED_SHARDS = ("docs/development/local-control-plane.md and ci.md: `make e2e` runs the tier in shards on "
                   "control planes of its own, `make e2e-here` on `make cluster-up`'s (issue 35: CI within budget)")
REWORDED = {
    "6b928b37ecbe91ee": REWORDED_SHARDS,
    "f0ed7293f2d64699": REWORDED_SHARDS,  # what the e2e tier's figure covered: one control plane, 65 tests then
    "81d17a5b40e71d01": REWORDED_SHARDS,
    "49e45235af05fcc3": REWORDED_SHARDS,
    "12835000afec3b78": REWORDED_SHARDS,
    "c72f75aefb73875c": REWORDED_LAYOUT,
    "0f38e0978ac59238": REWORDED_LAYOUT,
    "43e9c890be636082": REWORDED_LAYOUT,
    "27aca7dd64e23a77": REWORDED_LAYOUT,
    "71e1b54ef4e93e6e": REWORDED_SAVE,
    "5d9c46096bca338c": REWORDED_SAVE,
    "97df566628e03a91": REWORDED_SAVE,
    "82257c60b4cc54ff": REWORDED_SAVE,
    "4351dd645ea9b6db": REWORDED_SAVE,
    "c04be977101866d0": REWORDED_SAVE,
    "d7abf0b1f972c04c": REWORDED_SAVE,
    "6562708f78efc58b": "docs/reference/benchmarks.md: the across-traces row is for the current defaults now "
                        "(bench/results/traces.json rerun, issue 34)",
    "0a5f131973501b3c": "docs/development/local-control-plane.md: the figures are the docs' now, redone by "
                        "`measure.py docs` (was `measure.py readme`, which rewrote README)",
}


def normalised(line: str) -> str:
    """Return `line` as the move must keep it: no heading marks, links as their words alone, single spaces."""
    line = re.sub(r"^\s*#+\s+", "", line)
    line = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", line)  # a link keeps its words: [text](target) -> text
    # A measured figure's words are measure.py's, rewritten at each measurement: the mark, not its figure, must move.
    line = re.sub(r"<!-- measured:([a-z0-9_]+) -->.*?<!-- /measured -->", r"<!-- measured:\1 -->", line)
    return " ".join(line.split())


def meaningful(line: str) -> bool:
    """Return whether a normalised line says something (not blank, a fence or a table's rule)."""
    return len(line) > 3 and not re.fullmatch(r"[`|:\- ]*(\w+)?", line)


def fingerprint(line: str) -> str:
    """Return the 16-hex-digit fingerprint of a normalised line."""
    return hashlib.sha256(line.encode()).hexdigest()[:16]


def fingerprints(text: str) -> dict[str, list[str]]:
    """Return, per section heading of `text` (the text before any: ''), the fingerprints of its lines."""
    out: dict[str, list[str]] = {"": []}
    section = ""
    fenced = False
    for raw in text.splitlines():
        if raw.startswith("```"):
            fenced = not fenced
        if not fenced and re.match(r"^#{1,6} ", raw):
            section = normalised(raw)
            out.setdefault(section, [])
        line = normalised(raw)
        if meaningful(line):
            out[section].append(fingerprint(line))
    return out


def site_text() -> str:
    """Return README and every Markdown page under docs/, one text."""
    return "\n".join(p.read_text() for p in [REPO / "README.md", *sorted(DOCS.rglob("*.md"))])


def headings(text: str) -> set[str]:
    """Return the normalised headings of Markdown `text` (outside code blocks)."""
    found, fenced = set(), False
    for raw in text.splitlines():
        if raw.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"^#{1,6} ", raw):
            found.add(normalised(re.sub(r"\s*\{#[^}]*\}\s*$", "", raw)))
    return found


def former() -> dict[str, list[str]]:
    return dict(json.loads(FORMER.read_text())["sections"])


# -- README -------------------------------------------------------------------------------------------------


def test_readme_is_what_a_person_reads_first_under_200_lines() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) < README_LIMIT, "README is what a person reads first: move detail into docs/"
    # What it is, the two commands, where to go next.
    assert {"offhours", "Two commands", "Where to go next"} <= headings(readme)
    assert 'python3 -m pip install -e ".[dev]" && offhours simulate' in readme and "make ci" in readme


def test_every_relative_link_of_readme_reaches_a_file_or_one_of_its_headings() -> None:
    # README is outside the site (MkDocs checks the pages' links): its own links are checked here.
    readme = (REPO / "README.md").read_text()
    anchors = {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in headings(readme)}
    links = re.findall(r"\]\(([^)\s]+)\)", readme)
    assert links
    for link in links:
        if re.match(r"[a-z]+://", link):
            continue
        path, _, anchor = link.partition("#")
        if path:
            assert (REPO / path).is_file(), f"README links to {link}, which is not a file"
        else:
            assert anchor in anchors, f"README links to #{anchor}, which is none of its headings"


# -- nothing lost -------------------------------------------------------------------------------------------


def test_every_former_readme_heading_is_a_heading_of_the_docs() -> None:
    now = headings(site_text())
    missing = [h for h in former() if h and h not in now]
    assert not missing, f"former README sections with no heading in README or docs/: {missing}"


def test_nothing_the_former_readme_said_is_lost() -> None:
    now = {f for lines in fingerprints(site_text()).values() for f in lines}
    lost = {section: [f for f in lines if f not in now and f not in REWORDED] for section, lines in former().items()}
    lost = {section: lines for section, lines in lost.items() if lines}
    assert not lost, ("lines of the former README found nowhere in README or docs/ (reworded? name them in "
                      f"REWORDED with the reason): {lost}")
    # REWORDED stays exact: an entry whose line is there again (or never was) is stale.
    every = {f for lines in former().values() for f in lines}
    assert set(REWORDED) <= every - now


def test_the_fingerprint_ignores_a_move_and_sees_a_changed_word() -> None:
    moved = fingerprints("#### What it gave you: `offhours report`\n\n![pool](../console/pool.png)   x\n")
    original = fingerprints("### What it gave you: `offhours report`\n![pool](docs/console/pool.png) x\n")
    assert list(moved.values()) == list(original.values()) and list(moved) == list(original)
    assert fingerprints("the gate lends two replicas\n") != fingerprints("the gate lends three replicas\n")
    assert fingerprints("```\n|---|---|\n\n") == {"": []}


# -- the site -----------------------------------------------------------------------------------------------


def reference_hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("offhours_docs_reference", DOCS / "hooks" / "reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(docs_dir: Path, site_dir: Path) -> None:
    """Build the site as `make docs` does (mkdocs.yml, strict) from `docs_dir`; raise on any warning."""
    from mkdocs.commands.build import build as mkdocs_build
    from mkdocs.config import load_config

    config = load_config(str(REPO / "mkdocs.yml"), docs_dir=str(docs_dir), site_dir=str(site_dir), strict=True)
    mkdocs_build(config)


@pytest.mark.parametrize("breakage", ["", "[x](../operators/gate.md#no-such-heading)", "[x](no-such-page.md)",
                                      "[x](#nowhere-on-this-page)", "![x](../console/no-such-picture.png)"])
def test_a_broken_link_or_anchor_fails_the_build(tmp_path: Path, breakage: str) -> None:
    from mkdocs.exceptions import Abort

    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs, ignore=shutil.ignore_patterns("hooks"))
    page = docs / "concepts" / "lend.md"
    page.write_text(page.read_text() + f"\n{breakage}\n")
    if not breakage:  # the site builds strictly (so what fails below is the breakage alone), generated pages too
        build(docs, tmp_path / "site")
        for built in ("index.html", "reference/cli/index.html", "reference/gate-config/index.html",
                      "reference/templates/index.html", "reference/names/index.html", "concepts/backstop/index.html",
                      "development/architecture/index.html"):
            assert (tmp_path / "site" / built).is_file(), built
        return
    with pytest.raises(Abort):
        build(docs, tmp_path / "site")


def test_a_page_outside_the_navigation_fails_the_build(tmp_path: Path) -> None:
    # Other pages are added later: each must be in mkdocs.yml's nav, or no reader finds it.
    from mkdocs.exceptions import Abort

    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs, ignore=shutil.ignore_patterns("hooks"))
    (docs / "operators" / "orphan.md").write_text("# Orphan\n")
    with pytest.raises(Abort):
        build(docs, tmp_path / "site")


def test_make_docs_builds_strictly_and_quiet_cannot_hide_a_warning() -> None:
    # `mkdocs build --quiet` drops warnings before --strict counts them: the build then passes whatever is broken.
    recipe = (REPO / "Makefile").read_text().split("\ndocs:", 1)[1].split("\n\n", 1)[0]
    command = next(line for line in recipe.splitlines() if "mkdocs build" in line)
    assert "--strict" in command and not re.search(r"\s(-q|--quiet)\b", command), command


def test_the_generated_pages_are_never_committed() -> None:
    # Generated at every build, so they cannot drift; a committed copy would be what drifts.
    for uri in reference_hook().PAGES:
        assert not (DOCS / uri).exists(), f"docs/{uri} is generated by docs/hooks/reference.py: remove the file"


def test_every_python_example_of_the_docs_parses() -> None:
    for page in [REPO / "README.md", *DOCS.rglob("*.md")]:
        for block in re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S):
            ast.parse(block, filename=str(page))


# -- the generated reference covers the code ---------------------------------------------------------------


def test_the_cli_reference_has_every_command_and_flag() -> None:
    from offhours.scripts.cli.main import parser

    page = reference_hook().cli_page()

    def walk(prefix: str, node: object) -> None:
        for action in node._actions:  # type: ignore[attr-defined]
            if isinstance(action, argparse._HelpAction):
                continue
            for option in action.option_strings:
                assert f"`{option}`" in page, f"{prefix}: {option} is not in the CLI reference"
            if hasattr(action, "choices") and isinstance(action.choices, dict):
                for name, child in action.choices.items():
                    assert f"## {prefix} {name}\n" in page, f"{prefix} {name} has no section"
                    walk(f"{prefix} {name}", child)

    walk("offhours", parser())


def test_the_gate_config_reference_has_every_field_of_the_schema() -> None:
    page = reference_hook().gate_config_page()
    schema = json.loads((REPO / "schemas" / "gate-config.schema.json").read_text())

    def keys(node: object) -> set[str]:
        found: set[str] = set()
        if isinstance(node, dict):
            found |= set(node.get("properties", {}))
            for child in node.values():
                found |= keys(child)
        elif isinstance(node, list):
            for child in node:
                found |= keys(child)
        return found

    rows = re.findall(r"^\| `([^`]+)` \|", page, flags=re.M)
    last = {row.rsplit(".", 1)[-1] for row in rows}
    assert keys(schema) <= last, f"schema fields missing from the reference: {keys(schema) - last}"


def test_the_names_reference_has_every_metric_and_event_reason() -> None:
    from offhours.scripts import names

    page = reference_hook().names_page()
    source = (REPO / "scripts" / "pool" / "operator_metrics.py").read_text()
    families = set(re.findall(r'(?:page\.family|_histogram)\(\s*(?:page,\s*)?"(offhours_[a-z_]+)"', source))
    assert len(families) >= 15
    for name in families:
        assert f"| `{name}` |" in page, f"metric {name} is not in the reference"
    for reason in names.EVENT_REASONS:
        assert f"| `{reason}` |" in page, f"Event reason {reason} is not in the reference"


def test_the_templates_reference_has_every_parameter_of_every_rendered_workflow_template() -> None:
    from offhours.workflows.render import manifests

    page = reference_hook().templates_page()
    templates = [m for m in manifests().values() if m.get("kind") == "WorkflowTemplate"]
    assert {"offhours-llm-pipeline", "offhours-job"} <= {m["metadata"]["name"] for m in templates}
    for template in templates:
        for parameter in template["spec"].get("arguments", {}).get("parameters", []):
            assert f"| `{parameter['name']}` |" in page, f"{template['metadata']['name']}: {parameter['name']}"
    assert "| `run-id` | required |" in page


def test_every_docs_page_the_code_names_exists_with_the_section_it_names() -> None:
    # A message or comment that sends a person to a page (the control plane's missing CRDs) must not outlive a move.
    named = 0
    for path in [*(REPO / "scripts").rglob("*.py"), REPO / "Makefile"]:
        text = path.read_text()
        for page, section in re.findall(r"(docs/[\w/.-]+\.md)(?:, ([A-Z][\w ]+))?", text):
            named += 1
            assert (REPO / page).is_file(), f"{path.relative_to(REPO)} names {page}, which does not exist"
            if section:
                assert section in headings((REPO / page).read_text()), f"{page} has no section {section!r}"
    assert named, "the control plane's missing-CRDs message names its docs page"


def main(argv: list[str]) -> int:
    """Write tests/data/former_readme.json from a README file (run once, when the README moved)."""
    if len(argv) != 2 or argv[0] != "fingerprint":
        print(__doc__, file=sys.stderr)
        return 2
    text = Path(argv[1]).read_text()
    FORMER.write_text(json.dumps({"lines": len(text.splitlines()), "sections": fingerprints(text)}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

