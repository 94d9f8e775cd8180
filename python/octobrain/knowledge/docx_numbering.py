"""DOCX list numbers: the `1.`, `2.`, `a)` or `1.2.` Word shows before a numbered paragraph.

A paragraph is numbered by its own `w:numPr` or by its style's (`docx_styles.py`: the
style's own, or that of a style it is built on); the numbering part says, per
list and level, the format (`decimal`, `lowerLetter`, `bullet`, …), the first number and the
text around it (`%1.`, `%1.%2.`). Counters run per list: a level's counter goes on from its
last item, and an item at a level starts the levels under it afresh, as Word counts.
"""

from __future__ import annotations

from typing import Any

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_VAL = f"{_W}val"
_LEVELS = 9  # w:ilvl 0–8
# What a level prints before each of its paragraphs: its text (`%1.%2.`, `Article %1 –`) at
# most 60 characters, its start at most 9 digits (Word's dialog stops at 32,767). A 1 MB
# `w:lvlText`, or a `%1%1…` over a 4,000-digit `w:start`, was printed again before every
# paragraph of the list: a megabyte or more a 90-byte paragraph.
_LEVEL_TEXT_CHARS = 60
_NUMBER_DIGITS = 9


class Numbering:
    """The list markers of one DOCX's paragraphs, read in document order."""

    def __init__(self, document: Any, style_numbering: dict[str, tuple[str | None, int]]) -> None:
        # (numId, level) → (format, level text, start); numId → counters by level.
        self._levels: dict[tuple[str, int], tuple[str, str, int]] = {}
        self._counts: dict[str, list[int | None]] = {}
        self._style_num = style_numbering  # (numId, level) by paragraph style id
        from docx.opc.constants import RELATIONSHIP_TYPE as RT

        try:
            numbering = document.part.part_related_by(RT.NUMBERING).element
        except KeyError:  # no numbering part: no numbered paragraphs
            return
        abstract = {
            a.get(f"{_W}abstractNumId"): _level_defs(a) for a in numbering.iter(f"{_W}abstractNum")
        }
        for num in numbering.iter(f"{_W}num"):
            base = num.find(f"{_W}abstractNumId")
            levels = dict(abstract.get(None if base is None else base.get(_VAL), {}))
            for override in num.iter(f"{_W}lvlOverride"):
                level, start = (
                    counter(override.get(f"{_W}ilvl")),
                    override.find(f"{_W}startOverride"),
                )
                if level in levels and start is not None:
                    fmt, text, _ = levels[level]
                    levels[level] = (fmt, text, counter(start.get(_VAL)))
            for level, definition in levels.items():
                self._levels[(str(num.get(f"{_W}numId")), level)] = definition

    def marker(self, paragraph: Any, style_id: str | None) -> str | None:
        """The marker Word shows before `paragraph` ("1. ", "- " for a bullet), None when it is
        not a list item. Counts it: call once per paragraph, in order."""
        num_pr = paragraph.find(f"{_W}pPr/{_W}numPr")
        num_id, level = self._style_num.get(style_id or "", (None, 0))
        if num_pr is not None:
            found_id, found_level = num_pr.find(f"{_W}numId"), num_pr.find(f"{_W}ilvl")
            num_id = num_id if found_id is None else found_id.get(_VAL)
            level = level if found_level is None else counter(found_level.get(_VAL))
        definition = self._levels.get((str(num_id), level))
        if definition is None:  # numId 0 (numbering taken off) or an unknown list
            return None
        fmt, text, start = definition
        if fmt in ("bullet", "none"):
            return "- "
        counts = self._counts.setdefault(str(num_id), [None] * _LEVELS)
        now = counts[level]
        counts[level] = start if now is None else now + 1
        counts[level + 1 :] = [None] * (_LEVELS - level - 1)
        shown = text or f"%{level + 1}."
        for at in range(1, _LEVELS + 1):
            if f"%{at}" in shown:
                value = counts[at - 1]
                own = self._levels.get((str(num_id), at - 1), (fmt, "", 1))
                shown = shown.replace(f"%{at}", _format(own[0], own[2] if value is None else value))
        return shown.strip() + " "


def _level_defs(abstract: Any) -> dict[int, tuple[str, str, int]]:
    levels = {}
    for lvl in abstract.iter(f"{_W}lvl"):
        level = counter(lvl.get(f"{_W}ilvl"))
        fmt, text, start = (lvl.find(f"{_W}{name}") for name in ("numFmt", "lvlText", "start"))
        levels[level] = (
            "decimal" if fmt is None else str(fmt.get(_VAL, "decimal")),
            "" if text is None else str(text.get(_VAL, ""))[:_LEVEL_TEXT_CHARS],
            1 if start is None else counter(start.get(_VAL), 1),
        )
    return {level: d for level, d in levels.items() if 0 <= level < _LEVELS}


def counter(value: Any, default: int = 0) -> int:
    """A level or a start (DOCX's or ODT's): at most `_NUMBER_DIGITS` digits, else `default`."""
    if value is None or len(str(value)) > _NUMBER_DIGITS:
        return default
    try:
        return int(value)
    except ValueError:
        return default


_ROMAN = ((1000, "m"), (900, "cm"), (500, "d"), (400, "cd"), (100, "c"), (90, "xc"),
          (50, "l"), (40, "xl"), (10, "x"), (9, "ix"), (5, "v"), (4, "iv"), (1, "i"))  # fmt: skip


def roman(number: int) -> str:
    """`number` in lowercase Roman numerals (1–3999; others as digits)."""
    if not 0 < number < 4000:
        return str(number)
    out = []
    for value, letters in _ROMAN:
        count, number = divmod(number, value)
        out.append(letters * count)
    return "".join(out)


# The most times a list's letter is repeated (`zzzzzzzzzz` is 260); past it, digits: a
# lettered list starting at 10**12 was 38 billion letters an item.
_MOST_REPEATS = 10


def letters(number: int) -> str:
    """`number` as office suites letter a list: a, b, …, z, aa, bb, … (1–260; others as
    digits)."""
    if not 0 < number <= 26 * _MOST_REPEATS:
        return str(number)
    return chr(ord("a") + (number - 1) % 26) * ((number - 1) // 26 + 1)


def _format(fmt: str, number: int) -> str:
    """A counter as the level's format shows it (formats not listed: as digits)."""
    if fmt in ("lowerLetter", "upperLetter"):
        return letters(number).upper() if fmt == "upperLetter" else letters(number)
    if fmt in ("lowerRoman", "upperRoman"):
        return roman(number).upper() if fmt == "upperRoman" else roman(number)
    if fmt == "decimalZero" and 0 <= number < 10:
        return f"0{number}"
    return str(number)
