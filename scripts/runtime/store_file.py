"""The checkpoint store on a file system (`file://`): files appear whole, by `link` or rename, or not at all.

Every file is first written to a `.offhours-tmp-*` entry in its folder and fsynced; a log entry is
then published with `os.link` (which fails if the name exists: the exclusive create the writers'
fence relies on), a data object (named uniquely by its writer) with a rename; the folder is fsynced
after. A crash leaves at most temporary entries, which the next start of the run removes.
"""

import errno
import os
import re
import stat
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from offhours.scripts.runtime.store_points import reached
from offhours.scripts.runtime.store_policy import RetryPolicy
from offhours.scripts.runtime.store_uri import StoreLocation, StoreURIError, parse_store_uri

T = TypeVar("T")

TMP = ".offhours-tmp-"
_TMP_NAME = re.compile(r"^\.offhours-tmp-([0-9]{12})-[0-9a-f]{32}\Z", re.ASCII)
INTERNAL = ("_log", "_data")  # the store's own folders: never searched for progress
CHUNK = 1 << 20
# What may pass by itself: an I/O error, a full disk or quota (space can come back), a stale NFS handle.
_TRANSIENT = {errno.EIO, errno.EAGAIN, errno.EINTR, errno.ENOSPC, errno.EDQUOT, errno.ESTALE, errno.ETIMEDOUT,
              errno.EBUSY}


def transient(err: BaseException) -> bool:
    """Whether a file system error is worth another try."""
    return isinstance(err, OSError) and err.errno in _TRANSIENT


_write_fd = os.write  # the one call that writes bytes (a test injects a full disk here)


def _write(path: Path, data: bytes) -> None:
    reached(f"write {path.name}")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[_write_fd(fd, view[:CHUNK]):]
        reached(f"fsync {path.name}")
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    reached(f"fsync {path.name}/")
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink(path: Path) -> None:
    reached(f"unlink {path.name}")
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    reached(f"unlinked {path.name}")


PROGRESS_MAX_BYTES = 64 * 1024  # a progress record is one short JSON line
PROGRESS_MAX_FILES = 1000  # a tenant can plant many; the gate's advisory read looks at this many at most
PROGRESS_MAX_FOLDERS = 2000  # folders one progress find walks, whatever a tenant made


class FindTooSlow(TimeoutError):
    """A progress find still walking at its deadline (not transient: the next find starts again)."""


def _read_small_regular(path: Path, limit: int) -> bytes | None:
    """Return the bytes of `path` if it is a regular file (not a link, FIFO or device) of at most `limit` bytes.

    What a tenant's step wrote in its own folder is read by the gate: a FIFO would block its open, a link
    to a huge file would be read whole, so neither is opened as such (O_NOFOLLOW, O_NONBLOCK, then fstat).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as err:
        if err.errno == errno.ELOOP:  # a symbolic link
            return None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        data = b""
        while len(data) <= limit and (chunk := os.read(fd, limit + 1 - len(data))):
            data += chunk
        return data if len(data) <= limit else None
    finally:
        os.close(fd)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None


class FileBackend:
    """Named files under one folder (`_log/<seq>`, `_data/<name>`, `progress.json`)."""

    def __init__(self, location: StoreLocation, policy: RetryPolicy) -> None:
        self.location, self.policy = location, policy
        self.root = Path(location.path)
        self.find_cut: str | None = None  # why the last `find` stopped before the end (None: it read everything)

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        return self.policy.call(what, fn, transient)  # the store names its URI in front

    def _staged(self, name: str, data: bytes, epoch: int) -> Path:
        """Write `data` to a fresh temporary file beside `name` and fsync it; return its path.

        The temporary name carries the writer's epoch: a start sweeps only those of older epochs.
        """
        folder = (self.root / name).parent
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f"{TMP}{epoch:012d}-{uuid.uuid4().hex}"
        try:
            _write(tmp, data)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return tmp

    def probe(self) -> None:
        """File systems always take `link` exclusively (POSIX): nothing to ask."""

    def create(self, name: str, data: bytes, epoch: int) -> bool:
        """Create `name` holding `data` unless it exists (then False); atomic and exclusive (`link`)."""
        def once() -> bool:
            tmp = self._staged(name, data, epoch)
            try:
                reached(f"link {name}")
                os.link(tmp, self.root / name)
                reached(f"linked {name}")
                created = True
            except FileExistsError:
                created = False
            except FileNotFoundError:
                if tmp.exists():
                    raise
                created = False  # a start of this epoch or a newer one swept it: the name is taken by then
            finally:
                _unlink(tmp)
            _fsync_dir((self.root / name).parent)
            return created
        return self._call(f"creating {name}", once)

    def write_new(self, name: str, data: bytes, epoch: int) -> None:
        """Write `data` under `name`, a name no one else writes (its writer's unique name), atomically."""
        def once() -> None:
            tmp = self._staged(name, data, epoch)
            try:
                reached(f"rename {name}")
                os.rename(tmp, self.root / name)
                reached(f"renamed {name}")
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
            _fsync_dir((self.root / name).parent)
        self._call(f"writing {name}", once)

    def put(self, name: str, data: bytes) -> None:
        """Replace the file `name` atomically (advisory records only: nothing relies on who wins)."""
        def once() -> None:
            tmp = self._staged(name, data, 0)
            try:
                reached(f"replace {name}")
                os.replace(tmp, self.root / name)
                reached(f"replaced {name}")
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
        self._call(f"writing {name}", once)

    def read(self, name: str) -> bytes | None:
        """Return the bytes of `name`, or None when it does not exist."""
        return self._call(f"reading {name}", lambda: _read(self.root / name))

    def read_small(self, name: str, limit: int) -> bytes | None:
        """Return the bytes of `name` if it is a regular file of at most `limit` bytes, else None (links not followed)."""
        return self._call(f"reading {name}", lambda: _read_small_regular(self.root / name, limit))

    def names(self, folder: str, after: str = "") -> list[str]:
        """Return the names of the files directly in `folder` (after `after`, sorted); temporary ones left out."""
        def scan() -> list[str]:
            try:
                entries = list(os.scandir(self.root / folder))
            except (FileNotFoundError, NotADirectoryError):
                return []
            return sorted(e.name for e in entries if not e.name.startswith(TMP) and e.name > after
                          and e.is_file(follow_symlinks=False))
        return self._call(f"listing {folder}", scan)

    def delete(self, name: str) -> None:
        """Delete `name` (done when it is already gone)."""
        self._call(f"removing {name}", lambda: _unlink(self.root / name))

    def sweep(self, epoch: int) -> None:
        """Remove the temporary files that writes of `epoch` or older left (best effort).

        Run by the start that took `epoch`, once its entry is published: every other writer of those
        epochs is fenced off by then (a racing start of the same epoch has lost its entry), and a
        racing start's files of a newer epoch are left alone.
        """
        for folder in (self.root, *(self.root / f for f in INTERNAL)):
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                match = _TMP_NAME.match(entry.name)
                if match and int(match.group(1)) <= epoch:
                    try:
                        _unlink(Path(entry.path))
                    except OSError:
                        pass

    def find(self, name: str) -> list[tuple[StoreLocation, bytes]]:
        """Every file `name` at or below the root, with the location of its folder (links are not followed)."""
        started = time.monotonic()

        self.find_cut = None

        def walk() -> list[Path]:  # one deadline and a folder cap for the whole walk, as the S3 find has
            found: list[Path] = []
            for walked, (folder, dirs, files) in enumerate(os.walk(self.root)):
                if walked >= PROGRESS_MAX_FOLDERS or len(found) >= PROGRESS_MAX_FILES:
                    self.find_cut = (f"more than {PROGRESS_MAX_FOLDERS} folders or {PROGRESS_MAX_FILES} {name} "
                                     "files: not read to the end")
                    break
                if time.monotonic() - started > self.policy.deadline:
                    raise FindTooSlow(f"finding {name} took more than {self.policy.deadline:g} s")
                dirs[:] = [d for d in dirs if not d.startswith(TMP) and d not in INTERNAL]
                if name in files:
                    found.append(Path(folder))
            return found

        def read_in_time(path: Path) -> bytes | None:
            if time.monotonic() - started > self.policy.deadline:
                raise FindTooSlow(f"finding {name} took more than {self.policy.deadline:g} s")
            return _read_small_regular(path, PROGRESS_MAX_BYTES)
        out = []
        for folder in self._call(f"finding {name}", walk)[:PROGRESS_MAX_FILES]:
            try:
                location = parse_store_uri("file://" + str(folder))
            except StoreURIError:
                continue  # a folder no checkpoint URI can name was not written by a store
            data = self._call(f"reading {name}",
                              lambda f=folder: read_in_time(f / name))  # type: ignore[misc]
            if data is not None:
                out.append((location, data))
        return out
