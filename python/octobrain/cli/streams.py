"""Standard output in an encoding that cannot spell every character (`PYTHONIOENCODING=latin-1`,
a Windows code page, a Latin-1 locale): a character it lacks is written as the JSON escape
`\\u2713` (a pair of them past U+FFFF), not a `UnicodeEncodeError` traceback half-way through
the answer. Inside JSON that escape is the character itself, so `--format json` and `memory
export -` stay valid and lossless; in text it names the character. Standard library only:
`cli.launch` sets it up before anything else, and the service (`service_command`) needs the
error handler's name to write a caller's output as the caller's process would."""

from __future__ import annotations

import codecs
import contextlib
import io
import sys

JSON_ESCAPE = "octobrain-json-escape"


def _json_escape(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    escaped = []
    for ch in exc.object[exc.start : exc.end]:
        code = ord(ch)
        if code > 0xFFFF:  # JSON spells a character past the BMP as its UTF-16 surrogate pair
            code -= 0x10000
            escaped.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            escaped.append(f"\\u{code:04x}")
    return "".join(escaped), exc.end


codecs.register_error(JSON_ESCAPE, _json_escape)


def escape_what_stdout_cannot_encode() -> None:
    """Make this process's stdout write what its encoding lacks as JSON escapes, when that
    encoding is not a Unicode one and a lacking character would be an error (`strict`). (An
    ASCII stdout is click's: it writes UTF-8 to it.)"""
    stream = sys.stdout
    if not isinstance(stream, io.TextIOWrapper) or stream.errors != "strict":
        return
    try:
        name = codecs.lookup(stream.encoding).name
    except LookupError:
        return
    if name.startswith("utf"):
        return
    with contextlib.suppress(AttributeError, ValueError, OSError):
        stream.reconfigure(errors=JSON_ESCAPE)
