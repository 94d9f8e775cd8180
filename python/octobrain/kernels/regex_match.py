"""Regex line matching over many texts, used by `knowledge match`.

Runs the Rust `regex` engine (finite automata: linear time, no catastrophic backtracking, a
bounded compiled size). Syntax is the `regex` crate's, close to Python's `re` minus
backreferences, look-around and the other constructs that need backtracking (`_UNSUPPORTED`).
Under a time limit, a line whose worst case could outlast it is searched by an engine that reads
the clock as it goes, with the same results.
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

# Constructs of backtracking engines (Python's `re`, PCRE) that this engine lacks, each with
# what it says instead: the `regex` crate read most as an unknown flag or escape, which told a
# Python user nothing, and `a*+` as `(?:a*)+`, which matches where Python's never would.
# `{spelled}` is the construct as written; `{plain}` is it without its last character.
_UNSUPPORTED = {
    r"\\[kg](?:<[^>]*>|'[^']*'|\{[^}]*\}|-?[0-9]+)|\(\?P=[^)]*\)": "backreferences are not "
    "supported ({spelled} matches what a group matched; this engine runs in linear time "
    "without them)",
    r"\(\?>": "atomic groups are not supported ({spelled}…) keeps what it first matched; write "
    "(?:…): this engine never backtracks, so it needs none to stay fast)",
    r"(?:[*+?]|\{[0-9]+(?:,[0-9]*)?\})\+": "possessive quantifiers are not supported ({spelled} "
    "gives nothing back; write {plain}: this engine never backtracks, so it needs none to stay "
    "fast)",
    r"\(\?\([^)]*\)": "conditionals are not supported ({spelled}…) picks a branch by what matched "
    "before; there is no equivalent: match either branch with (?:…|…))",
    r"\(\?(?:R|[+-]?[0-9]+|&\w+|P>\w+)\)": "recursion is not supported ({spelled} matches a "
    "pattern inside itself; spell out each level of nesting to match, as (?:[^()]|\\([^()]*\\))*)",
    r"\\K": "\\K is not supported ({spelled} leaves what matched before it out of the match; "
    "write the pattern without it: the same lines match)",
    r"\(\?#": "comment groups are not supported ({spelled}…); leave the comment out, or start the "
    "pattern with (?x), where # comments to the end of the line and spaces are ignored)",
    r"\(\?\|": "branch reset groups are not supported ({spelled}…) numbers each branch's groups "
    "alike; write (?:…|…): the same lines match)",
}
# One group per construct, then escapes (`\\x{41}` whole): consumed whole, `\\k<x>` or
# `\\x{41}+` spells none of them. Character classes are skipped whole by `_class_end`.
_ESCAPE = r"\\[xuUpP]\{[^}]*\}|\\."
_SCAN = re.compile("|".join(f"({construct})" for construct in _UNSUPPORTED) + "|" + _ESCAPE, re.S)
# In a class: an escape, or an ASCII class (`[:alpha:]`), which is no nested class.
_IN_CLASS = re.compile(_ESCAPE + r"|\[:\^?[a-z]+:\]", re.S)
_MESSAGES = list(_UNSUPPORTED.values())


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
    unsupported = _unsupported(pattern)
    if unsupported is not None:
        raise InvalidInput("pattern", f"invalid regular expression: {unsupported}")
    raw, truncated = _core.match_lines(
        texts, pattern, bool(ignore_case), max_matches, context, seconds, context_chars
    )
    return MatchResult([LineMatch(*m) for m in raw], truncated)


def _unsupported(pattern: str) -> str | None:
    """What is said of the first construct in `_UNSUPPORTED` that `pattern` spells, else None."""
    at = 0
    while at < len(pattern):
        if pattern[at] == "[":
            at = _class_end(pattern, at)
            continue
        found = _SCAN.match(pattern, at)
        if found is None:
            at += 1
            continue
        if found.lastindex is not None:
            spelled = client_text(found[0], 40)
            plain = client_text(found[0][:-1], 40)
            return _MESSAGES[found.lastindex - 1].format(spelled=spelled, plain=plain)
        at = found.end()
    return None


def _class_end(pattern: str, at: int) -> int:
    """Where the character class opening at `pattern[at]` ends, nested classes in it included
    (`[a[b]*+]` is one class, as the engine reads it: its `*+` is no quantifier); a `]` first
    in a class, after an optional `^`, is a literal. The end of `pattern` if it never closes."""
    depth = 0
    while at < len(pattern):
        # A class opens here: `[`, an optional `^`, and a `]` that is a literal.
        depth += 1
        at += 1
        at += pattern.startswith("^", at)
        at += pattern.startswith("]", at)
        while at < len(pattern):
            char = pattern[at]
            found = _IN_CLASS.match(pattern, at) if char in "[\\" else None
            if char == "[" and found is None:
                break  # a nested class opens
            at = found.end() if found is not None else at + 1
            if char == "]":
                depth -= 1
                if depth == 0:
                    return at
    return at
