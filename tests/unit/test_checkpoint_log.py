"""The checkpoint store's log and its guarantees, generated: random starts, saves and crashes on a file system.

The invariants, in words:
- `latest()` returns the newest published checkpoint, byte for byte; after a crash inside a save, it is
  either the checkpoint published before that save or the one the save was publishing, never older,
  never torn, never another run's.
- Once a newer start of the run has taken the store, every save of an older writer is refused
  (StaleWriterError) and changes nothing `latest()` returns.
- Collection never deletes a version the newest entry lists, nor a newer epoch's bytes.
- A run never reads another run's checkpoint, whatever URI it is given: its place is <uri>/<run-id>,
  and a log that names another run is refused, not read.
"""

import json
import shutil
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from offhours.scripts.runtime import store_points
from offhours.scripts.runtime.checkpoint import CheckpointError, CheckpointStore, StaleWriterError
from offhours.scripts.runtime.checkpoint_log import (
    Entry,
    LogError,
    StaleEpoch,
    Version,
    collectable,
    data_name,
    decode,
    save_after,
    start_after,
)


class Crash(BaseException):
    """The writer stops here (raised at a store point; a BaseException, as a kill is no error to handle)."""


def version(step: int, epoch: int, nonce: str) -> Version:
    return Version(step, data_name(step, epoch, nonce), 1, "0" * 64)


# --- the pure log ------------------------------------------------------------------------------------------

def test_an_entry_of_another_run_or_place_is_refused_not_read() -> None:
    """Fault: a log entry copied from another run, renamed to another number, or not written by the store."""
    entry = start_after(None, "a", "w")
    assert decode(entry.encode(), 1, "a") == entry
    with pytest.raises(LogError, match="belongs to run 'a', not to run 'b': a run never reads another's"):
        decode(entry.encode(), 1, "b")
    with pytest.raises(LogError, match="entry 2 says it is entry 1"):
        decode(entry.encode(), 2, "a")
    for text in (b"", b"{", b"[]", b'{"format": 1}', json.dumps({**json.loads(entry.encode()), "epoch": True}).encode()):
        with pytest.raises(LogError):
            decode(text, 1, "a")
    forged = json.loads(save_after(entry, 1, "w", version(1, 1, "0" * 16), 2).encode())
    forged["versions"][0]["name"] = "../../other-run/_data/x"
    with pytest.raises(LogError, match="names a data object the store does not write"):
        decode(json.dumps(forged).encode(), 2, "a")


def test_a_save_of_an_older_epoch_is_refused_by_the_pure_step() -> None:
    first = start_after(None, "r", "w1")
    second = start_after(first, "r", "w2")
    assert (second.seq, second.epoch) == (2, 2)
    with pytest.raises(StaleEpoch, match="epoch 1 is stale: a newer start of this run holds epoch 2"):
        save_after(second, 1, "w1", version(5, 1, "1" * 16), 2)


NONCES = st.text("0123456789abcdef", min_size=16, max_size=16)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(1, 6), NONCES), max_size=30), st.integers(1, 6),
       st.integers(1, 4), st.data())
def test_collection_never_deletes_a_listed_version_or_a_newer_epochs_bytes(stored: list, epoch: int, keep: int,
                                                                          data: st.DataObject) -> None:
    """Fault: a collector deleting bytes the newest entry lists, or a newer writer's bytes about to be published."""
    names = [data_name(step, e, n) for step, e, n in stored] + ["not-a-data-name", "000000000000001-x"]
    listed = tuple(data.draw(st.lists(st.sampled_from([version(s, e, n) for s, e, n in stored]), max_size=keep,
                                      unique=True))) if stored else ()
    published = Entry("r", 9, epoch, "save", "w", listed)
    doomed = collectable(names, published, epoch)
    assert not {v.name for v in listed} & set(doomed)
    assert all(int(name.split("-")[1]) <= epoch for name in doomed)
    assert "not-a-data-name" not in doomed and "000000000000001-x" not in doomed
    assert set(doomed) == {n for n in names if n not in {v.name for v in listed} and n[:1].isdigit()
                           and len(n.split("-")) == 3 and int(n.split("-")[1]) <= epoch}


# --- a run's own place, whatever URI it is given -----------------------------------------------------------

def test_a_new_run_given_another_runs_bare_uri_starts_from_nothing(tmp_path: Path) -> None:
    """Fault (seen): a template calling the job step with a bare URI; the next run read that progress and "finished"."""
    bare = f"file://{tmp_path}/ckpt"
    first = CheckpointStore.from_env({"OFFHOURS_CHECKPOINT_URI": bare, "OFFHOURS_RUN_ID": "first"})
    assert first.latest() is None
    first.save(3000, b"all of first's work")
    second = CheckpointStore.from_env({"OFFHOURS_CHECKPOINT_URI": bare, "OFFHOURS_RUN_ID": "second"})
    assert second.latest() is None  # its own place: nothing done yet, so it does the work
    assert first.uri == f"{bare}/first" and second.uri == f"{bare}/second"
    resumed = CheckpointStore.from_env({"OFFHOURS_CHECKPOINT_URI": bare, "OFFHOURS_RUN_ID": "first"})
    latest = resumed.latest()
    assert latest is not None and latest.step == 3000  # a start of the same run resumes it


def test_a_log_planted_in_a_runs_place_is_refused(tmp_path: Path) -> None:
    """Fault: another run's log copied into this run's place (by hand, a sync tool, a careless script)."""
    CheckpointStore(f"file://{tmp_path}/ckpt", run_id="other").save(3000, b"other's work")
    shutil.copytree(tmp_path / "ckpt" / "other", tmp_path / "ckpt" / "mine")
    store = CheckpointStore(f"file://{tmp_path}/ckpt", run_id="mine")
    with pytest.raises(CheckpointError, match=r"ckpt/mine: entry 2 belongs to run 'other', not to run 'mine'"):
        store.latest()
    with pytest.raises(CheckpointError, match="belongs to run 'other'"):
        CheckpointStore(f"file://{tmp_path}/ckpt", run_id="mine", readonly=True).latest()


def test_a_store_needs_a_run_id_it_can_name_a_folder_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault: no run id at all (the place would be a bare URI), or one that is not a DNS label."""
    monkeypatch.delenv("OFFHOURS_RUN_ID", raising=False)
    with pytest.raises(CheckpointError, match=r"no run id \(pass run_id or set OFFHOURS_RUN_ID\)"):
        CheckpointStore(f"file://{tmp_path}/ckpt")
    with pytest.raises(CheckpointError, match="OFFHOURS_RUN_ID is not set"):
        CheckpointStore.from_env({"OFFHOURS_CHECKPOINT_URI": f"file://{tmp_path}/ckpt"})
    for bad in ("", "A", "_log", "a/b", "..", "x" * 51):
        with pytest.raises(CheckpointError, match="run id|no run id"):
            CheckpointStore(f"file://{tmp_path}/ckpt", run_id=bad)
    assert not (tmp_path / "ckpt").exists()


def test_a_read_only_store_takes_no_epoch_and_does_not_save(tmp_path: Path) -> None:
    """Fault: a tool that only looks (why, a test) fencing off the run's live writer."""
    writer = CheckpointStore(f"file://{tmp_path}/ckpt", run_id="r")
    writer.save(1, b"one")
    looker = CheckpointStore(f"file://{tmp_path}/ckpt", run_id="r", readonly=True)
    seen = looker.latest()
    assert seen is not None and (seen.step, seen.data) == (1, b"one")
    with pytest.raises(CheckpointError, match="read-only store does not save"):
        looker.save(2, b"two")
    writer.save(2, b"two")  # still the holder of the newest epoch
    latest = looker.latest()
    assert latest is not None and (latest.step, latest.data) == (2, b"two")


def test_saves_from_two_threads_of_one_writer_never_damage_the_newest(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Fault: an asynchronous periodic save in a thread while the main thread saves on SIGTERM, with one store."""
    store = CheckpointStore(f"file://{tmp_path}/ckpt", run_id="r", keep=1)

    errors: list[BaseException] = []

    def saver(base: int) -> None:
        try:
            for i in range(15):
                store.save(base + i, f"bytes of {base + i}".encode())
        except BaseException as err:  # noqa: BLE001 - reported below, where pytest sees it
            errors.append(err)
    threads = [threading.Thread(target=saver, args=(b,)) for b in (100, 200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    latest = CheckpointStore(f"file://{tmp_path}/ckpt", run_id="r", readonly=True).latest()
    assert latest is not None and latest.data == f"bytes of {latest.step}".encode()
    assert latest.step in (114, 214) and "damaged" not in capsys.readouterr().err
    assert len(list((tmp_path / "ckpt" / "r" / "_data").iterdir())) == 1  # keep=1: the rest collected


# --- generated: starts, saves, stale saves and crashes --------------------------------------------------------

class StoreMachine(RuleBasedStateMachine):
    """Writers of one run on a file store: each start fences the ones before; saves may crash at any point."""

    @initialize()
    def setup(self) -> None:
        self.tmp = tempfile.mkdtemp()
        self.uri = f"file://{self.tmp}/ckpt"
        self.holder: CheckpointStore | None = None  # the writer of the newest start, unless it crashed
        self.stale: list[CheckpointStore] = []  # writers a newer start fenced off (still running, still trying)
        self.published: tuple[int, bytes] | None = None  # what latest() must return
        self.maybe: tuple[int, bytes] | None = None  # what a crashed save may have published
        self.counter = 0

    def teardown(self) -> None:
        store_points.hook = None
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _bytes(self, step: int) -> bytes:
        self.counter += 1
        return f"step {step} save {self.counter}".encode() * 3

    def _resolve(self) -> None:
        """After a crash, the newest is one of two: learn which from a reader, then it must stay so."""
        if self.maybe is None:
            return
        latest = CheckpointStore(self.uri, run_id="r", readonly=True).latest()
        got = (latest.step, latest.data) if latest else None
        assert got in (self.published, self.maybe), (got, self.published, self.maybe)
        self.published, self.maybe = got, None

    @rule()
    def start(self) -> None:
        self._resolve()
        store = CheckpointStore(self.uri, run_id="r")
        latest = store.latest()
        assert ((latest.step, latest.data) if latest else None) == self.published
        if self.holder is not None:
            self.stale.append(self.holder)
        self.holder = store

    @rule(step=st.integers(0, 20))
    def save_by_the_holder(self, step: int) -> None:
        if self.holder is None:
            return
        self._resolve()
        data = self._bytes(step)
        self.holder.save(step, data)
        self.published = (step, data)

    @rule(step=st.integers(0, 20), which=st.integers(0, 5))
    def save_by_a_stale_writer_is_refused(self, step: int, which: int) -> None:
        if not self.stale:
            return
        stale = self.stale[which % len(self.stale)]
        with pytest.raises(StaleWriterError, match="a newer start of the run took epoch"):
            stale.save(step, self._bytes(step))

    @rule(step=st.integers(0, 20), at=st.integers(1, 40))
    def holder_crashes_inside_a_save(self, step: int, at: int) -> None:
        if self.holder is None:
            return
        self._resolve()
        count = [0]

        def hook(label: str) -> None:
            count[0] += 1
            if count[0] == at:
                raise Crash(label)
        data = self._bytes(step)
        store_points.hook = hook
        try:
            self.holder.save(step, data)
            self.published = (step, data)  # the crash point lay past this save's end
        except Crash:
            self.maybe = (step, data)
            self.holder = None  # a killed process writes no more
        finally:
            store_points.hook = None

    @invariant()
    def latest_is_what_was_published(self) -> None:
        if not hasattr(self, "uri"):
            return
        latest = CheckpointStore(self.uri, run_id="r", readonly=True).latest()
        got = (latest.step, latest.data) if latest else None
        assert got in ((self.published, self.maybe) if self.maybe else (self.published,)), (got, self.published)


TestStoreMachine = StoreMachine.TestCase
TestStoreMachine.settings = settings(max_examples=40, stateful_step_count=25, deadline=None,
                                     suppress_health_check=[HealthCheck.too_slow])
