"""Regex line matching over many texts, used by `knowledge match`.

Runs the Rust `regex` engine (finite automata: linear time, no catastrophic backtracking, a
bounded compiled size). Syntax is the `regex` crate's, close to Python's `re` minus
backreferences and look-around. Under a time limit, a line whose worst case could outlast it is
searched by an engine that reads the clock as it goes, with the same results.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from octobrain import _core
from octobrain._core import TimeLimitExceeded
from octobrain.errors import InvalidInput
from octobrain.safe_text import client_text

__all__ = ["LineMatch", "MatchResult", "TimeLimitExceeded", "match_lines"]

# A group referred to again by name or number, as backtracking engines spell it: the `regex`
# crate reads `(?P=x)` as an unknown flag and `\k<x>` as an unknown escape, which told a
# Python user nothing. An escaped character is consumed whole, so `\\k<x>` is no reference.
_BACKREFERENCE = re.compile(r"\\[kg](?:<[^>]*>|'[^']*'|\{[^}]*\}|-?[0-9]+)|\(\?P=[^)]*\)|\\.", re.S)


class LineMatch(NamedTuple):
    """One matching line; `line[start:end]` is the first match in it."""

    text_index: int
    line_number: int
    line: str
    start: int
    end: int
    before: list[str]
    after: list[str]


class MatchResult(NamedTuple):
    """Matches in input order, and whether more matching lines existed beyond the cap."""

    matches: list[LineMatch]
    truncated: bool


def match_lines(
    texts: Sequence[str],
    pattern: str,
    *,
    ignore_case: bool = False,
    max_matches: int = 100,
    context: int = 0,
    seconds: float | None = None,
    context_chars: int | None = None,
) -> MatchResult:
    """Return the lines of `texts` that `pattern` matches, at most `max_matches` of them.

    Each text is split on "\\n" with a trailing "\\r" stripped from every line; a final "\\n"
    does not add an empty line. Line numbers are 1-based within their text. `start`/`end` are
    `str` indices of the first match in the line. `context` adds up to that many lines before
    and after each match, from the same text, each cut to its first `context_chars` characters
    when given (a caller showing no more need not receive long lines once per match they
    surround). An invalid pattern raises `ValueError` naming
    `pattern`; a search still running after `seconds` raises `TimeLimitExceeded` (a
    `ValueError`) naming it, within about a millisecond of the limit even inside one long line.
    """
    if isinstance(texts, str):
        raise InvalidInput("texts", "must be a sequence of str, not a single str")
    texts = list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise InvalidInput("texts", f"item {i} is {type(text).__name__}, expected str")
    if not isinstance(pattern, str):
        raise InvalidInput("pattern", "must be a str")
    integers = [("max_matches", max_matches), ("context", context)]
    if context_chars is not None:
        integers.append(("context_chars", context_chars))
    for name, value in integers:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidInput(name, "must be an integer")
    try:
        raw, truncated = _core.match_lines(
            texts, pattern, bool(ignore_case), max_matches, context, seconds, context_chars
        )
    except TimeLimitExceeded:
        raise
    except ValueError as exc:
        said = str(exc).rsplit("error: ", 1)[-1]
        reference = _backreference(pattern) if said.startswith("unrecognized ") else None
        if reference is None:
            raise
        raise InvalidInput(
            "pattern",
            "invalid regular expression: backreferences are not supported "
            f"({client_text(reference, 40)} "
            "matches what a group matched; this engine runs in linear time without them)",
        ) from None
    return MatchResult([LineMatch(*m) for m in raw], truncated)


def _backreference(pattern: str) -> str | None:
    """The first backreference `pattern` spells (`(?P=x)`, `\\k<x>`, `\\g{1}`...), else None."""
    for found in _BACKREFERENCE.finditer(pattern):
        if len(found[0]) > 2:  # (an escaped character is two)
            return found[0]
    return None
