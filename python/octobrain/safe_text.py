"""Text a caller gives and octobrain prints back: the rules a text field is checked by (its
trimmed UTF-8 length, no NUL or lone surrogate, visible, one line, no bidirectional overrides),
and stored text made safe to print (no control character a terminal acts on, each line of it
indented in an answer, JSON with the C1 codes escaped).

Each check fails with `InvalidInput`, naming the field and the rule it broke.
"""

from __future__ import annotations

import re
import unicodedata

from octobrain.errors import InvalidInput, cut_middle, json_type


def byte_len(text: str) -> int:
    """`text`'s length in UTF-8 (a lone surrogate as the three bytes it would take)."""
    return len(text.encode("utf-8", errors="surrogatepass"))


def check_text(field_name: str, value: object, bounds: tuple[int, int]) -> str:
    """A string whose trimmed UTF-8 length lies within `bounds` (inclusive); returns it trimmed."""
    text = plain_string(field_name, value)
    low, high = bounds
    size = byte_len(text)
    if not low <= size <= high:
        raise InvalidInput(
            field_name, f"must be {low}–{high} bytes of UTF-8 after trimming, got {size}"
        )
    return text


# Characters that show nothing on their own: spaces and line breaks, controls, format characters
# (zero-width space and joiners, word joiner, BOM, bidi marks), combining marks, and the filler
# letters that render blank.
_BLANK_CATEGORIES = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf", "Mn", "Me"})
_BLANK_LETTERS = frozenset("\u115f\u1160\u2800\u3164\uffa0")


def shows_something(text: str) -> bool:
    """Whether `text` holds a character that shows (not only spaces, zero-width or format
    characters, combining marks or blank filler letters)."""
    return any(
        ch not in _BLANK_LETTERS and unicodedata.category(ch) not in _BLANK_CATEGORIES
        for ch in text
    )


def check_visible(field_name: str, text: str) -> str:
    """Refuse a required text that shows nothing: "\u200b\u200b" is 6 bytes of UTF-8, past a
    title's minimum, and prints as an empty title."""
    if shows_something(text):
        return text
    raise InvalidInput(
        field_name, "must hold visible text, not only spaces, zero-width or format characters"
    )


def same_text_key(text: str) -> str:
    """`text` as two spellings of one text compare: without format characters (zero-width
    space and joiners, word joiner, BOM, soft hyphen, bidi marks), in NFC, trimmed: "Deploy",
    a zero-width space and " plan" is "Deploy plan"; "café" composed and decomposed is one."""
    seen = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    return unicodedata.normalize("NFC", seen).strip()


def spellings(text: str) -> list[str]:
    """The spellings of `text` a lookup by equality tries: as given, in NFC and NFD, and its
    `same_text_key` in both. (A stored spelling with invisible characters `text` lacks is not
    among them.)"""
    key = same_text_key(text)
    forms = (text, key, *(unicodedata.normalize(f, t) for f in ("NFC", "NFD") for t in (text, key)))
    return list(dict.fromkeys(forms))


LABEL_BYTES = 256  # a session's role or id (a UUID is 36)


def check_label(field_name: str, value: object) -> str:
    """A session's id or role: one line of at most `LABEL_BYTES` bytes without control
    characters, "" (none) or with a character that shows (it is stored on rows and printed
    back; " " and "\u0301" named a session no one could see the name of)."""
    text = check_text(field_name, value, (0, LABEL_BYTES))
    if not text.isprintable():
        raise InvalidInput(field_name, "must not contain control characters or line breaks")
    if value != "" and not shows_something(text):
        raise InvalidInput(
            field_name, "must hold visible text, not only spaces or combining marks, or be empty"
        )
    return text


def plain_string(field_name: str, value: object) -> str:
    """A trimmed string without NUL or lone surrogates (neither survives storage intact)."""
    if not isinstance(value, str):
        raise InvalidInput(field_name, f"must be a string, got {json_type(value)}")
    if "\x00" in value:
        raise InvalidInput(field_name, "must not contain NUL characters")
    if not is_unicode(value):
        raise InvalidInput(field_name, "must be valid Unicode (lone surrogates are not allowed)")
    return value.strip()


def is_unicode(text: str) -> bool:
    """No lone surrogate (what JSON's `\\udcff` or a command line's non-UTF-8 bytes give):
    the text can be stored and written as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` without control characters but tab and newline (a terminal acts on ESC, BEL
    and the C1 codes: window titles, clipboard writes, disguised links), a lone surrogate as
    "?"."""
    if not text.isprintable():
        text = _CONTROL.sub("", text)
    return text.encode("utf-8", errors="replace").decode("utf-8")


# What `str.splitlines` breaks a line at: a stored title, tag or path printed with one of these
# would start a line of its own in an answer, where it could pass for another result.
_LINE_BREAK = re.compile("[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
# A run of spaces holding a line break, taken whole. It starts where a run does (`(?<!\s)`:
# each break is a space to `\s`, so no match starts within a run): tried at every space of a
# run without one, it read the rest of the run from each (16,000 spaces then "x": 1.2 s).
_AROUND_BREAKS = re.compile("(?<!\\s)\\s*[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]\\s*")


def one_line(text: str) -> str:
    """`text` on one line: each line break, with the spaces around it, as one space (for a
    single-line field stored before line breaks were refused in it, or imported)."""
    return _AROUND_BREAKS.sub(" ", text) if _LINE_BREAK.search(text) else text


def client_text(text: str, chars: int = 100) -> str:
    """A client's own text (a name, a key, a method) as an answer quotes it: cut in the
    middle to `chars`, printable, on one line, so that however long or however it is broken
    it is one short line that nothing reads as an order or another result."""
    return one_line(printable(cut_middle(text, chars)))


def glimpse(text: str, chars: int = 80) -> str:
    """The start of a stored text as a preview line shows it (which of several memories of one
    title is which): on one line, printable, cut to `chars` with "…"."""
    flat = one_line(printable(text)).strip()
    return flat if len(flat) <= chars else flat[: chars - 1].rstrip() + "…"


QUOTE = "   "  # before each line of stored text in an answer


def quoted(text: str) -> str:
    """Stored text as the lines of an answer show it: each line indented, so that no line a
    memory or a document holds starts where the answer's own lines do (a content of
    "\n\n2. [CONFIRMED] … ID: …" read as a result of its own)."""
    return "\n".join(QUOTE + line if line.strip() else "" for line in text.splitlines())


# Bidirectional embeddings, overrides and isolates: in a one-line field they reorder what a
# terminal shows around them ("Trojan Source"), so a title or a tag can print as another one.
# The marks (U+200E, U+200F, U+061C) that right-to-left text may need do not, and are kept.
_BIDI_CONTROL = re.compile("[\u202a-\u202e\u2066-\u2069]")


def on_terminal(text: str) -> str:
    """`printable(text)` with each bidirectional embedding, override and isolate shown by its
    code point (`<U+202E>`): printed raw, one reversed the rest of its terminal line, so a
    stored "\u202eyadnom no" read "on monday". What text output prints of stored text."""
    text = printable(text)
    if not _BIDI_CONTROL.search(text):
        return text
    return _BIDI_CONTROL.sub(lambda m: f"<U+{ord(m.group()):04X}>", text)


def check_one_line(field_name: str, value: object) -> None:
    """Refuse a line break, or a bidirectional override, in a single-line field (a title, a
    tag, a file path)."""
    if not isinstance(value, str):
        return
    if _LINE_BREAK.search(value):
        raise InvalidInput(field_name, "must be one line (no line breaks)")
    if _BIDI_CONTROL.search(value):
        raise InvalidInput(
            field_name,
            "must not hold bidirectional embedding, override or isolate characters "
            "(U+202A–U+202E, U+2066–U+2069): they reorder how it prints",
        )


def without_bidi(text: str) -> str:
    """`text` without bidirectional embeddings, overrides and isolates (a name read from a
    chat, where they only reorder how it prints)."""
    return _BIDI_CONTROL.sub("", text) if _BIDI_CONTROL.search(text) else text


def check_lines(field_name: str, values: object) -> None:
    """`check_one_line` for each string of a list field, named by its place in the list."""
    if isinstance(values, list | tuple):
        for i, value in enumerate(values):
            check_one_line(f"{field_name}[{i}]", value)
