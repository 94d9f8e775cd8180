"""JSON text read as `json.loads` reads it, failing one way, whole or a value at a time.

`read_json` is `json.loads` with every way it fails as one `UnreadableJSON` (bad syntax,
nesting too deep, a number too long), so each reader of a caller's JSON (a hook's input, an
import file, a chat export) reports it in one line.

A document whose top level is an array can be read one value at a time (`array_values`):
`json.loads` of a 64 MiB array of records holds every record at once, about ten times the
text as Python objects, before the first is used. Here each value of the array is parsed as
`json.loads` parses it (the same decoder), handed on and let go, so a reader holds the text
and the value it is at.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from octobrain.lines import place

__all__ = [
    "UnreadableJSON",
    "array_values",
    "bounds",
    "not_json",
    "read_json",
    "read_json_value",
]


class UnreadableJSON(ValueError):
    """JSON text `read_json` could not read. `reason` completes "the line …" or "the file …"
    (`is not JSON (…)`, `is nested too deeply`, `holds a number too long to read`), `detail`
    is the bare cause, and `syntax` tells text that is not JSON at all from JSON too deep or
    with too long a number to read."""

    def __init__(
        self, reason: str, detail: str, *, syntax: bool = False, position: int | None = None
    ) -> None:
        super().__init__(reason)
        self.reason, self.detail, self.syntax = reason, detail, syntax
        self.position = position  # where in the text the syntax broke, when known

    def placed(self, text: str) -> str:
        """`reason` with the line and column of `position` in `text` (which was read)."""
        if self.position is None:
            return self.reason
        line, column = place(text, self.position)
        return f"is not JSON ({self.detail}: line {line}, column {column})"


def not_json(message: str, position: int | None = None) -> UnreadableJSON:
    """What `read_json` raises for text that is not JSON (`message`: the decoder's)."""
    return UnreadableJSON(f"is not JSON ({message})", message, syntax=True, position=position)


@contextmanager
def _read_as_json() -> Iterator[None]:
    try:
        yield
    except json.JSONDecodeError as exc:
        raise not_json(exc.msg, exc.pos) from None
    except RecursionError:
        raise UnreadableJSON("is nested too deeply", "nested too deeply") from None
    except ValueError:
        raise UnreadableJSON(
            "holds a number too long to read", "a number too long to read"
        ) from None


_DECODER = json.JSONDecoder()


def read_json(text: str | bytes) -> Any:
    """`json.loads`, with every way it fails as one `UnreadableJSON`: besides bad syntax,
    nesting past the interpreter's recursion limit and an integer longer than Python converts
    (4,300 digits), which `json` raises as a `RecursionError` and a bare `ValueError`."""
    with _read_as_json():
        return json.loads(text)


def read_json_value(text: str, at: int) -> tuple[Any, int]:
    """The JSON value that starts at `text[at]` and the index past it, failing as `read_json`
    does (`json.JSONDecoder.raw_decode`)."""
    with _read_as_json():
        return _DECODER.raw_decode(text, at)


_SPACE = re.compile(r"[ \t\n\r]*")  # JSON's whitespace
_STRIPPED = re.compile(r"\s*")  # what `str.strip` takes away


def bounds(text: str) -> tuple[int, int]:
    """Where `text.strip()` starts and ends in `text`, without a copy of it held."""
    return _STRIPPED.match(text).end(), len(text.rstrip())  # type: ignore[union-attr]


def array_values(text: str, start: int, stop: int) -> Iterator[Any]:
    """The values of the JSON array `text[start:stop]` (stripped, starting with "["), in
    order, each parsed when it is asked for. Fails as `read_json` of that text does
    (`UnreadableJSON`), at the value where it would: text past the closing bracket is
    a syntax error too, after the last value."""

    def space(at: int) -> int:
        return _SPACE.match(text, at, stop).end()  # type: ignore[union-attr]

    end = space(start + 1)
    if not text.startswith("]", end, stop):
        while True:
            value, end = read_json_value(text, end)
            yield value
            end = space(end)
            if text.startswith(",", end, stop):
                end = space(end + 1)
                continue
            if text.startswith("]", end, stop):
                break
            raise not_json("Expecting ',' delimiter" if end < stop else "Unterminated array", end)
    if space(end + 1) != stop:
        raise not_json("Extra data", space(end + 1))
