"""DOCX footnotes, endnotes, comments and running headers and footers: text Word keeps
outside the body.

python-docx reads none of the notes (their parts are plain parts to it); their XML is parsed
from the part python-docx holds, with its own parser. A note is cited where its reference
stands (`[^1]`, endnotes `[^i]`, as Word numbers them: in the order they are cited) and its
text follows the section that cites it (`[^1]: …`), endnotes at the end. A reviewer's comment
shows no marker in the text, as Word prints none; it follows the section it is made in, after
the footnotes (`Comment (author): …`; read from its part as the notes are, its paragraphs as
the body's, rather than through python-docx's `Document.comments`, which adds an empty part
to a document that has none). Headers and footers repeat on every page: each distinct line
is read once, headers first and footers last.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from octobrain.knowledge.docx_numbering import roman

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_R_ID = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"
FOOTNOTE, ENDNOTE = f"{_W}footnoteReference", f"{_W}endnoteReference"
COMMENT = f"{_W}commentReference"
_AUTHOR_CHARS = 80  # of a comment's author, in its label
# A footer line that only counts pages ("3", "Page 3 of 9") says nothing worth finding. Each
# run possessive (`*+`: what follows one cannot start with what it takes): the two runs of
# spaces about an absent number were split every way before "Page", spaces and "x" failed
# (16,000 spaces: 5.5 s).
_PAGE_COUNT = re.compile(r"(?i)(?:page)?\s*+\d*+\s*+(?:(?:of|/)\s*+\d++)?")


class Notes:
    """The footnotes, endnotes and comments of one DOCX, numbered as they are cited."""

    def __init__(self, document: Any) -> None:
        from docx.opc.constants import RELATIONSHIP_TYPE as RT

        self._texts: dict[str, dict[str, Any]] = {}
        for tag, reltype, name in ((FOOTNOTE, RT.FOOTNOTES, "footnote"),
                                   (ENDNOTE, RT.ENDNOTES, "endnote"),
                                   (COMMENT, RT.COMMENTS, "comment")):  # fmt: skip
            self._texts[tag] = {
                str(note.get(f"{_W}id")): note for note in _part_root(document, reltype, name)
            }
        self._cited: dict[str, list[tuple[str, Any]]] = {FOOTNOTE: [], ENDNOTE: [], COMMENT: []}
        self._taken = {FOOTNOTE: 0, ENDNOTE: 0, COMMENT: 0}
        # The marker of each note cited, by (kind, id). A note citing itself twice, read anew
        # at each citation, was read 2**n times after n headings (30 headings: a billion).
        self._markers: dict[tuple[str, str], str] = {}

    def cite(self, reference: Any) -> str:
        """The marker the text shows where `reference` (a `w:footnoteReference`,
        `w:endnoteReference` or `w:commentReference`) stands, its note counted; "" for a note
        the document does not hold, and for a comment."""
        tag = reference.tag
        key = str(reference.get(f"{_W}id"))
        note = self._texts[tag].get(key)
        if note is None:
            return ""
        if (tag, key) in self._markers:  # read once, as Word cites it once
            return self._markers[tag, key]
        cited = self._cited[tag]
        number = len(cited) + 1
        if tag == COMMENT:
            author = " ".join(str(note.get(f"{_W}author") or "").split())[:_AUTHOR_CHARS]
            cited.append((f"Comment ({author})" if author else "Comment", note))
            self._markers[tag, key] = ""
            return ""
        marker = f"[^{number}]" if tag == FOOTNOTE else f"[^{roman(number)}]"
        cited.append((marker, note))
        self._markers[tag, key] = marker
        return marker

    def take(self, tag: str) -> Iterator[tuple[str, Any]]:
        """The notes of kind `tag` cited since the last `take` of it: (its label, its element:
        `w:footnote`, `w:endnote` or `w:comment`)."""
        cited = self._cited[tag]
        start, self._taken[tag] = self._taken[tag], len(cited)
        yield from cited[start:]


def _part_root(document: Any, reltype: str, name: str) -> Iterator[Any]:
    """The note elements (`w:footnote`, `w:endnote`, `w:comment`) of the document's part of
    `reltype`."""
    from docx.oxml import parse_xml

    try:
        part = document.part.part_related_by(reltype)
    except KeyError:
        return
    root = parse_xml(part.blob)
    for note in root.iterchildren(f"{_W}{name}"):
        if note.get(f"{_W}type") in (None, "normal"):  # not the separator lines
            yield note


def running_parts(document: Any, reference: str) -> Iterator[Any]:
    """The root elements of the headers (`reference` "headerReference") or footers
    ("footerReference") the document's sections name, each once, in order."""
    seen: set[str] = set()
    related = document.part.related_parts
    for section in document.element.body.iter(f"{_W}sectPr"):
        for ref in section.iterchildren(f"{_W}{reference}"):
            rid = str(ref.get(_R_ID))
            root = getattr(related.get(rid), "element", None)  # (a part of another type: none)
            if rid in seen or root is None:
                continue
            seen.add(rid)
            yield root


def page_count_only(text: str) -> bool:
    """Whether a header or footer line only counts pages."""
    return _PAGE_COUNT.fullmatch(text.strip()) is not None
