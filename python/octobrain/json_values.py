"""A JSON document whose top level is an array, read one value at a time.

`json.loads` of a 64 MiB array of records holds every record at once, about ten times the
text as Python objects, before the first is used. Here each value of the array is parsed as
`json.loads` parses it (the same decoder), handed on and let go, so a reader holds the text
and the value it is at.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from octobrain.models import not_json, read_json_value

__all__ = ["array_values", "bounds"]

_SPACE = re.compile(r"[ \t\n\r]*")  # JSON's whitespace
_STRIPPED = re.compile(r"\s*")  # what `str.strip` takes away


def bounds(text: str) -> tuple[int, int]:
    """Where `text.strip()` starts and ends in `text`, without a copy of it held."""
    return _STRIPPED.match(text).end(), len(text.rstrip())  # type: ignore[union-attr]


def array_values(text: str, start: int, stop: int) -> Iterator[Any]:
    """The values of the JSON array `text[start:stop]` (stripped, starting with "["), in
    order, each parsed when it is asked for. Fails as `read_json` of that text does
    (`models.UnreadableJSON`), at the value where it would: text past the closing bracket is
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
            raise not_json("Expecting ',' delimiter" if end < stop else "Unterminated array")
    if space(end + 1) != stop:
        raise not_json("Extra data")
