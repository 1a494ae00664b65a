"""Check workflow parameter values against their kinds, before anything runs on a GPU.

One checker serves both paths into a research workflow: `offhours submit` checks the values
before it creates the workflow, and the `check-parameters` step (the first step of every
composed pipeline, for `argo submit --from`) checks them in the cluster and fails the workflow
at once. A kind names what a value must be; every problem is one line naming the parameter.
"""

import json
import re
from collections.abc import Callable, Collection, Mapping

from offhours.scripts.runtime.store_uri import parse_store_uri, store_uri_problem

_INT = re.compile(r"^[0-9]{1,9}\Z")
# A Kubernetes quantity without a sign: decimal number, then a binary or decimal SI suffix or an exponent.
_QUANTITY = re.compile(r"^([0-9]+(\.[0-9]*)?|\.[0-9]+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?\Z")
_URI = re.compile(r"^(s3|gs|file)://[^\s]+\Z")
# A container image reference: [registry[:port]/]path[:tag][@digest], lower-case path components.
_IMAGE = re.compile(r"^[a-z0-9]+([._-][a-z0-9]+)*(\.[a-z0-9-]+)*(:[0-9]{1,5})?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*"
                    r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?\Z")


def _integer(value: str) -> str | None:
    return None if _INT.match(value) else "must be a whole number >= 0"


def _positive_integer(value: str) -> str | None:
    return None if _INT.match(value) and int(value) >= 1 else "must be a whole number >= 1"


def _quantity(value: str) -> str | None:
    return None if _QUANTITY.match(value) else "must be a Kubernetes quantity such as 8, 500m or 64Gi"


def _json(value: str, want: type) -> tuple[object, str | None]:
    try:
        decoded = json.loads(value)
    except json.JSONDecodeError as err:
        return None, f"is not valid JSON ({err.msg} at character {err.pos})"
    except RecursionError:  # a value is a tenant's: its depth is theirs too, and no kind nests that far
        return None, "is JSON nested too deeply"
    if not isinstance(decoded, want):
        return None, f"must be a JSON {'list' if want is list else 'object'}, not {type(decoded).__name__}"
    return decoded, None


def _string_list(value: str) -> str | None:
    decoded, problem = _json(value, list)
    if problem:
        return problem
    assert isinstance(decoded, list)
    bad = [i for i, item in enumerate(decoded) if not isinstance(item, str)]
    return f"must be a JSON list of strings (item {bad[0]} is not a string)" if bad else None


def _command(value: str) -> str | None:
    problem = _string_list(value)
    return problem or (None if json.loads(value) else "must name a program: the JSON list is empty")


def _string_map(value: str) -> str | None:
    decoded, problem = _json(value, dict)
    if problem:
        return problem
    assert isinstance(decoded, dict)
    bad = [k for k, v in decoded.items() if not isinstance(v, str)]
    return f"must be a JSON object of strings (the value of {bad[0]!r} is not a string)" if bad else None


# What every research step sets itself from its parameters: the `env` parameter may not shadow it.
STEP_ENVIRONMENT = {
    "OFFHOURS_STAGE": "the step's kind", "OFFHOURS_RUN_ID": "run-id", "OFFHOURS_INPUT_URI": "input-uri",
    "OFFHOURS_OUTPUT_URI": "output-uri", "OFFHOURS_CHECKPOINT_URI": "checkpoint-uri", "OFFHOURS_SUITE": "suite",
}


def _environment(value: str) -> str | None:
    problem = _string_map(value)
    if problem:
        return problem
    for name, text in json.loads(value).items():
        if name == "" or "=" in name or "\0" in name:
            return f"must name variables without '=' or NUL ({name!r} is not a variable name)"
        if "\0" in text:
            return f"must not hold a NUL character (the value of {name!r} does)"
        if name in STEP_ENVIRONMENT:
            return f"must not set {name}: the step sets it from {STEP_ENVIRONMENT[name]}"
    return None


def _object_list(value: str) -> str | None:
    decoded, problem = _json(value, list)
    if problem:
        return problem
    assert isinstance(decoded, list)
    bad = [i for i, item in enumerate(decoded) if not isinstance(item, dict)]
    return f"must be a JSON list of objects (item {bad[0]} is not an object)" if bad else None


def _uri(value: str) -> str | None:
    return None if _URI.match(value) else "must be an s3://, gs:// or file:// URI"


def _checkpoint_uri(value: str) -> str | None:
    # Exactly what the checkpoint store writes (offhours.scripts.runtime.store_uri), nothing it would refuse.
    return store_uri_problem(value)


def _optional_uri(value: str) -> str | None:
    return None if value == "" else _uri(value)


def _boolean(value: str) -> str | None:
    return None if value in ("true", "false") else "must be true or false"


def _image(value: str) -> str | None:
    return None if len(value) <= 512 and _IMAGE.match(value) else "must be a container image reference"


def _run_id(value: str) -> str | None:
    return None if len(value) <= 50 and _DNS_LABEL.match(value) else "must be a DNS label of at most 50 characters"


def _service(value: str) -> str | None:
    return None if value and len(value) <= 63 and _LABEL_VALUE.match(value) else "must be a service name (a label value)"


def _text(value: str) -> str | None:
    return None


KINDS: dict[str, Callable[[str], str | None]] = {
    "integer": _integer,
    "positive-integer": _positive_integer,
    "quantity": _quantity,
    "command": _command,
    "string-list": _string_list,
    "string-map": _string_map,
    "object-list": _object_list,
    "uri": _uri,
    "checkpoint-uri": _checkpoint_uri,
    "env": _environment,
    "optional-uri": _optional_uri,
    "boolean": _boolean,
    "image": _image,
    "run-id": _run_id,
    "service": _service,
    "text": _text,
}
"""Each kind of parameter value and its check (None: the value is fine; else why it is not)."""


def value_problem(kind: str, value: str) -> str | None:
    """Return why `value` is not a valid `kind`, or None."""
    return KINDS[kind](value)


def check_values(schema: Mapping[str, str], values: Mapping[str, str],
                 services: Collection[str] | None = None) -> list[str]:
    """Return one line per bad value, in schema order, each naming the parameter.

    `schema` maps parameter names to kinds; a name of the schema absent from `values` is not
    checked here (the caller refuses missing required parameters). With `services` (the
    services of a gate configuration), a `service` value must be one of them.
    """
    problems = []
    for name, problem in problems_by_name(schema, values, services).items():
        value = values[name]
        shown = value if len(value) <= 80 else value[:77] + "..."
        problems.append(f"parameter {name}={shown!r} {problem}")
    return problems


def problems_by_name(schema: Mapping[str, str], values: Mapping[str, str],
                     services: Collection[str] | None = None) -> dict[str, str]:
    """Return why each bad value is bad, by parameter name, in schema order (what `check_values` words as lines).

    A form shows each problem next to its field from this; the check is the same.
    """
    problems: dict[str, str] = {}
    for name, kind in schema.items():
        if name not in values:
            continue
        value = values[name]
        problem = value_problem(kind, value)
        if problem is None and kind == "service" and services is not None and value not in services:
            known = ", ".join(sorted(services)) or "none"
            problem = f"is not a service of the gate configuration (known: {known})"
        problem = problem or _relation_problem(schema, values, name, kind)
        if problem:
            problems[name] = problem
    return problems


def _relation_problem(schema: Mapping[str, str], values: Mapping[str, str], name: str, kind: str) -> str | None:
    """Refuse a checkpoint base whose steps' locations would be ambiguous or unwritable.

    A base that names the run id as a folder: `<base>/<run-id>` would no longer say whose it is.

    Runs keep their checkpoints at `<checkpoint-uri>/<run-id>/<step>`; with the run id never a folder
    of the base, no run's folders can lie where another run's would (a base `x/a` with run `a`
    would put them where run `a` of base `x` keeps those of a step `a`).
    """
    if kind != "checkpoint-uri":
        return None
    runs = [values[n] for n, k in schema.items() if k == "run-id" and n in values and _run_id(values[n]) is None]
    segments = parse_store_uri(values[name]).segments
    clash = next((run for run in runs if run in segments), None)
    if clash is not None:
        return (f"names the run id {clash!r} as a folder: steps add /<run-id>/<step> themselves, and this one's "
                "checkpoints could be taken for another run's; leave the run id out")
    for run in runs or ["r" * 50]:
        # What the steps will write: <base>/<run-id>/<step>[/<item>] (names of up to 63 characters), and below
        # it the store's own place, /<run-id> again (the store derives it from the run id itself).
        problem = store_uri_problem(f"{values[name]}/{run}/{'s' * 63}/{'i' * 63}/{run}")
        if problem:
            return f"cannot hold the steps' checkpoints: with the run id {run!r} appended, it {problem}"
    return None


def near_misses(name: str, declared: Collection[str], cutoff: float = 0.6, tie: float = 0.05) -> list[str]:
    """Return the declared names closest to `name` (a typo's likely meaning): the closest, and any as close; [] if none.

    Closeness is difflib's ratio; a name counts as close from `cutoff`, and as one of the closest within `tie`
    of the best, so `sft-gpu` is told `sft-gpus`, not every `sft-*` parameter.
    """
    import difflib

    scored = sorted(((difflib.SequenceMatcher(None, name, d).ratio(), d) for d in declared), key=lambda x: (-x[0], x[1]))
    if not scored or scored[0][0] < cutoff:
        return []
    return [d for score, d in scored if score >= cutoff and score >= scored[0][0] - tie][:3]


def unknown_parameters(given: Collection[str], declared: Collection[str]) -> list[str]:
    """Return one line per given name the template does not declare, with the near misses it may mean."""
    lines = []
    for name in sorted(set(given) - set(declared)):
        close = near_misses(name, declared)
        hint = f" (did you mean {' or '.join(close)}?)" if close else f" (none of its {len(declared)} parameters is close)"
        shown = name if len(name) <= 80 else name[:77] + "..."
        lines.append(f"no parameter {shown}{hint}")
    return lines


class SchemaError(ValueError):
    """A parameter schema is malformed (a kind that does not exist, or not a JSON object of strings)."""


def parse_schema(text: str) -> dict[str, str]:
    """Decode a schema (JSON object: parameter name -> kind) and check every kind exists."""
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as err:
        raise SchemaError(f"parameter schema is not valid JSON: {err.msg}") from None
    except RecursionError:
        raise SchemaError("parameter schema is JSON nested too deeply") from None
    if not isinstance(schema, dict) or not all(isinstance(v, str) for v in schema.values()):
        raise SchemaError("parameter schema must be a JSON object of parameter name -> kind")
    unknown = sorted({k for k in schema.values() if k not in KINDS})
    if unknown:
        raise SchemaError(f"parameter schema names unknown kind(s): {', '.join(unknown)}")
    return schema
