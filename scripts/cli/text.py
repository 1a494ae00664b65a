r"""The one way the command line prints a string it did not write: control characters escaped, as kubectl does.

Annotations, parameters, labels, log headers and schedules come from tenants. Printed raw, an escape
sequence reaches the operator's terminal (it can retitle it, hide text, move the cursor) and a
newline forges a row of a table. kubectl shows ESC as `^[`; the same is done here, and every other
control or invisible formatting character (C0, DEL, C1, bidirectional overrides, zero-width
characters, line and paragraph separators) is shown as its escape (`\n`, `\r`, `\t`, `\x07`,
`\u202e`). JSON and YAML output encode such characters themselves and do not use this.
"""

import unicodedata

_NAMED = {"\x1b": "^[", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(value: object) -> str:
    """Return `value` as text with every control and invisible formatting character escaped."""
    text = value if isinstance(value, str) else str(value)
    if text.isprintable():
        return text  # the common case, and fast: no control, separator or format character
    return "".join(_escape(c) if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn")
                   else c for c in text)
