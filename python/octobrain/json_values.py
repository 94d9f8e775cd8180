"""A JSON document whose top level is an array, read one value at a time.

`json.loads` of a 64 MiB array of records holds every record at once, about ten times the
text as Python objects, before the first is used. Here each value of the array is parsed as
`json.loads` parses it (the same decoder), handed on and let go, so a reader holds the text
and the value it is at.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from octobrain.models import UnreadableJSON

__all__ = ["array_values", "bounds"]

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")  # JSON's whitespace
_STRIPPED = re.compile(r"\s*")  # what `str.strip` takes away


def bounds(text: str) -> tuple[int, int]:
    """Where `text.strip()` starts and ends in `text`, without a copy of it held."""
    return _STRIPPED.match(text).end(), len(text.rstrip())  # type: ignore[union-attr]


def array_values(text: str, start: int, stop: int) -> Iterator[Any]:
    """The values of the JSON array `text[start:stop]` (stripped, starting with "["), in
    order, each parsed when it is asked for. Fails as `read_json` of that text does
    (`UnreadableJSON`), at the value where it would: text past the closing bracket is a syntax
    error too, after the last value."""

    def space(at: int) -> int:
        return _SPACE.match(text, at, stop).end()  # type: ignore[union-attr]

    end = space(start + 1)
    if not text.startswith("]", end, stop):
        while True:
            value, end = _value(text, end)
            yield value
            end = space(end)
            if text.startswith(",", end, stop):
                end = space(end + 1)
                continue
            if text.startswith("]", end, stop):
                break
            raise _syntax("Expecting ',' delimiter" if end < stop else "Unterminated array")
    if space(end + 1) != stop:
        raise _syntax("Extra data")


def _value(text: str, at: int) -> tuple[Any, int]:
    try:
        return _DECODER.raw_decode(text, at)
    except json.JSONDecodeError as exc:
        raise _syntax(exc.msg) from None
    except RecursionError:
        raise UnreadableJSON("is nested too deeply", "nested too deeply") from None
    except ValueError:
        raise UnreadableJSON(
            "holds a number too long to read", "a number too long to read"
        ) from None


def _syntax(message: str) -> UnreadableJSON:
    return UnreadableJSON(f"is not JSON ({message})", message, syntax=True)
