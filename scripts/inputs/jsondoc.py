"""JSON read within bounds: the text's encoding, nesting and duplicate keys checked."""

import json
from typing import Any

from offhours.scripts.inputs.errors import InputError
from offhours.scripts.inputs.limits import MAX_DEPTH
from offhours.scripts.inputs.text import decode


def _refuse_duplicates(source: str):  # type: ignore[no-untyped-def]
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise InputError(source, f"has the key {key!r} twice in one object (a duplicate is refused)")
            out[key] = value
        return out
    return pairs


def _depth(value: Any) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        if deepest > MAX_DEPTH:
            break
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        stack.extend((child, level + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def load_json(data: bytes | str, source: str) -> Any:
    """Return the JSON value of `data` (bytes are checked as UTF-8 first); InputError naming what is wrong."""
    text = decode(data, source) if isinstance(data, bytes) else data
    try:
        value = json.loads(text, object_pairs_hook=_refuse_duplicates(source))
    except InputError:
        raise
    except RecursionError:
        raise InputError(source, "is nested too deeply to parse") from None
    except ValueError as err:  # JSONDecodeError, and an integer past 4,300 digits
        raise InputError(source, f"is not valid JSON: {str(err).splitlines()[0]}") from None
    if _depth(value) > MAX_DEPTH:
        raise InputError(source, "is nested too deeply to parse")
    return value
