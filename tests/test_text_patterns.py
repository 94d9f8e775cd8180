"""Patterns run over text a document or a store holds: the same answers as the patterns they
replace, on ordinary and random text, in time linear in the text (a megabyte of spaces)."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from octobrain.knowledge.docx_notes import page_count_only
from octobrain.safe_text import one_line

# The patterns as they were: right, and quadratic on a long run of spaces.
_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
_OLD_AROUND_BREAKS = re.compile(f"\\s*[{_BREAKS}][\\s\x1c\x1d\x1e]*")
_OLD_PAGE_COUNT = re.compile(r"(?i)(?:page)?\s*\d*\s*(?:(?:of|/)\s*\d+)?")

# Spaces and breaks of each kind, digits, and the words of a page count.
PIECES = [*_BREAKS, " ", "\t", "\u3000", "\x1f", "a", "x", "3", "12", "Page", "pAGE", "of", "/"]
TEXTS = st.one_of(st.lists(st.sampled_from(PIECES), max_size=30).map("".join), st.text())
MEGABYTE = 1_048_576


@given(TEXTS)
def test_one_line_replaces_each_break_and_its_spaces_as_before(text: str) -> None:
    assert one_line(text) == _OLD_AROUND_BREAKS.sub(" ", text)


@given(TEXTS)
def test_a_page_count_is_told_as_before(text: str) -> None:
    assert page_count_only(text) == (_OLD_PAGE_COUNT.fullmatch(text.strip()) is not None)


def test_one_line_of_a_megabyte_of_spaces_then_a_break() -> None:
    # Each space of a run without a break was a start the rest of the run was read from:
    # 16,000 spaces then "x" took 1.2 s, a megabyte of them an hour.
    spaces = " " * MEGABYTE
    assert one_line(f"{spaces}x\n") == f"{spaces}x "
    assert one_line(f"a\n{spaces}x{spaces}\u2028\tb") == "a x b"  # (a break takes its spaces)


def test_a_footer_of_a_megabyte_of_spaces_is_no_page_count() -> None:
    # The spaces either side of an absent number were split every way: "Page", 16,000
    # spaces and "x" took 5.5 s, a megabyte of spaces hours.
    spaces = " " * MEGABYTE
    assert not page_count_only(f"Page{spaces}x")
    assert page_count_only(f"Page{spaces}3{spaces}of{spaces}9")
