"""ODT list numbers: the `1.`, `a)` or `iv.` LibreOffice shows before a list item.

A list's style (`text:list-style`, automatic in `content.xml` or named in `styles.xml`) says
per level whether its items are numbered (`text:list-level-style-number`: format, start, the
text around the number) or bulleted. Counters run per list, as LibreOffice counts them: a list
that continues another (ODF 1.2: `text:continue-list="<xml:id>"`, or
`text:continue-numbering="true"` after a list of the same style) goes on from its last
numbers, nested levels too; an item at a level starts the levels under it afresh. An item
holding no paragraph of its own (only a nested list) shows no number; as LibreOffice's list
tree has it, it counts where it is the first at its level (a "phantom" parent: the items
after it and under it are numbered on from it, `2.`, `1.a.`), and counts none after an item
of its level (its nested items go on under that item, `1.b.`).
"""

from __future__ import annotations

import re
from typing import Any

from octobrain.knowledge.docx_numbering import counter, letters, roman

_TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
_STYLE = "{urn:oasis:names:tc:opendocument:xmlns:style:1.0}"
_XML_ID = "{http://www.w3.org/XML/1998/namespace}id"
_START = f"{_TEXT}start-value"
# A list style's number is printed before each of its items: its start at most 9 digits
# (`docx_numbering.counter`; LibreOffice's dialog stops at 65,535, Word's at 32,767), the
# text around it (`Step `, `)`) at most 40 characters each. A 4,000-digit start, or a 1 MB
# `num-prefix`, was printed again before every item: 80 to 20,000 times the bytes of the item.
_AFFIX_CHARS = 40
# The number as a whole, as LibreOffice 7.2+ writes it beside the prefix, suffix and levels
# shown (`%1%-%2%:`, Word's `%1-%2:`): at most 100 characters, so 33 numbers, each bounded
# as the counts are (15 characters at most: `docx_numbering.letters`, `roman`).
_LIST_FORMAT = (
    "{urn:org:documentfoundation:names:experimental:office:xmlns:loext:1.0}num-list-format"
)
_LIST_FORMAT_CHARS = 100
# Outline and list levels: ODF numbers headings 1–10, LibreOffice's lists have ten levels; a
# number shows at most ten levels' counts (a list nested 120 deep showing all its parents'
# printed 120 numbers before each item).
_OUTLINE_LEVELS = 10
# A level its style does not define, as LibreOffice reads it (its new rules' levels, 7.4): a
# list's numbered `1.` (shown `1.1)` under a level showing two), the heading numbering's with
# no number (left out of its sublevels' numbers: `1`, not `1.1`, under a level showing two).
_LIST_LEVEL_UNDEFINED = {f"{_STYLE}num-format": "1", f"{_STYLE}num-suffix": "."}
_OUTLINE_LEVEL_UNDEFINED = {f"{_STYLE}num-format": ""}


def list_styles(content: Any, styles: Any) -> dict[str, dict[int, Any]]:
    """The list styles by name: the automatic ones (`content.xml`) and the named ones
    (`styles.xml`), each as its levels' numbering (None: bullets), read once. Looked up
    among a style's levels for each list, 20,000 levels and 1,000 lists (1 MB) took 24 s."""
    found: dict[str, dict[int, Any]] = {}
    for root in (styles, content):
        if root is not None:
            for style in root.iter(f"{_TEXT}list-style"):
                name = str(style.get(f"{_STYLE}name", ""))
                if name not in found:
                    found[name] = _levels(style)
    return found


def _levels(list_style: Any) -> dict[int, Any]:
    """The numbering of each level of `list_style`, None for bullets (its first definition
    of a level counts; one it does not define numbered `1.`, as LibreOffice numbers it)."""
    levels: dict[int, Any] = {}
    for level in list_style:
        number = level.tag == f"{_TEXT}list-level-style-number"
        levels.setdefault(level_number(level.get(f"{_TEXT}level")), level if number else None)
    return _undefined(levels, _LIST_LEVEL_UNDEFINED)


def _undefined(levels: dict[int, Any], default: dict[str, str]) -> dict[int, Any]:
    """`levels`, each of the ten a style does not define read as `default`."""
    for level in range(1, _OUTLINE_LEVELS + 1):
        levels.setdefault(level, default)
    return levels


def _num_format(number_style: Any) -> str:
    """A numbered level's format (`1`, `a`, `i`; "" for none): `1` where the level names
    none, as LibreOffice reads it (its importer's default; LibreOffice writes it always,
    other programs may not), in lists and the heading numbering alike."""
    return str(number_style.get(f"{_STYLE}num-format", "1"))


def level_number(value: Any) -> int:
    """A start value, a level or a count: a count (`counter`'s bound), else 1."""
    return max(0, counter(value, 1))


class ListCounts:
    """The counters of a document's lists, in document order: each list's last number at
    each level, shared by the lists that continue it."""

    def __init__(self) -> None:
        self._by_id: dict[str, dict[int, int]] = {}
        self._last: tuple[str, dict[int, int]] | None = None  # the last list's style, counts

    def begin(self, element: Any, style: str) -> dict[int, int]:
        """The counters of the list `element` (not nested in another list; of list style
        `style`): those of the list it continues, else new ones. As LibreOffice reads it,
        `continue-list` naming a list not read yet continues none, and `continue-numbering`
        continues the list before only if its style is the same."""
        named = element.get(f"{_TEXT}continue-list")
        counts = self._by_id.get(str(named)) if named is not None else None
        numbering = element.get(f"{_TEXT}continue-numbering") == "true"
        if named is None and numbering and self._last is not None and self._last[0] == style:
            counts = self._last[1]
        if counts is None:
            counts = {}
        if element.get(_XML_ID) is not None:
            self._by_id.setdefault(str(element.get(_XML_ID)), counts)
        self._last = (style, counts)
        return counts


def count(counts: dict[int, int], depth: int, item: Any, number_style: Any) -> int:
    """The number of the list item `item` at `depth` (its own `text:start-value`, else one
    past its level's last, else its level's start), the levels under it started afresh."""
    if item.get(_START):
        number = level_number(item.get(_START))
    elif depth in counts:
        number = counts[depth] + 1
    else:  # (no start: 1)
        number = level_number(None if number_style is None else number_style.get(_START))
    counts[depth] = number
    for deeper in [level for level in counts if level > depth]:
        del counts[deeper]
    return number


def counts_item(counts: dict[int, int], depth: int, has_paragraph: bool) -> bool:
    """Whether a list item at `depth` is counted: one with a paragraph of its own, or one
    holding only a nested list that is the first at its level (LibreOffice's phantom)."""
    return has_paragraph or depth not in counts


def marker(levels: dict[int, Any], depth: int, counts: dict[int, int]) -> str:
    """`- ` for bullets, or the number of the item just counted at `depth` as its list style
    (`levels`) prints it (`1.`, `a)`, `iv.`; `1.2.` where the level shows its parents'
    numbers too, `text:display-levels`, each in its own level's format); a level numbered
    with no number (`num-format=""`) its prefix and suffix only, as LibreOffice shows it."""
    number_style = levels.get(depth)
    if number_style is None:
        return "- "
    if not _num_format(number_style):
        return _no_number(number_style)
    return _number(levels, depth, counts, from_start=False)


def _no_number(number_style: Any) -> str:
    """What a level numbered with no number shows: only the text around its number, a space
    after ("" where there is none): its list format's before its first `%1%` and after its
    last (`.` of `%1%.%2%.`, as LibreOffice reads them from it), else its prefix and suffix."""
    whole = str(number_style.get(_LIST_FORMAT) or "")[:_LIST_FORMAT_CHARS]
    numbers = [*_LEVEL_TOKEN.finditer(whole)] if "%" in whole else []
    if numbers:
        around = whole[: numbers[0].start()] + whole[numbers[-1].end() :]
    else:
        around = _affix(number_style, "prefix") + _affix(number_style, "suffix")
    return f"{around} " if around else ""


def _number(levels: dict[int, Any], depth: int, counts: dict[int, int], *, from_start: bool) -> str:
    """The number of what was just counted at `depth` as its level (`levels[depth]`, a
    numbered one) prints it: its count, after those of as many levels above it as it shows
    (`text:display-levels`, ten at most, as LibreOffice has), each in its own level's format
    (a bulleted one's as digits; one numbered with no number left out, as LibreOffice does:
    `1.i.`), a level not counted yet as its start (`from_start`) or 1; and the text around
    it, a space after."""
    style = levels[depth]
    whole = str(style.get(_LIST_FORMAT) or "")[:_LIST_FORMAT_CHARS]
    if "%" in whole:  # (LibreOffice 7.2+: the number as a whole, `%1%-%2%:`)
        return _as_listed(whole, levels, depth, counts, from_start=from_start)
    shown = level_number(style.get(f"{_TEXT}display-levels") or 1)
    shows = min(depth, _OUTLINE_LEVELS, max(1, shown))
    parts = []
    for level in range(depth - shows + 1, depth + 1):
        own = levels.get(level)
        form = "1" if own is None else _num_format(own)
        if not form:
            continue
        unset = level_number(own.get(_START)) if from_start and own is not None else 1
        parts.append(_shown(form, counts.get(level, unset)))
    return f"{_affix(style, 'prefix')}{'.'.join(parts)}{_affix(style, 'suffix')} "


def _as_listed(
    whole: str, levels: dict[int, Any], depth: int, counts: dict[int, int], *, from_start: bool
) -> str:
    """The number of what was just counted at `depth` as the level's list format (`whole`)
    prints it, as Word and LibreOffice now do (7.4 replaced only the first of each): each
    `%1%` … `%10%`, read left to right, the count of that level (up to `depth`, the ten above
    it at most; one of a level further down left as written) in that level's format; one of a
    level numbered with no number (`num-format=""`) left out with the text after it, up to the
    next `%`; the rest as written, a space after."""
    lowest = max(1, depth - _OUTLINE_LEVELS + 1)

    def replaced(token: re.Match[str]) -> str:
        level = int(token.group(1))
        if not lowest <= level <= depth:
            return token.group()
        own = levels.get(level)
        form = "1" if own is None else _num_format(own)
        if not form:
            return ""
        unset = level_number(own.get(_START)) if from_start and own is not None else 1
        return _shown(form, counts.get(level, unset)) + token.group(2)

    return f"{_LIST_TOKEN.sub(replaced, whole)} "


# A level's place in a list format, with the text after it up to the next `%` (left out with
# the number of a level that shows none).
_LIST_TOKEN = re.compile(r"%(10|[1-9])%([^%]*)")
_LEVEL_TOKEN = re.compile(r"%(?:10|[1-9])%")


def _shown(form: str, number: int) -> str:
    """`number` in the format `form` (`1`, `a`, `A`, `i`, `I`): only that one made."""
    if form in ("a", "A"):
        return letters(number) if form == "a" else letters(number).upper()
    if form in ("i", "I"):
        return roman(number) if form == "i" else roman(number).upper()
    return str(number)


def _affix(number_style: Any, side: str) -> str:
    return str(number_style.get(f"{_STYLE}num-{side}", ""))[:_AFFIX_CHARS]


class Outline:
    """The numbers LibreOffice shows before headings (Tools > Heading Numbering): the levels
    of the outline style (`text:outline-style` in `styles.xml`), each a format, a start, the
    text around it and how many levels it shows (`text:display-levels`: 3 shows `2.1.4`).
    Headings are counted in document order as a list's items are: a heading goes on from the
    last of its level (or its own `text:start-value` when it restarts the numbering), the
    levels under it start afresh; one marked a list header (`text:is-list-header`) shows no
    number and counts none. By default LibreOffice numbers no level (`num-format=""`); a
    level so shows the text around its number only (`(` and `)`: `()`), as a list's does,
    and one naming no format is numbered `1` (`_num_format`): an outline style showing no
    text on any level shows nothing, and counts nothing. A level it does not define is
    numbered with no number: its headings bare, left out of its sublevels' numbers."""

    def __init__(self, styles: Any) -> None:
        self._levels: dict[int, Any] = {}  # each level's style (its first definition counts)
        self._counts: dict[int, int] = {}
        outline = None if styles is None else next(styles.iter(f"{_TEXT}outline-style"), None)
        for style in () if outline is None else outline:
            if style.tag == f"{_TEXT}outline-level-style":
                self._levels.setdefault(level_number(style.get(f"{_TEXT}level")), style)
        self._numbered = any(
            _num_format(level) or _no_number(level) for level in self._levels.values()
        )
        _undefined(self._levels, _OUTLINE_LEVEL_UNDEFINED)

    def number(self, heading: Any, depth: int) -> str:
        """The number shown before `heading`, of outline level `depth` ("" for none), with
        the space after it. Counts it: call once per heading, in order."""
        if not self._numbered or not 0 < depth <= _OUTLINE_LEVELS:
            return ""  # (LibreOffice's default outline numbers no level: nothing to count)
        if heading.get(f"{_TEXT}is-list-header") == "true":
            return ""
        if heading.get(f"{_TEXT}restart-numbering") == "true" and not heading.get(_START):
            self._counts.pop(depth, None)
        own = self._levels[depth]
        count(self._counts, depth, heading, own)
        if not _num_format(own):
            return _no_number(own)
        return _number(self._levels, depth, self._counts, from_start=True)
