"""`read` pages and extracted text against their plain definitions, on any text: a page is the
lines `split_lines` gives from `from_line` on, as many whole ones as fit; `normalise` strips
each line's trailing blanks as `str.rstrip` does. (Both now work without a list of every line:
on a 50 MB file that list took 4 s and 1 GB for each 64 KiB page.)"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from octobrain.errors import InvalidInput
from octobrain.knowledge import pages
from octobrain.knowledge.extract import DocType, Document, normalise
from octobrain.knowledge.pages import page, split_lines

TEXT = st.text(alphabet=st.sampled_from([*"ab \n\r\t\x0b\x1c\x00", "é", "€", "\xa0"]), max_size=80)


def reference(text: str, start: int, max_bytes: int | None) -> tuple[object, ...] | None:
    lines = split_lines(text)
    if start > max(len(lines), 1):
        return None
    shown: list[str] = []
    used, cut = 0, False
    for line in lines[start - 1 :]:
        size = len(line.encode()) + (1 if shown else 0)
        if max_bytes is not None and used + size > max_bytes:
            if not shown:
                shown, cut = [line.encode()[:max_bytes].decode("utf-8", "ignore")], True
                used = len(shown[0].encode())
            break
        shown.append(line)
        used += size
    return "\n".join(shown), start - 1 + len(shown), len(lines), used, cut


@settings(max_examples=400, deadline=None)
@given(TEXT, st.integers(1, 12), st.sampled_from([None, 1, 3, 10, 40]))
def test_a_page_is_the_lines_split_lines_gives(
    text: str, start: int, max_bytes: int | None
) -> None:
    pages._BLOCK = 5  # line breaks counted across many blocks
    try:
        want = reference(text, start, max_bytes)
        doc = Document("file:///a.md", "A", DocType.TEXT, text)
        if want is None:
            with pytest.raises(InvalidInput, match="^from_line: is past the end"):
                page(doc, start, max_bytes)
            return
        got = page(doc, start, max_bytes)
        assert (got.text, got.last_line, got.total_lines, got.shown_bytes, got.cut) == want
    finally:
        pages._BLOCK = 1 << 20


@settings(max_examples=400, deadline=None)
@given(TEXT)
def test_normalise_strips_each_line_as_rstrip_does(text: str) -> None:
    plain = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    plain = "\n".join(line.rstrip() for line in plain.split("\n"))
    assert normalise(text) == re.sub(r"\n{3,}", "\n\n", plain).strip()


def test_a_line_or_byte_number_sent_as_a_whole_float_is_that_integer() -> None:
    # `limit: 1.0` was taken as 1 (JSON Schema's "integer" holds it) while `from_line: 2.0`
    # was refused: one rule for every integer a client sends.
    doc = Document("file:///a.md", "A", DocType.TEXT, "one\ntwo\nthree\n")
    assert page(doc, 2.0).text == page(doc, 2).text == "two\nthree"
    assert page(doc, 1, 3, from_byte=1.0).text == page(doc, 1, 3, from_byte=1).text
    for bad, field in ((1.5, "from_line"), (0.0, "from_line"), (True, "from_line")):
        with pytest.raises(InvalidInput, match=f"^{field}: must be an integer"):
            page(doc, bad)
    with pytest.raises(InvalidInput, match="^from_byte: must be an integer ≥ 0, got -1"):
        page(doc, 1, 3, from_byte=-1.0)
