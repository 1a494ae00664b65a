"""The checkpoint store's log: what each entry says and what the next one may be (pure: no I/O).

A run's store is a log of small entries `_log/<seq>` (12 digits), each created exclusively (a
create-only put on S3, `link` on a file system): two writers can never both create entry n, and an
entry is never changed or deleted, so a number is never reused. Each entry is a whole snapshot:

    {"format": 1, "run": R, "seq": n, "epoch": e, "kind": "start" | "save", "writer": nonce,
     "versions": [{"step", "name", "size", "sha256"}, ...]}        (published versions, newest last)

The newest entry (the highest number) is the run's state. A `start` entry is taken by each start of
the run (a resubmit, a retry, a resumed copy): its epoch is one more than the entry before it. A
`save` entry is valid only from the writer whose epoch the newest entry carries; that writer builds
entry n+1 from entry n, so a stale writer's attempt either finds a newer epoch (refused) or loses the
exclusive create of n+1 (and looks again). Checkpoint bytes live in `_data/<name>` objects named
uniquely per save, written before the entry that publishes them and deleted only after an entry that
no longer lists them is published.
"""

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

FORMAT = 1
LOG, DATA = "_log", "_data"
SEQ_DIGITS = 12
MAX_SEQ = 10**SEQ_DIGITS - 1
LOG_NAME = re.compile(r"^([0-9]{12})\Z", re.ASCII)
# <step, 15 digits>-<epoch, 12 digits>-<16 hex>: unique per save, and says which epoch wrote it.
DATA_NAME = re.compile(r"^([0-9]{15})-([0-9]{12})-([0-9a-f]{16})\Z", re.ASCII)


class LogError(ValueError):
    """A log entry that is not one this store writes (foreign, tampered with, or another run's)."""


@dataclass(frozen=True)
class Version:
    """One published checkpoint: its step, the data object holding it, and what that object must be."""

    step: int
    name: str
    size: int
    sha256: str

    def vouches_for(self, data: bytes) -> bool:
        """Whether `data` is exactly the bytes this version published."""
        return len(data) == self.size and hashlib.sha256(data).hexdigest() == self.sha256


@dataclass(frozen=True)
class Entry:
    """One log entry: the run's state after a start or a save."""

    run: str
    seq: int
    epoch: int
    kind: str
    writer: str
    versions: tuple[Version, ...]

    def encode(self) -> bytes:
        """Return the entry as the JSON the log holds."""
        return json.dumps({"format": FORMAT, "run": self.run, "seq": self.seq, "epoch": self.epoch,
                           "kind": self.kind, "writer": self.writer,
                           "versions": [v.__dict__ for v in self.versions]}, sort_keys=True).encode()


def log_name(seq: int) -> str:
    """Return the name of log entry `seq`."""
    return f"{LOG}/{seq:0{SEQ_DIGITS}d}"


def data_name(step: int, epoch: int, nonce: str) -> str:
    """Return the unique name of one save's data object."""
    return f"{step:015d}-{epoch:012d}-{nonce}"


def _int(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _version(raw: Any) -> Version:
    if not isinstance(raw, dict) or set(raw) != {"step", "name", "size", "sha256"}:
        raise LogError("a version is not an object of step, name, size and sha256")
    if not _int(raw["step"], 0, 10**15 - 1) or not _int(raw["size"], 0, 1 << 62):
        raise LogError("a version's step or size is not a whole number in range")
    if not isinstance(raw["name"], str) or not DATA_NAME.match(raw["name"]):
        raise LogError(f"a version names a data object the store does not write ({str(raw['name'])[:80]!r})")
    if not isinstance(raw["sha256"], str) or not re.fullmatch(r"[0-9a-f]{64}", raw["sha256"]):
        raise LogError("a version's sha256 is not 64 hex digits")
    return Version(raw["step"], raw["name"], raw["size"], raw["sha256"])


def decode(text: bytes, seq: int, run: str) -> Entry:
    """Read entry `seq` of run `run`'s log; raise LogError naming what is wrong (including another run's entry)."""
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError):
        raise LogError(f"entry {seq} is not JSON") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise LogError(f"entry {seq} is not a format-{FORMAT} log entry")
    if raw.get("run") != run:
        shown = str(raw.get("run"))[:60]
        raise LogError(f"entry {seq} belongs to run {shown!r}, not to run {run!r}: a run never reads another's")
    if raw.get("seq") != seq:
        raise LogError(f"entry {seq} says it is entry {str(raw.get('seq'))[:20]} (copied or renamed)")
    if not _int(raw.get("epoch"), 1, MAX_SEQ) or raw.get("kind") not in ("start", "save") \
            or not isinstance(raw.get("writer"), str) or not isinstance(raw.get("versions"), list):
        raise LogError(f"entry {seq} lacks a valid epoch, kind, writer or versions")
    return Entry(run, seq, raw["epoch"], raw["kind"], raw["writer"], tuple(_version(v) for v in raw["versions"]))


def start_after(head: Entry | None, run: str, writer: str) -> Entry:
    """Return the entry a new start of the run appends after `head`: the next epoch, the same published versions."""
    if head is None:
        return Entry(run, 1, 1, "start", writer, ())
    return Entry(run, head.seq + 1, head.epoch + 1, "start", writer, head.versions)


class StaleEpoch(Exception):
    """A newer start of the run took the store: this writer's epoch is over."""

    def __init__(self, mine: int, current: int) -> None:
        super().__init__(f"epoch {mine} is stale: a newer start of this run holds epoch {current}")
        self.mine, self.current = mine, current


def save_after(head: Entry, epoch: int, writer: str, version: Version, keep: int) -> Entry:
    """Return the entry publishing `version` after `head`, keeping the `keep` newest versions; StaleEpoch if fenced off."""
    if head.epoch != epoch:
        raise StaleEpoch(epoch, head.epoch)
    return Entry(head.run, head.seq + 1, epoch, "save", writer, (*head.versions, version)[-keep:])


def collectable(names: list[str], published: Entry, epoch: int) -> list[str]:
    """Return the data objects a writer of `epoch` may delete once `published` is durable.

    Only objects of this epoch or older that `published` no longer lists: a later entry lists only
    what `published` lists or objects written after it by a newer epoch, so none of these is ever
    read again. A newer epoch's objects (perhaps about to be published) are never touched.
    """
    kept = {v.name for v in published.versions}
    out = []
    for name in names:
        match = DATA_NAME.match(name)
        if match and int(match.group(2)) <= epoch and name not in kept:
            out.append(name)
    return out
