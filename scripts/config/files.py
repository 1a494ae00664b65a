"""Reading a file a person gives (a gate configuration, a manifest): one line naming what is wrong with it.

A file in another encoding, a binary file, an empty or an enormous one is something a person does,
not a bug: it is refused before it is parsed, with its name and what to do, never a traceback.
YAML nested too deeply for the parser is refused the same way (`yaml_error`).
"""

import codecs
from pathlib import Path

import yaml

_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"), (codecs.BOM_UTF16_LE, "UTF-16"),
         (codecs.BOM_UTF16_BE, "UTF-16"))
MIB = 1024 * 1024


class InputFileError(ValueError):
    """The file cannot be read as text; the message says why (without the file's name)."""


def read_text(path: str | Path, limit_bytes: int, allow_empty: bool = False) -> str:
    """Return the UTF-8 text of `path` (a UTF-8 byte order mark dropped); InputFileError naming what is wrong.

    A file that cannot be opened raises OSError, as `open` does (callers name it in their own words).
    """
    file = Path(path)
    size = file.stat().st_size
    if size > limit_bytes and file.is_file():
        raise InputFileError(f"is {size / MIB:.1f} MiB: more than the {limit_bytes / MIB:g} MiB allowed")
    with file.open("rb") as handle:
        data = handle.read(limit_bytes + 1)  # a file that grew meanwhile, or a device, is still bounded
    if len(data) > limit_bytes:
        raise InputFileError(f"is more than the {limit_bytes / MIB:g} MiB allowed")
    for bom, name in _BOMS:
        if data.startswith(bom):
            raise InputFileError(f"is {name} text: save it as UTF-8")
    if b"\x00" in data:
        raise InputFileError("is a binary file, not text")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InputFileError(f"is not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start}): "
                             "save it as UTF-8") from None
    if not allow_empty and not text.strip():
        raise InputFileError("is empty")
    return text


def yaml_error(err: Exception) -> str:
    """Describe a failure of the YAML parser (a syntax error, or nesting past its recursion limit) in one line."""
    if isinstance(err, RecursionError):
        return "is nested too deeply to parse"
    return f"is not valid YAML: {str(err).splitlines()[0] if str(err) else type(err).__name__}"


YAML_ERRORS = (yaml.YAMLError, RecursionError)
