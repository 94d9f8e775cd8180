"""A PDF page's text from the pieces pypdf reads it in: footnote numbers and table cells.

pypdf's `extract_text` gives a page's text as one string; its `visitor_text` hands over each
piece of it with where it stands and how large it is drawn. From those, two things pypdf's
text lost are put back: a raised, smaller footnote number after a word is a marker
(`budget[^1]`, where the text read `budget1`), and the cells of a table row, which pypdf
parts by a space like any two words, are parted by ` | ` (`eu-west | platform team | 400`).
Nothing is measured that pypdf did not measure: a row's cells are the pieces that start
with the space pypdf put before them for the gap, and a line is a row only when the line
above or below has as many, at the same places (justified prose spreads its words as
widely, never in columns).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

# Where two lines' cells may start apart and still be one column, in points.
_COLUMN_SLACK = 1.0


class PageText:
    """A visitor for pypdf's `extract_text` (`visitor_text`): the pieces of text it gives, each
    with where its baseline starts and its size on the page (`text` reads them)."""

    def __init__(self) -> None:
        self.pieces: list[tuple[str, float, float, float]] = []  # text, x, height, size
        self.fixed: list[bool] = []  # whether each piece is drawn in a fixed-pitch font
        self._fonts: dict[int, bool] = {}

    def __call__(self, text: str, cm: Any, tm: Any, font: Any, size: float) -> None:
        if text:
            if id(font) not in self._fonts:
                self._fonts[id(font)] = _fixed_pitch(font)
            self.fixed.append(self._fonts[id(font)])
            # The text matrix times the page's (`cm`): where the piece stands, how tall.
            x = tm[4] * cm[0] + tm[5] * cm[2] + cm[4]
            height = tm[4] * cm[1] + tm[5] * cm[3] + cm[5]
            scale = math.hypot(tm[2] * cm[0] + tm[3] * cm[2], tm[2] * cm[1] + tm[3] * cm[3])
            self.pieces.append((text, x, height, abs(size * scale)))

    def whole_lines(self) -> set[str]:
        """The lines pypdf gave as one piece (their words one by one, spaces evened): where a
        row's cells drawn in one text object are not told apart (`pdf_columns.py`)."""
        wholes = set()
        for line in _lines(self.pieces):
            texts = [self.pieces[at][0] for at in line if self.pieces[at][0].strip()]
            if len(texts) == 1:
                wholes.add(" ".join(texts[0].split()))
        return wholes

    def text(self, extracted: str) -> str:
        """`extracted` (what `extract_text` returned with this visitor) with its footnote
        markers and table cells (see above); as it is when the pieces do not add up to it."""
        pieces = self.pieces
        if "".join(piece[0] for piece in pieces) != extracted:
            return extracted
        out = _marked(pieces)
        for line in _rows(pieces):
            for at in line:
                out[at] = " | " + out[at][1:]
        for at, fixed in enumerate(self.fixed):
            if not fixed and "  " in out[at]:
                out[at] = _SPACES.sub(" ", out[at])
        return _with_notes_last(pieces, out)


# Spaces in a row inside a line, not its indent: in a proportional font, pypdf's space for a
# wide gap (justified text's word spacing) besides the text's own. In a fixed-pitch font (a code
# sample's) they are the text's own, and kept.
_SPACES = re.compile(r"(?<=\S) {2,}(?=\S)")


def _fixed_pitch(font: Any) -> bool:
    """Whether a PDF font (its dictionary) is fixed-pitch: its descriptor says so, or it is a
    Courier or a Mono by name (the standard fonts have no descriptor)."""
    try:
        if font.get("/Subtype") == "/Type0":
            font = font["/DescendantFonts"][0].get_object()
        descriptor = font.get("/FontDescriptor")
        flags = int(descriptor.get_object().get("/Flags", 0)) if descriptor is not None else 0
        name = str(font.get("/BaseFont", ""))
    except Exception:  # a font dictionary missing what it should hold: read as proportional
        return False
    return bool(flags & 1) or "Courier" in name or "Mono" in name


def _marked(pieces: list[tuple[str, float, float, float]]) -> list[str]:
    """The pieces' texts, each footnote number raised and smaller after a word (`budget¹`)
    as a marker: `budget[^1]`. Not a power (`km²`, `CO₂`: a word of fewer than 3 letters
    before it). The space pypdf adds where the text comes back to its baseline after one is
    taken back out; the text's own runs of spaces (a code sample's) are kept."""
    out: list[str] = []
    body: tuple[float, float] | None = None  # the height and size of the line's text
    for at, (text, _, height, size) in enumerate(pieces):
        after = pieces[at + 1][0][:1] if at + 1 < len(pieces) else ""
        if (
            body is not None
            and _NOTE_MARK.fullmatch(text)
            and size <= 0.85 * body[1]
            and height >= body[0] - 0.05 * body[1]
            and _NOTED.search(out[-1] if out else "")
            and not after.isalnum()
        ):
            out.append(f"[^{text}]")
            continue
        before = pieces[at - 1] if at else None
        if text.startswith("  ") and before and "\n" not in before[0] and before[2] != height:
            text = text[1:]  # pypdf's space for coming back to the baseline, besides the text's
        out.append(text)
        if "\n" in text:
            body = None
        elif text.strip():
            body = (height, size)
    return out


_NOTE_MARK = re.compile(r"\d{1,3}|[*\u2020\u2021\u00a7\u00b6]{1,3}")  # 1, *, †, ‡, §, ¶
# What a note's number follows: the end of a word of 3 letters or more, or of a sentence.
_NOTED = re.compile(r"(?:[^\W\d_]{3}|[.,;:)\]\u201d\"'])\Z")


def _with_notes_last(pieces: list[tuple[str, float, float, float]], out: list[str]) -> str:
    """The page's text, the footnotes at its foot as `[^1]: …` lines after the rest of it.

    A footnote is a line among the page's last ones drawn smaller than its text, that starts
    with the number of a marker the page cites (`1 The budget resets.` after `budget[^1]`),
    and the lines under it that start where it or its text does. Without them, a sentence that
    runs on to the next page was cut by the page's notes."""
    cited = {text[2:-1] for text in out if text.startswith("[^") and text.endswith("]")}
    if not cited:
        return "".join(out)
    sizes: Counter[float] = Counter()
    for text, _, _, size in pieces:
        sizes[size] += len(text.strip())
    small = 0.95 * sizes.most_common(1)[0][0]
    lines = _lines(pieces)
    foot = len(lines)
    while foot and all(pieces[at][3] <= small for at in lines[foot - 1] if pieces[at][0].strip()):
        foot -= 1
    # Each note's marker and its lines' texts (joined at the end: added to its text line by
    # line, a note of 80,000 lines was copied at each, 2 s; a page's tokens allow 250,000).
    notes: list[tuple[str, list[str]]] = []
    column: tuple[float, float] | None = None  # where the last note's lines may start
    kept = [at for line in lines[:foot] for at in line]
    for line in lines[foot:]:
        text = "".join(out[at] for at in line).strip()
        first = next((pieces[at] for at in line if pieces[at][0].strip()), None)
        label = _NOTE_LINE.fullmatch(text)
        if first and label and label.group(1) in cited:
            notes.append((label.group(1), [label.group(2)]))
            # its next lines start under its number or its text (a hanging indent)
            column = (first[1] - _COLUMN_SLACK, first[1] + 2 * first[3])
        elif first and column and column[0] <= first[1] <= column[1]:
            notes[-1][1].append(text)
        else:
            kept.extend(line)  # (a footer under the notes)
            column = column if first is None else None
    if not notes:
        return "".join(out)
    body = "".join(out[at] for at in kept).rstrip()
    return body + "".join(f"\n[^{mark}]: {' '.join(texts)}" for mark, texts in notes)


# A note's line at a page's foot: its number (or symbol), a space, its text.
_NOTE_LINE = re.compile(rf"({_NOTE_MARK.pattern})\s+(\S.*)", re.DOTALL)


def _lines(pieces: list[tuple[str, float, float, float]]) -> list[list[int]]:
    """The places of the pieces of each line of the page, a line's break with it."""
    lines: list[list[int]] = [[]]
    for at, (text, _, _, _) in enumerate(pieces):
        lines[-1].append(at)
        if "\n" in text:
            lines.append([])
    return lines


def _rows(pieces: list[tuple[str, float, float, float]]) -> list[list[int]]:
    """For each table row among the page's lines, the places of the pieces that start its
    cells after the first, with the space pypdf put before each (alone, or leading it)."""
    lines: list[tuple[list[int], list[float], str]] = []  # parting pieces, cell starts, text
    parts: list[int] = []
    starts: list[float] = []
    first = ""
    for at, (text, x, _, _) in enumerate(pieces):
        if text[:1] == " " and starts:
            parts.append(at)
            starts.append(x)  # (a bare space stands where the next cell starts)
        elif text.strip() and not starts:
            starts.append(x)
            first = text
        if "\n" in text:
            lines.append((parts, starts, first))
            parts, starts, first = [], [], ""
    lines.append((parts, starts, first))
    rows = []
    for at, (parts, starts, first) in enumerate(lines):
        if not parts or (len(parts) == 1 and LABEL.fullmatch(first.strip())):
            continue  # one cell, or a numbered or bulleted item (a note, a list) and its text
        if any(
            0 <= near < len(lines) and _same_columns(lines[near][1], starts)
            for near in (at - 1, at + 1)
        ):
            rows.append(parts)
    return rows


def _same_columns(starts: list[float], others: list[float]) -> bool:
    return len(starts) == len(others) and all(
        abs(a - b) <= _COLUMN_SLACK for a, b in zip(starts, others, strict=True)
    )


# What numbers or bullets an item (a footnote at a page's foot, a list's item) with its text
# beside it: `1`, `2.`, `iv)`, `a.`, a symbol (`*`, `•`, `–`, a symbol font's private glyph).
LABEL = re.compile(r"(?i)(?:\d{1,3}|[ivxlc]{1,5}|[a-z])[.)]?|[^\w\s]{1,2}")
