"""RTF: its title and text, read by striprtf, in the code page the document names.

striprtf reads the control words (`\\par` a line break, a blank line between paragraphs
kept) and decodes the `\\'hh` and `\\uN` characters itself, by the document's `\\ansicpg`;
the bytes it is given must already be characters. A byte of 128 or more written as it is
(not `\\'hh`) is a character of that code page, or of UTF-8, which some tools write whatever
the header says: read as Latin-1, a `\\ansicpg1251` document's `Привет` was `Ïðèâåò`. The
title is the `\\info` group's `\\title`, which striprtf leaves out with the rest of `\\info`.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator

from octobrain.errors import InvalidInput

# The deepest an RTF's groups may nest: a document's are a few levels deep (a field's result
# in a table cell, ten or so); striprtf keeps ~85 bytes a level, so 50 MB of `{` took 4 GB.
RTF_DEPTH = 1000
# An escaped brace or backslash is text; `\binN` is followed by N raw bytes (a picture's),
# whose braces open no group.
_RTF_BRACE = re.compile(rb"\\bin(\d{1,10}) ?|\\[\\{}]|[{}]")
_CODE_PAGE = re.compile(rb"\\ansicpg(\d{1,5})")
_TITLE = re.compile(rb"\{\\title(?![a-zA-Z]) ?")
_TITLE_BYTES = 4096  # the most of a title group read: a title is a line


def title_and_text(data: bytes, uri: str) -> tuple[str, str]:
    """The title (the `\\info` group's `\\title`, or "") and text of RTF `data`. Groups
    nested past `RTF_DEPTH` are refused before it is read."""
    if data.count(b"{") > RTF_DEPTH:  # (only then can they nest that deep)
        _check_depth(data, uri)
    code_page = _code_page(data)
    try:  # (ASCII, as most RTF is, reads the same in either)
        text, raw = data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        text, raw = data.decode(code_page, errors="replace"), code_page
    title = ""
    if (found := _TITLE.search(data)) is not None:
        end = _group_end(data, found.end(), found.end() + _TITLE_BYTES)
        if end is not None:
            title = data[found.end() : end].decode(raw, errors="replace")
    return _text(title, code_page), _text(text, code_page)


def _text(rtf: str, code_page: str) -> str:
    """striprtf's reading of `rtf`; `code_page` decodes its `\\'hh` bytes unless it names
    its own."""
    from striprtf.striprtf import rtf_to_text

    return str(rtf_to_text(rtf, code_page, "replace"))  # type: ignore[no-untyped-call]


def _code_page(data: bytes) -> str:
    """The code page the RTF's header names (`\\ansicpg1251`: cp1251), else RTF's default
    for `\\ansi`, cp1252."""
    found = _CODE_PAGE.search(data, 0, 4096)
    try:
        name = codecs.lookup(f"cp{int(found.group(1))}").name if found else "cp1252"
    except LookupError:
        return "cp1252"
    # (an EBCDIC code page, `\ansicpg037`, would read the control words themselves wrong)
    return name if _ASCII.decode(name, errors="replace") == _ASCII.decode() else "cp1252"


_ASCII = bytes(range(128))


def _group_end(data: bytes, at: int, limit: int) -> int | None:
    """Where the group open at `at` closes (its `}`), if before `limit`."""
    depth = 0
    for brace in _braces(data, at, limit):
        if brace.group() == b"}" and depth == 0:
            return brace.start()
        depth += 1 if brace.group() == b"{" else -1
    return None


def _check_depth(data: bytes, uri: str) -> None:
    """Refuse RTF `data` whose groups nest past `RTF_DEPTH`."""
    depth = 0
    for brace in _braces(data, 0, len(data)):
        depth += 1 if brace.group() == b"{" else -1
        if depth > RTF_DEPTH:
            raise InvalidInput(
                "source",
                f"{uri}: its groups nest more than {RTF_DEPTH} deep, which no document's "
                "do; nothing was indexed",
            )


def _braces(data: bytes, at: int, limit: int) -> Iterator[re.Match[bytes]]:
    """Each `{` and `}` of `data[at:limit]` that opens or closes a group."""
    while (found := _RTF_BRACE.search(data, at, limit)) is not None:
        at = found.end()
        if found.group(1) is not None:
            at += int(found.group(1))  # (a picture's raw bytes, skipped)
        elif found.group() in (b"{", b"}"):
            yield found
