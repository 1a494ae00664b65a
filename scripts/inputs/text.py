"""Bytes to text: a size bound first, then the encoding checked (UTF-8; BOMs and UTF-16/32 named as such).

A file in another encoding, a binary file, an empty or an enormous one is something a person does,
not a bug: it is refused before it is parsed, with its name and what to do, never a traceback.
"""

import codecs
import errno
import os
import select
import stat
import time
from importlib import resources
from pathlib import Path
from typing import IO

from offhours.scripts.inputs.errors import InputError
from offhours.scripts.inputs.limits import FILE_READ_SECONDS, MIB, PACKAGE_DATA_BYTES

_CHUNK = 256 * 1024
_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"), (codecs.BOM_UTF16_LE, "UTF-16"),
         (codecs.BOM_UTF16_BE, "UTF-16"))


def _size(limit_bytes: int) -> str:
    if limit_bytes >= MIB:
        return f"{limit_bytes / MIB:g} MiB"
    return f"{limit_bytes / 1024:g} KiB" if limit_bytes % 1024 == 0 else f"{limit_bytes:,} bytes"


def decode(data: bytes, source: str, allow_empty: bool = False) -> str:
    """Return `data` as UTF-8 text (a UTF-8 byte order mark dropped); InputError naming what is wrong."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            raise InputError(source, f"is {name} text: save it as UTF-8")
    if b"\x00" in data:
        raise InputError(source, "is a binary file, not text")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InputError(source, f"is not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start}): "
                                 "save it as UTF-8") from None
    if not allow_empty and not text.strip():
        raise InputError(source, "is empty")
    return text


def read_stream(stream: IO[bytes], limit_bytes: int, source: str) -> bytes:
    """Read at most `limit_bytes` from a binary stream; InputError if there is more."""
    # In pieces: `read(n)` sets n bytes aside at once, so one read of the bound would cost the bound for a small file.
    data = bytearray()
    while chunk := stream.read(_CHUNK):
        data += chunk
        if len(data) > limit_bytes:  # a file that grew meanwhile, a device or a pipe is still bounded
            raise InputError(source, f"is more than the {_size(limit_bytes)} allowed")
    return bytes(data)


def read_bytes(path: str | Path, limit_bytes: int, seconds: float = FILE_READ_SECONDS) -> bytes:
    """Return the bytes of `path`, refused past `limit_bytes` (a regular file by its size first, unread).

    A pipe or a device (`<(kubectl ...)`, /dev/stdin) must end within `seconds`, however slowly it trickles.
    A file that cannot be opened raises OSError, as `open` does (callers name it in their own words).
    """
    file = Path(path)
    info = file.stat()
    if stat.S_ISREG(info.st_mode):
        if info.st_size > limit_bytes:
            raise InputError(str(path), f"is {info.st_size / MIB:.1f} MiB: more than the {_size(limit_bytes)} allowed")
        with file.open("rb") as handle:
            return read_stream(handle, limit_bytes, str(path))
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    return _read_until(file, limit_bytes, time.monotonic() + seconds, seconds)


def _read_until(file: Path, limit_bytes: int, deadline: float, seconds: float) -> bytes:
    """Read a pipe or a device to its end by `deadline`: non-blocking, so neither its open nor a read can wait longer."""
    fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    data = bytearray()
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise InputError(str(file), f"did not end within {seconds:g} s")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 64 * 1024)
            except BlockingIOError:
                continue
            if not chunk:
                return bytes(data)
            data += chunk
            if len(data) > limit_bytes:
                raise InputError(str(file), f"is more than the {_size(limit_bytes)} allowed")
    finally:
        os.close(fd)


def read_text(path: str | Path, limit_bytes: int, allow_empty: bool = False) -> str:
    """Return the UTF-8 text of `path`, bounded and checked (`read_bytes`, then `decode`)."""
    return decode(read_bytes(path, limit_bytes), str(path), allow_empty)


def package_bytes(package: str, *parts: str) -> bytes:
    """Return the bytes of a file shipped in `package` (bundled schemas, traces, examples), bounded like any input."""
    resource = resources.files(package)
    for part in parts:
        resource = resource.joinpath(part)
    with resource.open("rb") as handle:
        return read_stream(handle, PACKAGE_DATA_BYTES, "/".join((package, *parts)))


def package_text(package: str, *parts: str) -> str:
    """Return the UTF-8 text of a file shipped in `package` (`package_bytes`, then `decode`)."""
    return decode(package_bytes(package, *parts), "/".join((package, *parts)))
