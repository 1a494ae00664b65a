"""A run's provenance: what it ran with, recorded once, read back only as that run's (pure: no I/O).

One record per run: every workflow parameter (defaults included), the URIs and image references among
them, the WorkflowTemplate's name and resourceVersion, offhours' version, and the image digests the
kubelet reported for the run's pods (`status.containerStatuses[].imageID`) where it reported them.
`offhours submit` writes it on the workflow (annotation `offhours.io/provenance`); the gate's parked copy
carries it and runs every image by the digest its first run reported (`pinned_arguments`); `offhours
rerun` submits a new run from it.

The class this closes: a resumed copy that runs other code than its first run (a mutable tag moved
between the stop and the resume). The mechanism: a copy's image arguments are rewritten to
`name@sha256:...`, from the first digest ever recorded for the run (never a later one), so what a copy
pulls is fixed by the first run, whatever a tag points to since.

A record is read by `decode`, which refuses in one `ProvenanceError` a record that is oversized,
not JSON, not of this format, or another run's: a run never reads another run's provenance.
"""

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from offhours.scripts.policy.image_refs import by_digest, is_image_parameter, mutable_tag_warning

__all__ = ["MAX_BYTES", "Provenance", "ProvenanceError", "build", "by_digest", "decode", "describe", "encode",
           "is_image_parameter", "mutable_tag_warning", "pin", "pinned_arguments", "reported_digest"]

FORMAT = 1
MAX_BYTES = 16 * 1024
"""A record's bound: an annotation of the workflow (the API server allows 256 KiB for all of them together)."""
URI_KINDS = frozenset({"uri", "optional-uri", "checkpoint-uri"})
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}\Z", re.ASCII)
_REPORTED_DIGEST = re.compile(r"@(sha256:[0-9a-f]{64})\Z", re.ASCII)
_MAX_VALUES = 256
# The WorkflowTemplate a rerun reads by this name (a DNS-1123 subdomain): '' would list them all, '/' reach another path.
_OBJECT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z", re.ASCII)
_UNPINNED = (" (warning: a mutable tag, no digest reported yet: a resumed copy may pull other code; give the image "
             "by digest)")


class ProvenanceError(ValueError):
    """A provenance record that cannot be used (oversized, malformed, another run's); names what is wrong."""


@dataclass(frozen=True)
class Provenance:
    """What one run ran with: see the module's docstring. `digests`: image reference -> `sha256:<hex>`."""

    run: str
    template: str
    template_version: str
    offhours: str
    parameters: Mapping[str, str]
    images: tuple[str, ...] = ()  # the names of the parameters that are image references
    uris: tuple[str, ...] = ()  # the names of the parameters that are URIs
    digests: Mapping[str, str] = field(default_factory=dict)

    def with_digests(self, reported: Mapping[str, str]) -> "Provenance":
        """Return this record with the digests `reported` for its images added; a digest already recorded stays."""
        refs = {self.parameters[p] for p in self.images if p in self.parameters}
        added = {ref: d for ref, d in reported.items() if ref in refs and DIGEST.fullmatch(d)}
        return Provenance(self.run, self.template, self.template_version, self.offhours, self.parameters,
                          self.images, self.uris, {**added, **self.digests})

    def pinned_parameters(self) -> dict[str, str]:
        """Every parameter, each image reference pinned to its recorded digest where one is known."""
        return {k: (pin(v, self.digests[v]) if k in self.images and v in self.digests else v)
                for k, v in self.parameters.items()}


def reported_digest(image_id: str) -> str | None:
    """Return the repository digest in a kubelet's `imageID` (e.g. docker.io/x@sha256:...), else None.

    A bare `sha256:...` is the node's local image id, not a digest any registry serves: not used.
    """
    found = _REPORTED_DIGEST.search(image_id or "")
    return found.group(1) if found else None


def pin(ref: str, digest: str) -> str:
    """Return `ref` by `digest` (`name@sha256:...`; its tag dropped); a reference already by digest is kept."""
    if by_digest(ref) or not DIGEST.fullmatch(digest):
        return ref
    slash = ref.rfind("/")
    colon = ref.rfind(":")
    name = ref[:colon] if colon > slash else ref
    return f"{name}@{digest}"


def build(run: str, template: Mapping[str, Any], values: Mapping[str, str], kinds: Mapping[str, str],
          version: str) -> Provenance:
    """Return the record of a run about to be submitted: `values` are every parameter's (defaults included)."""
    meta = template.get("metadata") or {}
    return Provenance(
        run=run, template=str(meta.get("name") or ""), template_version=str(meta.get("resourceVersion") or ""),
        offhours=version, parameters=dict(values),
        images=tuple(sorted(k for k in values if is_image_parameter(k, kinds.get(k)))),
        uris=tuple(sorted(k for k in values if kinds.get(k) in URI_KINDS)))


def encode(record: Provenance) -> str:
    """Return the record as compact JSON, keys sorted; a record over MAX_BYTES is refused (`ProvenanceError`)."""
    text = json.dumps({"format": FORMAT, "run": record.run,
                       "template": {"name": record.template, "resourceVersion": record.template_version},
                       "offhours": record.offhours, "parameters": dict(record.parameters),
                       "images": list(record.images), "uris": list(record.uris), "digests": dict(record.digests)},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    if len(text.encode()) > MAX_BYTES:
        raise ProvenanceError(f"the provenance of run {record.run} is {len(text.encode())} bytes, over the "
                              f"{MAX_BYTES} an annotation of it may hold: shorten the longest parameter values")
    return text


def decode(text: str, run: str) -> Provenance:
    """Read the record of run `run`; one `ProvenanceError` naming what is wrong if it cannot be that."""
    if not isinstance(text, str) or not text:
        raise ProvenanceError(f"run {run} has no provenance record")
    if len(text.encode(errors="replace")) > MAX_BYTES:
        raise ProvenanceError(f"the provenance record of run {run} is over {MAX_BYTES} bytes: not read")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as err:  # nesting past the parser's depth is a malformed record too
        raise ProvenanceError(f"the provenance record of run {run} is not JSON ({str(err)[:100]})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ProvenanceError(f"the provenance record of run {run} is not one of format {FORMAT}")
    if doc.get("run") != run:
        raise ProvenanceError(f"the provenance record on run {run} is the record of run {json.dumps(doc.get('run'))[:60]}: "
                              "a run never reads another run's provenance")
    tmpl, params, digests = doc.get("template"), doc.get("parameters"), doc.get("digests")
    images, uris = doc.get("images"), doc.get("uris")
    problems = [what for what, ok in (
        ("template", isinstance(tmpl, dict) and all(isinstance(tmpl.get(k), str) for k in ("name", "resourceVersion"))
         and _OBJECT_NAME.fullmatch(tmpl["name"]) is not None and len(tmpl["name"]) <= 253),
        ("offhours", isinstance(doc.get("offhours"), str)),
        ("parameters", _str_map(params)),
        ("digests", _str_map(digests) and all(DIGEST.fullmatch(v) for v in dict(digests or {}).values())),
        ("images", _names_of(images, params)),
        ("uris", _names_of(uris, params))) if not ok]
    if problems:
        raise ProvenanceError(f"the provenance record of run {run} has a malformed {', '.join(problems)}")
    assert isinstance(tmpl, dict) and isinstance(params, dict) and isinstance(digests, dict)
    assert isinstance(images, list) and isinstance(uris, list)
    return Provenance(run, tmpl["name"], tmpl["resourceVersion"], doc["offhours"], dict(params), tuple(images),
                      tuple(uris), dict(digests))


def _str_map(value: Any) -> bool:
    return (isinstance(value, dict) and len(value) <= _MAX_VALUES
            and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()))


def _names_of(value: Any, params: Any) -> bool:
    return isinstance(value, list) and isinstance(params, dict) and all(isinstance(v, str) and v in params for v in value)


def pinned_arguments(arguments: list[Any], record: Provenance | None, reported: Mapping[str, str]) -> list[Any]:
    """Return a copy's `spec.arguments.parameters`: each image argument by the digest its first run reported.

    `reported`: image reference -> digest, as the run's pods reported them now. The record's digests (the
    first run's) win over these. Without a record, an argument whose value is exactly an image a pod reported
    is pinned to that report. With one, its image parameters left to the template's default are added pinned.
    """
    digests = {**{k: v for k, v in reported.items() if DIGEST.fullmatch(v)}, **(record.digests if record else {})}
    images = set(record.images) if record else None
    out: list[Any] = []
    seen: set[str] = set()
    for arg in arguments:
        if isinstance(arg, dict) and isinstance(arg.get("name"), str) and isinstance(arg.get("value"), str):
            seen.add(arg["name"])
            if (images is None or arg["name"] in images) and arg["value"] in digests:
                arg = {**arg, "value": pin(arg["value"], digests[arg["value"]])}
        out.append(arg)
    for name in sorted((images or set()) - seen):
        ref = record.parameters.get(name) if record else None
        if ref and ref in digests:
            out.append({"name": name, "value": pin(ref, digests[ref])})
    return out


def describe(run: str, texts: Sequence[str | None]) -> list[str]:
    """Return the provenance of `run` in lines, from its workflows' records (`texts`, oldest first).

    The newest record that is this run's is shown (a copy's carries the digests reported since); one that is
    not (oversized, malformed, another run's) is named as unreadable, never shown.
    """
    problem = None
    for text in reversed(texts):
        if text is None:
            continue
        try:
            record = decode(text, run)
        except ProvenanceError as err:
            problem = problem or str(err)
            continue
        lines = [f"provenance: template {record.template} at resourceVersion {record.template_version or '?'}, "
                 f"offhours {record.offhours}"]
        for name in record.images:
            ref = record.parameters.get(name, "")
            ran = pin(ref, record.digests[ref]) if ref in record.digests else None
            if ran and ran != ref:
                lines.append(f"  {name}: {ref} (runs as {ran})")
            else:
                lines.append(f"  {name}: {ref}" + ("" if by_digest(ref) else _UNPINNED))
        lines += [f"  {name}: {record.parameters[name]}" for name in record.uris if record.parameters.get(name)]
        lines.append(f"  rerun with the same parameters and images: offhours rerun {run}")
        return lines
    return [f"provenance: unreadable ({problem})" if problem else "provenance: none recorded"]
