"""Table rows a PDF draws in one text object: their cells apart, as pypdf's layout mode shows.

A typesetter (TeX, ReportLab) draws a table's row as one text object, moving along the line
from cell to cell; pypdf's plain text gives each such row as one run of words
(`eu-west platform team 400`), and its pieces (`pdf_pieces.py`) carry no cell starts. pypdf's
layout mode places each piece at its column instead (`eu-west     platform team     400`). A
page with lines that may be rows (`_MAY_BE_ROWS`: two in a row of a few short words, not yet
parted) is read again in layout mode, and a line there is a row when the line above or below
has as many cells starting at the same columns; its plain line takes its cells, parted by
` | `.
"""

from __future__ import annotations

import logging
import re
from itertools import pairwise
from typing import Any

from octobrain.knowledge.pdf_pieces import LABEL

log = logging.getLogger(__name__)

# A line of a few short words that a table's row may be: 2 to 12 words, at most 60 characters.
_ROW_LIKE = re.compile(r"(?=.{3,60}\Z)\S+(?: \S+){1,11}")
# Where two cells part in layout mode's text: 3 spaces or more.
_GAP = re.compile(r" {3,}")
# Where two rows' cells may start apart and still be one column: 2 characters, or a tenth of
# how far along the line they start (layout mode places a piece by the widths of the
# characters before it, as near as its fixed character width measures them).
_COLUMN_SLACK = 2
_COLUMN_SHARE = 0.1


def with_cells(page: Any, text: str, wholes: set[str]) -> str:
    """`text` (a page's plain text) with the cells of its rows drawn in one text object parted
    by ` | `; as it is when no two lines in a row may be rows or layout mode cannot read it.
    Only `wholes` may be such rows: the lines pypdf gave as one piece (one of pieces apart
    is a row as `pdf_pieces` reads it, or none)."""
    lines = text.split("\n")
    if not _may_be_rows(lines, wholes):
        return text
    try:
        layout = page.extract_text(extraction_mode="layout", layout_mode_space_vertically=False)
    except Exception as exc:  # a font layout mode cannot measure: the plain text stands
        log.info("the PDF page's columns are not read: %s", exc)
        return text
    rows = _rows(layout.split("\n"))
    if not rows:
        return text
    keys = [" ".join(line.split()) for line in lines]
    return "\n".join(
        rows.get(key, line) if key in wholes else line
        for key, line in zip(keys, lines, strict=True)
    )


def _may_be_rows(lines: list[str], wholes: set[str]) -> bool:
    like = [
        " ".join(line.split()) in wholes and bool(_ROW_LIKE.fullmatch(line.strip()))
        for line in lines
    ]
    return any(a and b for a, b in pairwise(like))


def _rows(lines: list[str]) -> dict[str, str]:
    """Each row among layout mode's `lines` by its words, as its cells parted by ` | `."""
    cells = [_cells(line) for line in lines]
    rows = {}
    for at, (starts, texts) in enumerate(cells):
        if len(texts) < 2 or (len(texts) == 2 and LABEL.fullmatch(texts[0])):
            continue  # one cell, or a list's item and its bullet or number
        if any(
            0 <= near < len(cells) and _same_columns(cells[near][0], starts)
            for near in (at - 1, at + 1)
        ):
            rows[" ".join(" ".join(texts).split())] = " | ".join(texts)
    return rows


def _cells(line: str) -> tuple[list[int], list[str]]:
    """Where each cell of a layout mode line starts, and its text. (Each cell is found once,
    by its gap: looking for it in the rest of the line, cut anew for each, took 2 s for a
    line of 80,000 cells.)"""
    text = line.strip()
    indent = len(line) - len(line.lstrip())
    gaps = list(_GAP.finditer(text))
    begins = [0, *(gap.end() for gap in gaps)]
    ends = [*(gap.start() for gap in gaps), len(text)]
    return [indent + begin for begin in begins], [
        " ".join(text[begin:end].split()) for begin, end in zip(begins, ends, strict=True)
    ]


def _same_columns(starts: list[int], others: list[int]) -> bool:
    return len(starts) == len(others) and all(
        abs(a - b) <= max(_COLUMN_SLACK, _COLUMN_SHARE * max(a, b))
        for a, b in zip(starts, others, strict=True)
    )
