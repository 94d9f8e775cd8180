"""DOCX paragraph styles, read in one walk of the styles part: each style's name, the
default, and what a style gives its paragraphs from itself or from the styles it is built on
(`w:basedOn`): an outline level (a heading, as Word lists it) and a list numbering (`w:numPr`,
numbered as its list says)."""

from __future__ import annotations

from typing import Any, NamedTuple

from octobrain.knowledge.docx_numbering import counter

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_VAL = f"{_W}val"
# Word's outline levels: 0–8 a heading's (1–9), 9 body text.
BODY_TEXT = 9
W_OUTLINE = f"{_W}outlineLvl"
# The most styles followed up a `w:basedOn` chain (Word stops a chain that loops).
_MOST_BASES = 32


class Styles(NamedTuple):
    """A DOCX's paragraph styles: names by id, the default's name, the outline level below
    body text of those that have one, and the numbering (numId, level) of those numbered."""

    names: dict[str, str]
    default: str
    outlines: dict[str, int]
    numbering: dict[str, tuple[str | None, int]]


def level_of(outline: Any) -> int:
    """The level a `w:outlineLvl` gives (body text past 9, or where it is not a number)."""
    return min(BODY_TEXT, counter(outline.get(_VAL), BODY_TEXT))


def read_styles(styles: Any) -> Styles:
    """The styles of the styles part `styles`, each read once.

    Not python-docx's lookups: it finds a paragraph's style among all the styles (and the
    default among them again) for every paragraph, 5,000 styles and 5,000 paragraphs took
    282 s. As it does, the first style of an id counts and one of another type gives the
    default; a style's own outline level or numbering, else the nearest of its bases' (a
    numId 0 takes numbering off, a level 9 makes body text)."""
    from docx.styles import BabelFish

    kinds: dict[str, tuple[str | None, str]] = {}
    default = ""
    bases: dict[str, str] = {}
    own_outline: dict[str, int] = {}
    own_numbering: dict[str, tuple[str | None, int]] = {}
    for style in styles.iterchildren(f"{_W}style"):
        kind, style_id = style.get(f"{_W}type"), str(style.get(f"{_W}styleId") or "")
        name_element = style.find(f"{_W}name")
        name = "" if name_element is None else str(name_element.get(_VAL, ""))
        name = BabelFish.internal2ui(name)  # `heading 1` is `Heading 1`
        if kind == "paragraph" and style.get(f"{_W}default") in ("1", "true", "on"):
            default = name  # the last default counts
        if not style_id or style_id in kinds:
            continue
        kinds[style_id] = (kind, name)
        base = style.find(f"{_W}basedOn")
        if base is not None:
            bases[style_id] = str(base.get(_VAL, ""))
        properties = style.find(f"{_W}pPr")
        if properties is None:
            continue
        level, num_pr = properties.find(W_OUTLINE), properties.find(f"{_W}numPr")
        if level is not None:
            own_outline[style_id] = level_of(level)
        if num_pr is not None:
            num_id, num_level = num_pr.find(f"{_W}numId"), num_pr.find(f"{_W}ilvl")
            own_numbering[style_id] = (
                None if num_id is None else num_id.get(_VAL),
                0 if num_level is None else counter(num_level.get(_VAL)),
            )
    names = {key: name for key, (kind, name) in kinds.items() if kind == "paragraph"}
    outlines = {
        style_id: level
        for style_id in kinds
        if (level := inherited(style_id, own_outline, bases, BODY_TEXT)) < BODY_TEXT
    }
    numbering = {
        style_id: numbered
        for style_id in kinds
        if (numbered := inherited(style_id, own_numbering, bases, None)) is not None
    }
    return Styles(names, default, outlines, numbering)


def inherited(style_id: str, own: dict[str, Any], bases: dict[str, str], default: Any) -> Any:
    """What the style `style_id` has in `own`, else the nearest of its bases (`bases`: each
    style's, by name) that has (up `_MOST_BASES` steps at most: a loop ends), else `default`.
    A DOCX's `w:basedOn`, an ODT's `style:parent-style-name`."""
    at, steps = style_id, 0
    while at not in own and at in bases and steps < _MOST_BASES:
        at, steps = bases[at], steps + 1
    return own.get(at, default)
