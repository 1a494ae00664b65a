"""The checkpoint store on a file system (`file://`): a checkpoint folder appears whole, by rename, or not at all.

Everything a save writes first goes to a `.offhours-tmp-*` entry beside the checkpoints; a save
that fails removes its own, and every save first removes those an earlier, killed save left, so
interrupted saves never add up. The store has one writer at a time (Argo runs one attempt of a
step at a time); a sweep could otherwise remove a concurrent writer's half-written entry, which
only fails that writer's save, never a complete checkpoint.
"""

import errno
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from offhours.scripts.runtime.store_policy import RetryPolicy
from offhours.scripts.runtime.store_uri import STEP_FOLDER, StoreLocation, StoreURIError, parse_store_uri

T = TypeVar("T")

TMP = ".offhours-tmp-"
CHUNK = 1 << 20
# What may pass by itself: an I/O error, a full disk or quota (space can come back), a stale NFS handle.
_TRANSIENT = {errno.EIO, errno.EAGAIN, errno.EINTR, errno.ENOSPC, errno.EDQUOT, errno.ESTALE, errno.ETIMEDOUT,
              errno.EBUSY}


def transient(err: BaseException) -> bool:
    """Whether a file system error is worth another try."""
    return isinstance(err, OSError) and err.errno in _TRANSIENT


_write_fd = os.write  # the one call that writes bytes (a test injects a full disk here)


def _write(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[_write_fd(fd, view[:CHUNK]):]
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            path.unlink()
        except FileNotFoundError:
            pass


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


class FileBackend:
    """Checkpoint folders `step-N/{data,COMPLETE}` and named files under one folder."""

    def __init__(self, location: StoreLocation, policy: RetryPolicy) -> None:
        self.location, self.policy = location, policy
        self.root = Path(location.path)

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        return self.policy.call(what, fn, transient)  # the store names its URI in front

    def steps(self) -> list[int]:
        """Return the steps that have a checkpoint folder (complete or not)."""
        def scan() -> list[int]:
            try:
                entries = list(os.scandir(self.root))
            except (FileNotFoundError, NotADirectoryError):
                return []
            return sorted(int(m.group(1)) for e in entries if (m := STEP_FOLDER.match(e.name)) and e.is_dir())
        return self._call("listing checkpoints", scan)

    def read(self, folder: str, name: str) -> bytes | None:
        """Return the bytes of `folder/name`, or None when it does not exist."""
        return self._call(f"reading {folder}/{name}", lambda: _read(self.root / folder / name))

    def sweep(self, keep: str = "", names: tuple[str, ...] = ()) -> None:
        """Remove what interrupted saves left behind (best effort: a failure here never fails a save).

        Checkpoint folders only ever appear whole here, so only the temporary entries are swept.
        """
        try:
            for entry in os.scandir(self.root):
                if entry.name.startswith(TMP):
                    _remove(Path(entry.path))
        except OSError:
            pass

    def commit(self, folder: str, files: dict[str, bytes]) -> None:
        """Write `files` into a new `folder` and rename it into place, replacing an older one of that name."""
        self._call(f"saving {folder}", lambda: self._commit_once(folder, files))

    def _commit_once(self, folder: str, files: dict[str, bytes]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tag = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp, old, final = self.root / f"{TMP}{folder}-{tag}", self.root / f"{TMP}replaced-{folder}-{tag}", \
            self.root / folder
        try:
            tmp.mkdir()
            for name, data in files.items():
                _write(tmp / name, data)
            _fsync_dir(tmp)
            if final.exists():  # a retried save of the same step: set the old one aside, then replace it
                os.rename(final, old)
            os.rename(tmp, final)  # atomic on one file system: the checkpoint appears complete or not at all
            _fsync_dir(self.root)
        except BaseException:
            _remove(tmp)
            if old.exists() and not final.exists():
                os.rename(old, final)
            raise
        _remove(old)

    def put(self, name: str, data: bytes) -> None:
        """Replace the file `name` atomically."""
        def once() -> None:
            self.root.mkdir(parents=True, exist_ok=True)
            tmp = self.root / f"{TMP}{name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            try:
                _write(tmp, data)
                os.replace(tmp, self.root / name)
            except BaseException:
                _remove(tmp)
                raise
        self._call(f"writing {name}", once)

    def get(self, name: str) -> bytes | None:
        """Return the bytes of the file `name`, or None."""
        return self._call(f"reading {name}", lambda: _read(self.root / name))

    def find(self, name: str) -> list[tuple[StoreLocation, bytes]]:
        """Every file `name` at or below the root, with the location of its folder (links are not followed)."""
        def walk() -> list[Path]:
            found = []
            for folder, dirs, files in os.walk(self.root):
                dirs[:] = [d for d in dirs if not d.startswith(TMP) and not STEP_FOLDER.match(d)]
                if name in files:
                    found.append(Path(folder))
            return found
        out = []
        for folder in self._call(f"finding {name}", walk):
            try:
                location = parse_store_uri("file://" + str(folder))
            except StoreURIError:
                continue  # a folder no checkpoint URI can name was not written by a store
            data = self._call(f"reading {name}", lambda f=folder: _read(f / name))  # type: ignore[misc]
            if data is not None:
                out.append((location, data))
        return out
