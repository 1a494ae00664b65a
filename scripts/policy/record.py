"""The gate's memory of one service, and whose change a replica count is (pure: no I/O).

The record lives in the ConfigMap `offhours-state-<service>` (see `cluster.base`). It belongs to
one incarnation of the Deployment (its UID) and to one kind of writer target: the Deployment's
replicas, or an autoscaler's maxReplicas. The gate remembers what it last applied; a value that
differs from it was set by someone else (an on-call engineer, an HPA's owner, a GitOps sync), and
the gate adopts it instead of undoing it (ARCHITECTURE.md, serving safety rule 7: own only your delta).
"""

import hashlib
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from offhours.scripts.policy.decide import ServiceState
from offhours.scripts.policy.release import MAX_RELEASES, MAX_RELEASING, Release, Releasing
from offhours.scripts.policy.samples import CounterSample

MAX_REPLICAS = 100_000  # a stored number beyond this is corruption, not a fleet
# The state ConfigMap must stay far under Kubernetes' 1 MiB object limit (past it every write fails, and so
# would the reclaims recorded through it): the look-ahead's history beyond its exact tail is kept in at most
# this many buckets, and the exact tail in at most MAX_EXACT_NEEDS entries (the config loader refuses more).
MAX_NEED_BUCKETS = 4096
MAX_EXACT_NEEDS = 20_000
MAX_BUCKET_COUNT = 10_000  # entries one stored bucket may stand for (more is a tampered record)
# The longest history any configuration keeps (the schema's timeOfDayDays <= 14 at tickSeconds >= 10), twice:
# what the stored buckets stand for, read back, never more (each bucket's count alone bounded 8192 buckets of
# 10,000, a 130 KB ConfigMap, to 82 million entries on every read).
MAX_HISTORY_ENTRIES = 2 * (14 * 86_400 // 10 + 1)
MAX_RELEASE_SECONDS = 86_400.0  # a stored release longer than a day is a tampered record
# The parked copies the gate made, by their original's UID: kept while the copy (or its original) is listed,
# or for COPY_MEMORY_SECONDS after the stop (the copy appears in the next tick's list); at most MAX_COPIES.
MAX_COPIES = 512
COPY_MEMORY_SECONDS = 3600.0
MAX_RUN_CHARS = 63  # a run id is a label value
MAX_NAME_CHARS = 253  # a workflow's name
MAX_DONE = 256  # runs kept as done (succeeded) per service, newest last
MAX_UID_CHARS = 64

# One tick of the look-ahead's history: (when, fractional replicas the rates took), the need None for a tick the gate
# missed (it was down): a gap is marked, never filled with a made-up need nor a reason to forget what came before.
Need = tuple[float, float | None]

# (UID of the workflow the gate stopped and copied, its run, when it was stopped, the token its copy carries: a
# random value recorded before the copy is made, so the copy is known as the gate's by more than its labels).
Copy = tuple[str, str, float, str]
MAX_TOKEN_CHARS = 32
# Per run the gate admitted: the UIDs of that run's workflows the gate admitted or created (its copies), oldest
# first: the run's lineage. Kept while one of them is listed (or still ending); at most MAX_LINEAGES runs, each
# with its newest MAX_LINEAGE_MEMBERS workflows (a run has one live workflow, and a copy on its way, at a time).
Lineage = tuple[str, tuple[str, ...]]
MAX_LINEAGES = 512
MAX_LINEAGE_MEMBERS = 3
# Workflows the gate admitted that it has seen labelled returned (their exit handler still runs): kept while listed so.
MAX_RETURNED = 256


@dataclass(frozen=True)
class ServiceRecord:
    """What the gate keeps about one service between ticks.

    `applied` is the value (replicas, or maxReplicas with an autoscaler) the gate last wrote to
    `writes_to`; `applying_from` is set while a write is in flight (recorded before the write, so a
    gate killed between the record and the write does not mistake its own change for another's).
    """

    deployment_uid: str = ""
    writes_to: str = ""  # "replicas" or "<Kind>/<name>" of the autoscaler
    baseline: int | None = None
    applied: int | None = None
    applying_from: int | None = None
    decision: ServiceState = field(default_factory=ServiceState)
    samples: dict[str, CounterSample] = field(default_factory=dict)
    last_decision: dict[str, Any] = field(default_factory=dict)
    # (time, fractional replicas the rates took; None: a tick the gate missed, a gap): the look-ahead's history.
    needs: tuple[Need, ...] = ()
    # How `needs` is stored: the last `needs_exact` entries as they are, older ones (the time-of-day term's
    # days) as the maximum of each `needs_width`-second bucket of absolute time (0: all exact).
    needs_exact: int = 0
    needs_width: float = 0.0
    # The Deployment's name: the backstop reads no gate config, and a service removed from the
    # configuration gets it back.
    deployment: str = ""
    # The lease on what is lent: a gate tick renews it; once it runs out, the backstop restores the baseline.
    renewed_at: float | None = None
    lease_seconds: float | None = None
    # What the gate itself admitted of this incarnation: workflow UID -> replicas lent. Only these count as
    # lent (a tenant can copy any mark a workflow carries, never this). None: a record written before the
    # gate kept it, or none at all (the workflows' marks are then the only evidence left).
    admitted: dict[str, int] | None = None
    # The run each of those belongs to, as it was when the gate admitted it (a tenant may relabel a workflow since,
    # never this), and its name (to read how it ended; "" where an older gate kept the run alone). None, or a UID
    # missing from it: unknown (a record of an older gate), the label then says.
    runs: dict[str, tuple[str, str]] | None = None
    # The parked copies the gate made (`Copy`): a parked workflow linked to one of these carries that run.
    copies: tuple[Copy, ...] = ()
    # Runs whose workflow the gate admitted succeeded (run id, when seen): done, no copy of them runs again.
    done: tuple[tuple[str, float], ...] = ()
    # Each run's lineage (`Lineage`): only its workflows run it, and only their success makes it done. None: a
    # record of an older gate (its admissions and the copies linked to its stops are then the lineage).
    lineages: tuple[Lineage, ...] | None = None
    # The UIDs of the workflows the gate admitted that it has seen labelled returned, while they are listed so (their
    # exit handler runs): only these are returned. Any other so labelled runs without admission, whatever it says.
    returned: tuple[str, ...] = ()
    # How long recent stops took to free their pods (`policy.release`), and the stops still being measured.
    releases: tuple[Release, ...] = ()
    releasing: tuple[Releasing, ...] = ()

    @property
    def lent(self) -> int:
        """Replicas the gate recorded as lent (its admissions)."""
        return sum((self.admitted or {}).values())

    def to_json(self) -> str:
        """Serialise compactly (the ConfigMap's `state.json`)."""
        return json.dumps({
            "deploymentUID": self.deployment_uid,
            "writesTo": self.writes_to,
            "baseline": self.baseline,
            "applied": self.applied,
            "applyingFrom": self.applying_from,
            "recommendations": [[round(t, 3), r] for t, r in self.decision.recommendations],
            "failedTicks": self.decision.failed_ticks,
            "samples": {key: [round(s.at, 3), *s.counters] for key, s in sorted(self.samples.items())},
            "lastDecision": self.last_decision,
            **_stored_needs(self.needs, self.needs_exact, self.needs_width),
            "deployment": self.deployment,
            "renewedAt": None if self.renewed_at is None else round(self.renewed_at, 3),
            "leaseSeconds": self.lease_seconds,
            **({"admitted": dict(sorted(self.admitted.items()))} if self.admitted is not None else {}),
            **({"runs": {u: list(rn) for u, rn in sorted(self.runs.items())}} if self.runs is not None else {}),
            **({"done": [[r, round(at, 3)] for r, at in self.done]} if self.done else {}),
            **({"copies": [[u, r, round(at, 3), k] for u, r, at, k in self.copies]} if self.copies else {}),
            **({"lineages": [[r, list(uids)] for r, uids in self.lineages]} if self.lineages is not None else {}),
            **({"returned": list(self.returned)} if self.returned else {}),
            **({"releases": [[k, round(at, 3), round(s, 3)] for k, at, s in self.releases]} if self.releases else {}),
            **({"releasing": [[n, k, round(at, 3), u] for n, k, at, u in self.releasing]} if self.releasing else {}),
        }, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | None) -> "ServiceRecord":
        """Parse; an unreadable record is no memory (the safe side: observe a whole window before lending).

        Anyone with rights on the ConfigMap can write it, so every field is checked: a value of the
        wrong type or out of range drops the whole record rather than steering the gate.
        """
        if not text:
            return cls()
        try:
            raw = json.loads(text)
            if not isinstance(raw, dict):
                return cls()
            recs = tuple((_finite(t), _count(r)) for t, r in raw.get("recommendations") or [])
            samples = {str(k): CounterSample(_finite(v[0]), (_finite(v[1]), _finite(v[2]), _finite(v[3])))
                       for k, v in (raw.get("samples") or {}).items()}
            return cls(
                deployment_uid=str(raw.get("deploymentUID") or ""),
                writes_to=str(raw.get("writesTo") or ""),
                baseline=_optional_count(raw.get("baseline")),
                applied=_optional_count(raw.get("applied")),
                applying_from=_optional_count(raw.get("applyingFrom")),
                decision=ServiceState(recs, _count(raw.get("failedTicks", 0))),
                samples=samples,
                last_decision=dict(raw.get("lastDecision") or {}),
                needs=_read_needs(raw),
                needs_exact=_count(raw.get("needsExact", 0)),
                needs_width=_finite(raw.get("needsWidth", 0.0)),
                deployment=str(raw.get("deployment") or ""),
                renewed_at=_optional_finite(raw.get("renewedAt")),
                lease_seconds=_optional_finite(raw.get("leaseSeconds")),
                admitted=None if raw.get("admitted") is None else {str(k): _count(v) for k, v in raw["admitted"].items()},
                releases=_read_releases(raw.get("releases")),
                releasing=_read_releasing(raw.get("releasing")),
                runs=_read_runs(raw.get("runs")),
                copies=_read_copies(raw.get("copies")),
                done=_read_done(raw.get("done")),
                lineages=_read_lineages(raw.get("lineages")),
                returned=_read_returned(raw.get("returned")),
            )
        except (ValueError, TypeError, IndexError, AttributeError, KeyError, RecursionError):  # nested past the parser
            return cls()


@dataclass(frozen=True)
class UnrecordedWrite:
    """A serving raise the gate wrote while its record could not be written (rule: serving first).

    Kept somewhere the record's fault cannot reach (a note on the gate's Lease, and in the process), so
    the next tick, in this process or another, does not take the gate's own raise for someone else's
    change. It holds only while the stored record is still the one it was made over (`over`, that
    record's fingerprint): once the record is written again, the note is stale and ignored.
    """

    deployment_uid: str
    writes_to: str
    baseline: int
    applied: int
    applying_from: int
    over: str

    def to_json(self) -> str:
        """Serialise compactly (the Lease annotation's value)."""
        return json.dumps({"deploymentUID": self.deployment_uid, "writesTo": self.writes_to, "baseline": self.baseline,
                           "applied": self.applied, "applyingFrom": self.applying_from, "over": self.over},
                          separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | None) -> "UnrecordedWrite | None":
        """Parse; anything malformed is no note (the gate then reads the stored record alone)."""
        try:
            raw = json.loads(text or "")
            return cls(str(raw["deploymentUID"]), str(raw["writesTo"]), _count(raw["baseline"]), _count(raw["applied"]),
                       _count(raw["applyingFrom"]), str(raw["over"]))
        except (ValueError, TypeError, KeyError):
            return None

    def supersede(self, stored: ServiceRecord, stored_text: str | None, uid: str, writes_to: str) -> ServiceRecord:
        """Return the record as the gate meant to write it, if `stored_text` is still the record this note was made over."""
        if (self.deployment_uid, self.writes_to) != (uid, writes_to) or self.over != fingerprint(stored_text):
            return stored
        return replace(stored, deployment_uid=uid, writes_to=writes_to, baseline=self.baseline, applied=self.applied,
                       applying_from=self.applying_from)


def _stored_needs(needs: tuple[Need, ...], exact: int, width: float) -> dict[str, Any]:
    """Store the history: an exact tail, and before it one (bucket, entries, maximum) per `width` seconds.

    A bucket's maximum stands for each of its entries: the time-of-day term reads maxima over a
    reaction time anyway, so it can only see more need, never less (lend less, reclaim earlier).
    Buckets are fixed in absolute time and a decoded entry keeps a time inside its bucket, so storing
    the same history again gives the same buckets: no maximum spreads from one tick to the next.
    A gap is stored as one: null in the tail, a bucket of missed ticks only has a null maximum.
    """
    if width <= 0 or len(needs) <= exact:
        return {"needs": [_stored_need(t, n) for t, n in needs]}
    cut = len(needs) - exact
    buckets: dict[int, list[Any]] = {}
    for t, n in needs[:cut]:
        entry = buckets.setdefault(math.floor(t / width), [0, None])
        entry[0] += 1
        if n is not None:
            entry[1] = n if entry[1] is None else max(entry[1], n)
    return {"needs": [_stored_need(t, n) for t, n in needs[cut:]],
            # Rounded up, and to the same value when stored again (a maximum must not creep up tick by tick).
            "needBuckets": [[b, int(c), None if m is None else math.ceil(m * 10_000 - 1e-6) / 10_000]
                            for b, (c, m) in buckets.items()],
            "needsExact": exact, "needsWidth": width}


def _stored_need(t: float, n: float | None) -> list[Any]:
    return [round(t, 3), None if n is None else round(n, 4)]


def _read_need(value: Any) -> float | None:
    return None if value is None else _finite(value)


def _read_needs(raw: dict[str, Any]) -> tuple[Need, ...]:
    """Read the history back: each bucket as its count of entries at its maximum, then the exact tail (gaps as gaps)."""
    width = _finite(raw.get("needsWidth", 0.0))
    stored = raw.get("needBuckets") or []
    tail = raw.get("needs") or []
    if len(stored) > 2 * MAX_NEED_BUCKETS or len(tail) > 2 * MAX_EXACT_NEEDS or (stored and not width > 0):
        raise ValueError("the look-ahead's history is larger than any the gate writes")
    out: list[Need] = []
    total = len(tail)
    for b, count, peak in stored:
        if isinstance(b, bool) or not isinstance(b, int) or not 1 <= _count(count) <= MAX_BUCKET_COUNT:
            raise ValueError(f"not a bucket: {b!r}, {count!r}")
        total += count  # checked before the bucket is expanded: its entries are made only within the bound
        if total > MAX_HISTORY_ENTRIES:
            raise ValueError(f"the look-ahead's history stands for more than the {MAX_HISTORY_ENTRIES} entries any "
                             f"the gate keeps")
        start, value = b * width, _read_need(peak)
        out += [(start + (j + 0.5) * width / count, value) for j in range(count)]
    out += [(_finite(t), _read_need(n)) for t, n in tail]
    return tuple(out)


def _bounded_list(raw: Any, most: int, too_many: str) -> list[Any]:
    """Return a stored list (absent: empty); ValueError(`too_many`) if it is no list or holds more than `most`."""
    entries = raw or []
    if not isinstance(entries, list) or len(entries) > most:
        raise ValueError(too_many)
    return entries


def _read_releases(raw: Any) -> tuple[Release, ...]:
    """Read the measured releases back: (run key, when, seconds), as many as the gate keeps, seconds within a day."""
    entries = _bounded_list(raw, MAX_RELEASES, "more release measurements than the gate keeps")
    out: list[Release] = []
    for key, at, seconds in entries:
        if not isinstance(key, str) or not 0 <= _finite(seconds) <= MAX_RELEASE_SECONDS:
            raise ValueError(f"not a release measurement: {key!r}, {seconds!r}")
        out.append((key, _finite(at), _finite(seconds)))
    return tuple(out)


def _read_releasing(raw: Any) -> tuple[Releasing, ...]:
    """Read the stops being measured back: (workflow name, run key, when stopped, the Workflow's uid).

    An older gate kept no uid (three fields): its stop is measured from the pods any Workflow of that
    name owns.
    """
    entries = _bounded_list(raw, MAX_RELEASING, "more stops being measured than the gate keeps")
    out: list[Releasing] = []
    for entry in entries:
        if not isinstance(entry, list) or len(entry) not in (3, 4):
            raise ValueError(f"not a stop being measured: {entry!r}")
        name, key, at, uid = (*entry, "") if len(entry) == 3 else entry
        if not isinstance(name, str) or not isinstance(key, str) or not isinstance(uid, str):
            raise ValueError(f"not a stop being measured: {name!r}, {key!r}")
        out.append((name, key, _finite(at), uid))
    return tuple(out)


def _read_runs(raw: Any) -> dict[str, tuple[str, str]] | None:
    """Read the admitted workflows' runs back: UID -> (run id, workflow name), as many as a record holds admissions."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or len(raw) > MAX_REPLICAS:
        raise ValueError("not a map of admitted workflows to their runs")
    out: dict[str, tuple[str, str]] = {}
    for uid, entry in raw.items():
        # An older gate kept the run alone (UID -> run id): its name is unknown (""), so how it ends is never read.
        run, name = (entry, "") if isinstance(entry, str) else entry
        if not (isinstance(run, str) and 0 < len(run) <= MAX_RUN_CHARS and isinstance(name, str)
                and len(name) <= MAX_NAME_CHARS and len(str(uid)) <= MAX_UID_CHARS):
            raise ValueError(f"not a run: {uid!r}, {entry!r}")
        out[str(uid)] = (run, name)
    return out


def _read_done(raw: Any) -> tuple[tuple[str, float], ...]:
    """Read the runs that succeeded back: (run id, when), at most MAX_DONE."""
    entries = _bounded_list(raw, MAX_DONE, "more finished runs than the gate keeps")
    out: list[tuple[str, float]] = []
    for run, at in entries:
        if not isinstance(run, str) or not 0 < len(run) <= MAX_RUN_CHARS:
            raise ValueError(f"not a run: {run!r}")
        out.append((run, _finite(at)))
    return tuple(out)


def with_done(done: tuple[tuple[str, float], ...], runs: Iterable[str], now: float) -> tuple[tuple[str, float], ...]:
    """Add the runs that succeeded this tick to those the gate keeps as done: the newest MAX_DONE."""
    out = {run: at for run, at in done}
    for run in runs:
        if run and len(run) <= MAX_RUN_CHARS:
            out.pop(run, None)
            out[run] = now
    return tuple(out.items())[-MAX_DONE:]


def _read_lineages(raw: Any) -> tuple[Lineage, ...] | None:
    """Read the runs' lineages back: (run id, its workflows' UIDs), at most MAX_LINEAGES of MAX_LINEAGE_MEMBERS."""
    if raw is None:
        return None
    entries = _bounded_list(raw, MAX_LINEAGES, "more lineages than the gate keeps")
    out: list[Lineage] = []
    for run, uids in entries:
        if not (isinstance(run, str) and 0 < len(run) <= MAX_RUN_CHARS and isinstance(uids, list)
                and 0 < len(uids) <= MAX_LINEAGE_MEMBERS
                and all(isinstance(u, str) and 0 < len(u) <= MAX_UID_CHARS for u in uids)):
            raise ValueError(f"not a lineage: {run!r}, {uids!r}")
        out.append((run, tuple(uids)))
    if len({run for run, _ in out}) != len(out):
        raise ValueError("a run with two lineages")
    return tuple(out)


def _read_returned(raw: Any) -> tuple[str, ...]:
    """Read back the UIDs of the admitted workflows the gate saw returned, at most MAX_RETURNED."""
    entries = _bounded_list(raw, MAX_RETURNED, "more returned workflows than the gate keeps")
    if not all(isinstance(u, str) and 0 < len(u) <= MAX_UID_CHARS for u in entries):
        raise ValueError("not a list of workflow UIDs")
    return tuple(entries)


def with_lineages(lineages: dict[str, tuple[str, ...]], joined: Iterable[tuple[str | None, str]],
                  live: Iterable[str]) -> tuple[Lineage, ...]:
    """Return the lineages after this tick: `joined` (run, UID) the workflows the gate admitted or created for a run.

    A workflow joins a run that has no lineage (the first the gate admits for it), or the lineage of the
    workflow it continues (the caller knows which); one whose UID is already a member only moves its run to the
    newest. A lineage is kept while one of its workflows is in `live` (listed, or still ending), or joined now;
    the newest MAX_LINEAGES, each its newest MAX_LINEAGE_MEMBERS.
    """
    alive = set(live)
    out: dict[str, tuple[str, ...]] = {run: uids for run, uids in lineages.items() if alive & set(uids)}
    for run, uid in joined:
        if not run or not uid or len(run) > MAX_RUN_CHARS or len(uid) > MAX_UID_CHARS:
            continue
        uids = out.pop(run, lineages.get(run, ()))
        out[run] = (*(u for u in uids if u != uid), uid)[-MAX_LINEAGE_MEMBERS:]  # re-inserted last: the newest
    return tuple(out.items())[-MAX_LINEAGES:]


def _read_copies(raw: Any) -> tuple[Copy, ...]:
    """Read the parked copies the gate made back: (original UID, run id, when stopped, token), at most MAX_COPIES.

    An older gate kept no token (three fields): its copies are then known by their link alone ("").
    """
    entries = _bounded_list(raw, MAX_COPIES, "more parked copies than the gate keeps")
    out: list[Copy] = []
    for entry in entries:
        uid, run, at, *rest = entry
        token = rest[0] if len(rest) == 1 else None if rest else ""
        if not (isinstance(uid, str) and 0 < len(uid) <= MAX_UID_CHARS and isinstance(run, str)
                and 0 < len(run) <= MAX_RUN_CHARS and isinstance(token, str) and len(token) <= MAX_TOKEN_CHARS):
            raise ValueError(f"not a parked copy: {entry!r}")
        out.append((uid, run, _finite(at), token))
    return tuple(out)


def with_copies(copies: tuple[Copy, ...], stopped: Iterable[tuple[str, str | None]], listed: Iterable[str],
                now: float, running: Iterable[str] = (), token: Callable[[], str] = lambda: "") -> tuple[Copy, ...]:
    """Add this tick's stops (UID, run) to the copies the gate made; forget those nothing listed links to any more.

    `listed` holds the UIDs the service's workflows link to (their own, and their `copy-of`): an entry is kept
    while one of them is its original or its copy, or for COPY_MEMORY_SECONDS after its stop; the newest
    MAX_COPIES in all. `running` holds the UIDs of workflows still listed as admitted: the stop recorded for one
    never landed (the gate died between its record and its stop, or the stop failed), so it is forgotten: kept,
    it would hide how that workflow ends (a run that succeeded would never be done). A stop of a workflow with an
    entry is the same stop tried again: it keeps its time and its token (a copy made by the earlier try carries
    it, and was made after that time); a new one gets `token()`.
    """
    linked, live = set(listed), set(running)
    earlier = {u: (at, k) for u, _, at, k in copies}
    out: dict[str, Copy] = {u: (u, r, at, k) for u, r, at, k in copies
                            if u not in live and (u in linked or now - at <= COPY_MEMORY_SECONDS)}
    for uid, run in stopped:
        if uid and run and len(uid) <= MAX_UID_CHARS and len(run) <= MAX_RUN_CHARS:
            at, key = earlier.get(uid) or (now, "")
            out.pop(uid, None)  # re-inserted last: the newest stop
            out[uid] = (uid, run, at, key or token()[:MAX_TOKEN_CHARS])
    return tuple(out.values())[-MAX_COPIES:]


def fingerprint(stored_text: str | None) -> str:
    """Identify one stored record: every write of the gate's changes it (each carries its tick's decision)."""
    return hashlib.sha256((stored_text or "").encode("utf-8", "replace")).hexdigest()[:16]


def _count(value: Any) -> int:
    """Return `value` if it is a replica count; a float, a string or a bool is refused (JSON gives ints as int)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_REPLICAS:
        raise ValueError(f"not a replica count: {value!r}")
    return value


def _optional_count(value: Any) -> int | None:
    return None if value is None else _count(value)


def _optional_finite(value: Any) -> float | None:
    if isinstance(value, (bool, str)):
        raise ValueError(f"not a number: {value!r}")
    return None if value is None else _finite(value)


def _finite(value: Any) -> float:
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"not finite: {value!r}")
    return number


@dataclass(frozen=True)
class Ownership:
    """The baseline for this tick, and what was adopted from someone else, if anything."""

    baseline: int
    record: ServiceRecord
    adopted: str | None = None  # a sentence for the Event and the log


def own_baseline(record: ServiceRecord, uid: str, writes_to: str, observed: int, lent: int) -> Ownership:
    """Reconcile the record with what is observed now: the gate owns only its own delta.

    `observed` is the Deployment's replicas (or the autoscaler's maxReplicas); `lent` what the
    admitted jobs of this incarnation hold. A new incarnation (another UID) or a new writer target
    (an HPA appeared or went) starts fresh: baseline = observed + lent, nothing of the old one is
    added twice. Otherwise a value that is neither what the gate applied nor what it was applying
    from was set by someone else: the baseline moves by the same amount.
    """
    fresh = record.deployment_uid != uid or record.writes_to != writes_to or record.baseline is None
    if fresh:
        note = None
        if record.deployment_uid and record.deployment_uid != uid:
            note = f"a new Deployment (uid {uid}) replaced the one the gate knew: baseline starts at {observed + lent}"
        elif record.writes_to and record.writes_to != writes_to:
            note = f"the gate now writes {writes_to} (was {record.writes_to}): baseline starts at {observed + lent}"
        same = record.deployment_uid == uid
        base = ServiceRecord(deployment_uid=uid, writes_to=writes_to, baseline=observed + lent, applied=observed,
                             samples=record.samples if same else {}, deployment=record.deployment,
                             admitted=record.admitted if same else ({} if record.deployment_uid else None),
                             runs=record.runs if same else ({} if record.deployment_uid else None), copies=record.copies,
                             done=record.done, lineages=record.lineages, returned=record.returned,
                             # What research jobs take to stop is theirs, not the Deployment incarnation's.
                             releases=record.releases, releasing=record.releasing)
        return Ownership(observed + lent, base, note)
    assert record.baseline is not None
    if record.applied is None or observed in (record.applied, record.applying_from):
        # A write in flight has now landed (observed == applied) or never happened (observed == applying_from,
        # the gate died first): either way settle on what is observed, or the next change someone else makes
        # would be measured from a value that was never there.
        settled = replace(record, applied=observed, applying_from=None)
        return Ownership(record.baseline, settled)
    baseline = max(lent, record.baseline + observed - record.applied)
    note = (f"{writes_to} set to {observed} by someone else (the gate had applied {record.applied}): "
            f"adopted, baseline {record.baseline} -> {baseline}")
    return Ownership(baseline, replace(record, baseline=baseline, applied=observed, applying_from=None), note)


def need_storage(keep: int, exact: int, tick_seconds: float) -> tuple[int, float]:
    """Return (exact entries, bucket width in seconds) to store a history of `keep` ticks within MAX_NEED_BUCKETS.

    `exact` is how much of the newest history must stay exact (the trend and volatility terms read
    it tick by tick). Entries are 0.9 to 2 ticks apart (`with_need`), so the older span is at most
    2 (keep - exact) ticks long: the width makes that fit in the bucket budget.
    """
    if keep <= exact:
        return exact, 0.0
    ticks_per_bucket = max(1, math.ceil(2 * (keep - exact) / (MAX_NEED_BUCKETS - 1)))
    return exact, ticks_per_bucket * tick_seconds


def with_need(needs: tuple[Need, ...], now: float, need: float, tick_seconds: float, keep: int) -> tuple[Need, ...]:
    """Add this tick's need to the history the look-ahead reads: one entry per tick, the last `keep`.

    A tick sooner than a tick length after the last entry (a tick woken early by a returned job)
    replaces it, so the history stays one entry per tick length. A gap longer than two ticks (the gate
    was down for minutes or hours) is marked: one None entry per tick missed, so what came before keeps its
    place a day back for the time-of-day term, and the look-ahead reads the gap as no evidence. Only
    entries more than `keep` ticks back fall out: the look-ahead never reads further.
    """
    if needs and now - needs[-1][0] > 2 * tick_seconds:
        last = needs[-1][0]
        slots = math.floor((now - last) / tick_seconds)  # ticks from the last entry to now, each >= a tick long
        step = (now - last) / slots
        shown = min(keep, slots - 1)  # the missed ticks nearest now: more than `keep` would fall out all the same
        needs = (*needs, *((last + k * step, None) for k in range(slots - shown, slots)))
    if needs and now - needs[-1][0] < 0.9 * tick_seconds:
        needs = needs[:-1]
    return (*needs, (now, need))[-keep:]
