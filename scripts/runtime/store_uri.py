"""Where a checkpoint store lives: the one reader of checkpoint URIs, for the store and the parameter check.

A checkpoint URI is `file:///absolute/path` or `s3://bucket[/key/prefix]`, written literally: the
store writes exactly where it says. Anything a reader could take two ways is refused instead of
guessed: a query or fragment (`?`, `#`), escapes (`%`), empty, `.` or `..` segments, a trailing
`/`, a host on `file://`, a bucket S3 would refuse, control or invisible characters, text that is
not in Unicode NFC form (two spellings of one name), and a segment named like a checkpoint folder
(`step-` and 12 digits or more), so no store can live inside another's checkpoint.
"""

import re
import unicodedata
from dataclasses import dataclass

SCHEMES = ("file", "s3")
# The folder name of a checkpoint as the store writes it (12 digits or more): `step-1` is a plain name.
STEP_FOLDER = re.compile(r"^step-([0-9]{12,})\Z", re.ASCII)
_BUCKET = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?\Z", re.ASCII)
_IPV4 = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+\Z", re.ASCII)
_RESERVED = {"?": "a query", "#": "a fragment", "%": "an escape", "\\": "a backslash"}
MAX_SEGMENT_BYTES = 255  # NAME_MAX of Linux file systems
# S3 keys stop at 1024 bytes; the store adds at most /step-<digits>/COMPLETE and temporary names.
MAX_PREFIX_BYTES = 960


class StoreURIError(ValueError):
    """A checkpoint URI the store cannot write exactly where it says; the message says why."""


@dataclass(frozen=True)
class StoreLocation:
    """A parsed checkpoint URI: scheme, bucket (S3 only) and path segments."""

    scheme: str
    bucket: str
    segments: tuple[str, ...]

    @property
    def uri(self) -> str:
        """The canonical spelling (what two equal locations share)."""
        path = "".join("/" + s for s in self.segments)
        return f"s3://{self.bucket}{path}" if self.scheme == "s3" else f"file://{path or '/'}"

    @property
    def key_prefix(self) -> str:
        """The S3 key prefix (no leading or trailing '/'); empty at the bucket's root."""
        return "/".join(self.segments)

    @property
    def path(self) -> str:
        """The file system path of a file:// location."""
        return "/" + "/".join(self.segments)

    def child(self, *names: str) -> "StoreLocation":
        """Return the location `names` below this one (names are checked like any segment)."""
        return parse_store_uri(self.uri.rstrip("/") + "".join("/" + n for n in names))

    def is_within(self, other: "StoreLocation") -> bool:
        """Whether this location is `other` or below it, segment by segment (`a-1` is not within `a`)."""
        return ((self.scheme, self.bucket) == (other.scheme, other.bucket)
                and self.segments[:len(other.segments)] == other.segments)


def _characters(uri: str) -> None:
    for i, ch in enumerate(uri):
        if ch in _RESERVED:
            raise StoreURIError(f"contains {ch!r} ({_RESERVED[ch]}) at character {i}: checkpoint URIs are written "
                                "literally, never decoded")
        if ch.isspace() or unicodedata.category(ch).startswith("C"):
            raise StoreURIError(f"contains a blank, control or invisible character (U+{ord(ch):04X}) at character {i}")
    if not unicodedata.is_normalized("NFC", uri):
        raise StoreURIError("is not in Unicode NFC form: the same name could be spelled two ways")


def _segments(path: str) -> tuple[str, ...]:
    if path in ("", "/"):
        if path == "/":
            raise StoreURIError("ends with '/': name the folder without it")
        return ()
    if path.endswith("/"):
        raise StoreURIError("ends with '/': name the folder without it (steps append /<run-id>/<step>)")
    segments = tuple(path[1:].split("/"))
    for segment in segments:
        if segment == "":
            raise StoreURIError("has an empty path segment ('//')")
        if segment in (".", ".."):
            raise StoreURIError(f"has a {segment!r} segment: name the folder itself")
        if len(segment.encode()) > MAX_SEGMENT_BYTES:
            raise StoreURIError(f"has a path segment longer than {MAX_SEGMENT_BYTES} bytes")
        if STEP_FOLDER.match(segment):
            raise StoreURIError(f"has a segment {segment!r} named like a checkpoint folder (step- and 12 digits)")
    if len("/".join(segments).encode()) > MAX_PREFIX_BYTES:
        raise StoreURIError(f"is longer than {MAX_PREFIX_BYTES} bytes of path")
    return segments


def parse_store_uri(uri: str) -> StoreLocation:
    """Parse a checkpoint URI; raise StoreURIError (the reason, without the URI) for one the store cannot write."""
    if not isinstance(uri, str) or "://" not in uri:
        raise StoreURIError("must be a file:// or s3:// URI")
    scheme, rest = uri.split("://", 1)
    if scheme not in SCHEMES:
        raise StoreURIError(f"must be file:// or s3://: checkpoints are written only there (got {scheme or 'no scheme'}://)")
    _characters(uri)
    host, slash, path = rest.partition("/")
    path = slash + path
    if scheme == "file":
        if host not in ("", "localhost"):
            raise StoreURIError(f"names a host ({host!r}) on file://: write file:///{rest} for the path /{rest}")
        segments = _segments(path)
        if not segments:
            raise StoreURIError("names the file system's root: name a folder")
        return StoreLocation("file", "", segments)
    if not host:
        raise StoreURIError("needs a bucket: s3://<bucket>/<path>")
    if not _BUCKET.match(host) or ".." in host or ".-" in host or "-." in host or _IPV4.match(host):
        raise StoreURIError(f"names a bucket S3 would refuse ({host!r}: at most 63 characters of a-z, 0-9, '.' and '-')")
    return StoreLocation("s3", host, _segments(path))


def store_uri_problem(uri: str) -> str | None:
    """Return why the store cannot write `uri`, or None."""
    try:
        parse_store_uri(uri)
    except StoreURIError as err:
        return str(err)
    return None
