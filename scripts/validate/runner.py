"""Load manifests from files and folders and run the schema check and the lint on each document."""

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from offhours.scripts.inputs.errors import InputError
from offhours.scripts.inputs.limits import MANIFEST_BYTES
from offhours.scripts.inputs.text import read_text
from offhours.scripts.inputs.yamldoc import load_yaml_all, read_patch
from offhours.scripts.policy.boundary import boundary_problems
from offhours.scripts.policy.config import ResearchBoundary
from offhours.scripts.validate.crd import schema_problems
from offhours.scripts.validate.lint import build_catalog, lint_problems
from offhours.scripts.validate.problems import Problem

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
MANIFEST_LIMIT_BYTES = MANIFEST_BYTES

Document = tuple[str, int, dict[str, Any]]


def _files(paths: Iterable[str | Path]) -> list[Path]:
    files: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*") if p.suffix in MANIFEST_SUFFIXES and p.is_file()))
        else:
            files.append(path)
    return files


def load_documents(paths: Iterable[str | Path]) -> tuple[list[Document], list[Problem]]:
    """Read every YAML document under `paths`; unreadable files and non-mapping documents are problems."""
    docs: list[Document] = []
    problems: list[Problem] = []
    paths = list(paths)
    explicit = {Path(p) for p in paths if not Path(p).is_dir()}  # named by the person, not found in a folder
    for folder in (Path(p) for p in paths if Path(p).is_dir()):
        if not _files([folder]):
            problems.append(Problem(str(folder), 0, ".", f"the folder holds no manifest ({', '.join(MANIFEST_SUFFIXES)})",
                                    unreadable=True))
    for file in _files(paths):
        name = str(file)
        try:
            text = read_text(file, MANIFEST_LIMIT_BYTES, allow_empty=True)
        except OSError as err:
            problems.append(Problem(name, 0, ".", f"cannot read: {err.strerror}", unreadable=True))
            continue
        except InputError as err:
            problems.append(Problem(name, 0, ".", f"the file {err.problem}", unreadable=True))
            continue
        try:
            loaded = load_yaml_all(text, name)
        except InputError as err:
            problems.append(Problem(name, 0, ".", err.problem.removeprefix("is ")))
            continue
        if not any(doc is not None for doc in loaded) and file in explicit:
            problems.append(Problem(name, 0, ".", "the file is empty: it holds no manifest", unreadable=True))
        for index, doc in enumerate(loaded):
            if doc is None:
                continue
            if not isinstance(doc, dict):
                problems.append(Problem(name, index, ".", "a manifest must be a mapping"))
                continue
            docs.append((name, index, doc))
    return docs, problems


def library_documents() -> list[dict[str, Any]]:
    """Return the manifests the library itself renders (templateRef targets are found among them too)."""
    from offhours.workflows.render import manifests

    return list(manifests().values())


def validate_documents(docs: Sequence[Document], include_library: bool = True,
                       boundary: ResearchBoundary | None = None) -> list[Problem]:
    """Check documents against the CRD schemas, the lint and the tenant boundary; return the problems found.

    `boundary`: what the installed gate configuration allows research pods (default: the bundled defaults).
    """
    catalog = build_catalog([*(library_documents() if include_library else []), *(d for _, _, d in docs)])
    problems: list[Problem] = []
    for file, index, doc in docs:
        problems += schema_problems(doc, file, index)
        problems += lint_problems(doc, file, index, catalog)
        # What the admission policies would refuse in the research namespace, said before it is submitted.
        problems += [Problem(file, index, path, message)
                     for path, message in boundary_problems(doc, boundary or ResearchBoundary(), read_patch)]
    return problems


def validate_paths(paths: Iterable[str | Path]) -> list[Problem]:
    """Validate every manifest under `paths`."""
    docs, problems = load_documents(paths)
    return problems + validate_documents(docs)
