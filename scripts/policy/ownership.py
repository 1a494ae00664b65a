"""What the gate took from one serving object, keyed by the object, not by today's configuration (pure: no I/O).

The gate's state record is keyed by a service's name in the current configuration: a service renamed, moved
to another scale target or removed would strand what was lowered under the old one. So every lower is also
written to the gate's ledger (the ConfigMap `offhours-lent`, one entry per object, keyed by the object's UID),
before the lower, and an entry goes only once the object has its baseline back. The entry names the object
(apiVersion/Kind/name, namespace, UID) and what is owed; whatever the configuration says now, the gate finds
every object it lowered there, and gives back exactly what was taken (`owed`).

Why a ledger and not an annotation on the object: writing an annotation needs `patch` on the object itself,
which would let the gate's account rewrite a pod template; the gate writes only `/scale` (policy.target).

The ledger is writable by whoever may edit ConfigMaps in the serving namespace, so each entry is decoded
here, once, bounded: a malformed, oversized or self-contradicting entry is refused with one reason, and a
valid one never makes the gate raise past the baseline it records.
"""

import json
from dataclasses import dataclass
from typing import Any

LEDGER_VERSION = 1
MAX_ENTRY_CHARS = 1024  # an entry the gate writes is ~250 characters
MAX_OWED_REPLICAS = 10_000  # a baseline beyond this is a tampered entry, not a fleet
MAX_TEXT_CHARS = 253  # a name, a service, a kind
MAX_UID_CHARS = 64


class LedgerRefusal(ValueError):
    """An entry the gate did not write as it stands (one reason, naming the field)."""


@dataclass(frozen=True)
class Lent:
    """What the gate took from one object: its baseline is owed back.

    `applied` is the value the gate last wrote (or is writing); `applying_from` is set while a lower is in
    flight (the value it lowers from: recorded before the write, so a gate killed between the two does not
    take the unlowered value for another writer's). `service` is the service's name when it was lent: an
    entry belongs to the tick of a configured service only while that service still names this object.
    """

    namespace: str
    target: str  # `ScaleTargetRef.text`: a Deployment's bare name, or <apiVersion>/<Kind>/<name>
    uid: str
    service: str
    baseline: int
    applied: int
    applying_from: int | None = None

    def to_json(self) -> str:
        """Serialise compactly (the ledger entry's value)."""
        return json.dumps({"v": LEDGER_VERSION, "namespace": self.namespace, "target": self.target, "uid": self.uid,
                           "service": self.service, "baseline": self.baseline, "applied": self.applied,
                           **({"applyingFrom": self.applying_from} if self.applying_from is not None else {})},
                          separators=(",", ":"))


def decode(key: str, text: str | None) -> Lent:
    """Decode one ledger entry stored under `key` (the object's UID); LedgerRefusal naming what is wrong."""
    if not isinstance(text, str) or not text:
        raise LedgerRefusal(f"ledger entry {key[:MAX_UID_CHARS]!r}: empty")
    if len(text) > MAX_ENTRY_CHARS:
        raise LedgerRefusal(f"ledger entry {key[:MAX_UID_CHARS]!r}: {len(text)} characters, more than the "
                            f"{MAX_ENTRY_CHARS} any entry the gate writes has")
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError):
        raise LedgerRefusal(f"ledger entry {key[:MAX_UID_CHARS]!r}: not JSON") from None
    if not isinstance(raw, dict):
        raise LedgerRefusal(f"ledger entry {key[:MAX_UID_CHARS]!r}: not a JSON object")
    if raw.get("v") != LEDGER_VERSION:
        raise LedgerRefusal(f"ledger entry {key[:MAX_UID_CHARS]!r}: version {raw.get('v')!r}, not {LEDGER_VERSION}")
    lent = Lent(namespace=_text(raw, "namespace", MAX_TEXT_CHARS), target=_text(raw, "target", 3 * MAX_TEXT_CHARS),
                uid=_text(raw, "uid", MAX_UID_CHARS), service=_text(raw, "service", MAX_TEXT_CHARS),
                baseline=_count(raw, "baseline"), applied=_count(raw, "applied"),
                applying_from=None if raw.get("applyingFrom") is None else _count(raw, "applyingFrom"))
    if lent.uid != key:
        raise LedgerRefusal(f"ledger entry {key[:MAX_UID_CHARS]!r}: names uid {lent.uid!r}, not the key it is stored under")
    if lent.applied > lent.baseline or (lent.applying_from is not None and lent.applying_from > lent.baseline):
        raise LedgerRefusal(f"ledger entry {key!r}: applied {lent.applied} (from {lent.applying_from}) above its "
                            f"baseline {lent.baseline}: the gate records only lowers")
    return lent


def decode_ledger(data: dict[str, str] | None) -> tuple[dict[str, Lent], dict[str, str]]:
    """Decode a whole ledger: (uid -> entry, uid -> the reason an entry is refused).

    Each entry on its own: a flood of junk beside the gate's entries is refused entry by entry, never the
    ledger whole (which would leave every service's stranded lend unreturned). The work is bounded by the
    ConfigMap's size (the API server's 1 MiB) and each entry's (`MAX_ENTRY_CHARS`, checked before parsing);
    the API calls a tick makes for the ledger by `gate.release.MAX_RETURNS_PER_TICK`.
    """
    entries = data or {}
    good: dict[str, Lent] = {}
    bad: dict[str, str] = {}
    for key, text in entries.items():
        try:
            good[key] = decode(key, text)
        except LedgerRefusal as err:
            bad[key] = str(err)
    return good, bad


def owed(lent: Lent, current: int) -> int:
    """Return what the object must be raised to now (never below `current`): exactly what the gate took, back.

    The object at the value the gate applied (or at the value a lower in flight started from: it never
    landed, what was lent before it is still owed): its baseline. At any other value someone else set it
    after the gate: the gate owns only its delta, so it gives back the replicas it took on top of that value
    (as `record.own_baseline` adopts another writer's change). A lower in flight with a third value is
    ambiguous (did it land?): the larger delta, the side that leaves serving whole. Never more than the
    entry's own bound (MAX_OWED_REPLICAS). A raise the ledger did not hear of (the backstop's) would read as
    someone else's change: the caller also bounds this by the service's record, where it names the object.
    """
    if current in (lent.applied, lent.applying_from):
        return max(current, lent.baseline)
    taken = lent.baseline - (lent.applied if lent.applying_from is None else min(lent.applied, lent.applying_from))
    return max(current, min(current + taken, MAX_OWED_REPLICAS))


def _text(raw: dict[str, Any], name: str, most: int) -> str:
    value = raw.get(name)
    if not isinstance(value, str) or not 0 < len(value) <= most:
        raise LedgerRefusal(f"ledger entry: {name} is {value!r}, not a text of 1 to {most} characters")
    return value


def _count(raw: dict[str, Any], name: str) -> int:
    value = raw.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_OWED_REPLICAS:
        raise LedgerRefusal(f"ledger entry: {name} is {value!r}, not a replica count of 0 to {MAX_OWED_REPLICAS}")
    return value
