"""YAML read within bounds: nesting, alias expansion ("billion laughs") and duplicate keys refused.

PyYAML's safe loader keeps the last of two equal keys (a service written twice silently loses its
first half), expands aliases into as many nodes as they name (a few hundred bytes can stand for
10^9 nodes that a schema check or a walk then visits), and recurses once per level of nesting. Here
the composed graph is measured before anything is constructed, and a duplicate key is an error
naming the key and both lines.

Speed: where PyYAML has libyaml, its C parser scans and parses (the bulk of the time on a large file) and the
composer above it stays Python, so the bounds and the duplicate-key refusal are the same code on either. The
C parser keeps its states on a heap stack, not C recursion: nesting reaches the bounded composer, never a crash.
"""

from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

try:
    from yaml._yaml import CParser as _CParser

    CParser: type[_CParser] | None = _CParser
except ImportError:  # PyYAML built without libyaml: the pure-Python parser, the same bounds
    CParser = None

from offhours.scripts.inputs.errors import InputError
from offhours.scripts.inputs.limits import MAX_DEPTH, YAML_MAX_ALIAS_NODES
from offhours.scripts.inputs.text import read_text

_MERGE = "tag:yaml.org,2002:merge"
NESTED_TOO_DEEPLY = "is nested too deeply to parse"


class _Bounds:
    """What every loader here does on top of a parser: at most MAX_DEPTH levels, aliases bounded, no duplicate keys.

    Placed before `Composer` and `SafeConstructor` in a loader's bases, so its methods wrap theirs.
    """

    source: str
    depth: int
    written: int

    def _bounded(self, source: str) -> None:
        self.source = source
        self.depth = 0
        self.written = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise InputError(self.source, NESTED_TOO_DEEPLY)
        try:
            if not self.check_event(yaml.AliasEvent):  # type: ignore[attr-defined]
                self.written += 1
            return super().compose_node(parent, index)  # type: ignore[misc]
        finally:
            self.depth -= 1

    def compose_document(self) -> Any:
        node = super().compose_document()  # type: ignore[misc]
        if node is not None:
            _check_expansion(node, self.written, self.source)
        self.written = 0
        return node

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            merge_line = 0
            for key_node, _ in node.value:
                if key_node.tag == _MERGE:
                    # `<<` twice is last-wins like any duplicate (one list `<<: [*a, *b]` merges several)
                    line = key_node.start_mark.line + 1
                    if merge_line:
                        raise InputError(self.source, f"has the merge key '<<' twice: line {merge_line} and line "
                                                      f"{line} (a duplicate is refused, never read as the last one)")
                    merge_line = line
                    continue
                if not isinstance(key_node, yaml.ScalarNode):
                    continue  # a merge's keys may be overridden (YAML's rule); other keys are checked where built
                key = self.construct_object(key_node)  # type: ignore[attr-defined]
                line = key_node.start_mark.line + 1
                if key in seen:
                    raise InputError(self.source, f"has the key {key!r} twice: line {seen[key]} and line {line} "
                                                  "(a duplicate is refused, never read as the last one)")
                seen[key] = line
        return super().construct_mapping(node, deep=deep)  # type: ignore[misc]


class _PythonLoader(_Bounds, yaml.SafeLoader):
    """PyYAML's pure-Python safe loader, bounded."""

    def __init__(self, text: str, source: str) -> None:
        yaml.SafeLoader.__init__(self, text)
        self._bounded(source)


class _CParsedLoader(_Bounds, Composer, SafeConstructor, Resolver):
    """libyaml's parser (C) under the bounded Python composer and the safe constructor.

    The C safe loader's speed where it is spent, with the same bounds (CSafeLoader's own composer is C, where no
    bound can be added).
    """

    def __init__(self, text: str, source: str) -> None:
        assert CParser is not None
        self._parser = CParser(text)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self._bounded(source)

    def check_event(self, *choices: Any) -> bool:
        return bool(self._parser.check_event(*choices))

    def peek_event(self) -> Any:
        return self._parser.peek_event()

    def get_event(self) -> Any:
        return self._parser.get_event()

    def dispose(self) -> None:
        self._parser.dispose()


def _loader(text: str, source: str) -> Any:
    """Return the bounded loader for `text`: libyaml's parser where PyYAML has it, else the pure-Python one."""
    return _CParsedLoader(text, source) if CParser is not None else _PythonLoader(text, source)


def _children(node: Any) -> list[Any]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _check_expansion(root: Any, written: int, source: str) -> None:
    """Refuse a graph whose aliases expand past the bound, nest past MAX_DEPTH, or contain themselves."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:  # post-order, without recursion: an aliased graph can be deeper than Python's stack
        node, done = stack.pop()
        key = id(node)
        if done:
            kids = _children(node)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            depth[key] = 1 + max((depth[id(k)] for k in kids), default=0)
            open_nodes.discard(key)
            if size[key] > written + YAML_MAX_ALIAS_NODES:
                raise InputError(source, f"has aliases that expand it past {written + YAML_MAX_ALIAS_NODES:,} nodes")
            if depth[key] > MAX_DEPTH:
                raise InputError(source, NESTED_TOO_DEEPLY)
            continue
        if key in size:
            continue
        if key in open_nodes:
            raise InputError(source, "has an alias inside its own anchor (a recursive document)")
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((kid, False) for kid in _children(node) if id(kid) not in size)


def _invalid(source: str, err: Exception) -> InputError:
    if isinstance(err, RecursionError):
        return InputError(source, NESTED_TOO_DEEPLY)
    first = str(err).splitlines()[0] if str(err) else type(err).__name__
    return InputError(source, f"is not valid YAML: {first}")


def load_yaml_all(text: str, source: str) -> list[Any]:
    """Return every document of `text`; InputError naming `source` and what is wrong."""
    loader = None
    try:
        loader = _loader(text, source)  # either parser refuses control characters
        docs = []
        while loader.check_node():
            docs.append(loader.construct_document(loader.get_node()))
        return docs
    except InputError:
        raise
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as err:  # ValueError: an int past 4,300 digits
        raise _invalid(source, err) from None
    finally:
        if loader is not None:
            loader.dispose()


def load_yaml(text: str, source: str) -> Any:
    """Return the one document of `text` (None for an empty one); more than one is refused."""
    docs = load_yaml_all(text, source)
    if len(docs) > 1:
        raise InputError(source, f"is not valid YAML: it holds {len(docs)} documents, not one")
    return docs[0] if docs else None


def read_yaml(path: str, limit_bytes: int, allow_empty: bool = False) -> Any:
    """Read a YAML file of one document within its size bound (`text.read_text`, then `load_yaml`)."""
    return load_yaml(read_text(path, limit_bytes, allow_empty), str(path))


def read_patch(text: str) -> Any:
    """Parse a podSpecPatch as Argo does (JSON, else YAML), within this module's bounds; raises on anything else."""
    return load_yaml(text, "podSpecPatch")
