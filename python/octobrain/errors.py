"""Domain errors. Each subclasses a builtin so callers may catch either."""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any


class OctobrainError(Exception):
    """Base class of every error octobrain raises on purpose."""


RULE_CHARS = 1_000  # a rule longer than this (it quotes a long argument) is shown cut


def cut_middle(text: str, limit: int) -> str:
    """`text`, or when longer than `limit` characters its start and end around a note of how
    much was cut (a reply that quotes a client's argument stays short however long it is)."""
    if len(text) <= limit:
        return text
    head, tail = limit * 6 // 10, limit * 3 // 10  # the end kept too: it often says the most
    return f"{text[:head]} … [{len(text) - head - tail:,} characters cut] … {text[-tail:]}"


# Bidirectional controls: printed raw, an override reverses the rest of its line on a terminal
# ("Trojan Source"), so a refusal, and any JSON printed, writes them as escapes (JSON reads them
# back alike).
_BIDI_CHARS = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_BIDI = re.compile(f"[{_BIDI_CHARS}]")
_JSON_UNSAFE = re.compile(f"[\x7f-\x9f\ud800-\udfff{_BIDI_CHARS}]")


def json_printable(value: Any, *, indent: int | None = None) -> str:
    """`value` as JSON, non-ASCII text as itself but DEL, the C1 codes (a terminal acts on
    them as on ESC, which JSON escapes with the rest below U+0020), the bidirectional controls
    (a stored memory's U+202E reversed the rest of a `--format json` line) and lone surrogates
    (which cannot be written as UTF-8) as `\\u` escapes: the same JSON, safe to print."""
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


_LONG_INTEGER = 10**20  # from here an integer is quoted by its exponent


def _integer_text(value: int) -> str:
    """An integer as a rule quotes it: whole, or from 21 digits rounded with its exponent
    (`1e+308`, `-1.5e+300`, as a float prints), so a refusal of `limit: 1e308` (read as its
    309-digit integer) is a line, not 309 digits cut."""
    if -_LONG_INTEGER < value < _LONG_INTEGER:
        return str(int(value))  # (an IntEnum's str is its name before 3.11)
    from decimal import Decimal  # (str() refuses an integer past 4,300 digits; Decimal does not)

    mantissa, exponent = format(Decimal(value), ".5e").split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{exponent}"


def as_json(value: object, chars: int = 100) -> str:
    """`value` as a client wrote it in JSON (`true`, `null`, `"5"`, `["x"]`), cut in the
    middle to `chars`: what a rule's "got …" quotes, since clients speak JSON, not Python
    (`True`, `None`, `'5'`). A value JSON cannot hold is shown as Python writes it; a long
    integer by its exponent (`1e+400`)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return _integer_text(value)
    try:
        text = json_printable(value)
    except (TypeError, ValueError):
        text = repr(value)
    return cut_middle(_BIDI.sub(lambda m: f"\\u{ord(m.group()):04x}", text), chars)


def char_named(char: str) -> str:
    """One character as a refusal names it: quoted as JSON (`"'"`, `" "`, `"\\n"`), or, when
    it would show as nothing, as part of its neighbour or reorder the text after it (a format,
    private-use or unassigned character, a line separator, a combining mark), by its code
    point and name: `U+202E RIGHT-TO-LEFT OVERRIDE`."""
    if char < " " or (char.isprintable() and not unicodedata.category(char).startswith("M")):
        return as_json(char)
    name = unicodedata.name(char, "")
    return f"U+{ord(char):04X} {name}".rstrip()


_JSON_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"))


def json_type(value: object) -> str:
    """The JSON name of `value`'s type (`null`, `boolean`, `array`, `object`, …), where a
    rule says what it got instead of the value itself."""
    if value is None:
        return "null"
    for kind, name in _JSON_TYPES:
        if isinstance(value, kind):
            return name
    if isinstance(value, list | tuple):
        return "array"
    return "object" if isinstance(value, dict) else type(value).__name__


class InvalidInput(OctobrainError, ValueError):
    """An argument broke a rule. The message names the field and the rule.

    A rule that quotes the argument it refuses stays short however long that argument is: its
    middle is cut, so the reply to a hostile megabyte is a line, not the megabyte again."""

    # False on an error about an argument that is well formed but could not be served (a URL
    # whose server does not answer): not the caller's mistake, so the command line exits 1
    # for it, as for any failure, not 2.
    input_fault = True

    def __init__(self, field: str, rule: str) -> None:
        rule = cut_middle(rule, RULE_CHARS)
        super().__init__(f"{field}: {rule}")
        self.field = field
        self.rule = rule


class Stopped(OctobrainError):
    """The call's client cancelled it or is gone: its embedding stopped, nothing written."""

    def __init__(self, done: int, total: int, unit: str) -> None:
        super().__init__(
            f"stopped: the call was cancelled or its client is gone; {done:,} of {total:,} "
            f"{unit} embedded, nothing written"
        )


class NotStarted(Stopped):
    """A read whose client cancelled it or went away while it waited for its lock: not run."""

    def __init__(self) -> None:
        OctobrainError.__init__(
            self, "stopped: the call was cancelled or its client is gone; it had not begun"
        )


class ConfigError(InvalidInput):
    """A configuration value broke a rule. The message names the file (or env var) and the key.

    `key` is the dotted key (`search.hyde.alpha`) or an env var name; empty when the whole file
    is at fault (unreadable, not TOML).
    """

    def __init__(self, key: str, rule: str, source: str | None = None) -> None:
        super().__init__(key or "config", rule)
        self.source = source
        self.args = (": ".join(part for part in (source, key, rule) if part),)


class EmbeddingError(OctobrainError, RuntimeError):
    """An embedder could not load or answer. The message says what to do about it."""


class StorageError(OctobrainError):
    """The store could not be written or opened (permissions, a full disk, an I/O fault).

    Raised before or instead of a commit, so the store keeps its last committed state."""
