"""DOCX documents: the text of a Word file's paragraphs, headings, lists and tables, read
from python-docx's XML elements within the bounds on what the package unpacks to; with its
list numbers (`docx_numbering.py`), notes, headers and footers (`docx_notes.py`)."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from typing import Any

from octobrain.errors import InvalidInput
from octobrain.knowledge.docx_notes import (
    COMMENT,
    ENDNOTE,
    FOOTNOTE,
    Notes,
    page_count_only,
    running_parts,
)
from octobrain.knowledge.docx_numbering import Numbering
from octobrain.knowledge.docx_styles import BODY_TEXT, W_OUTLINE, level_of, read_styles
from octobrain.knowledge.unpacked import MARKUP_BYTES, Unpacked, open_package
from octobrain.safe_text import shows_something

# The most table rows and cells read from one DOCX (a row counts as one besides its cells):
# reading one costs little, this bounds what the XML cap still lets through (6 MiB of bare
# `<w:tc/>` is 900,000 cells). Word writes 90 bytes or more a cell, so no DOCX within
# `MARKUP_BYTES` Word wrote reaches it.
DOCX_TABLE_CELLS = 200_000


def title_and_text(data: bytes, max_bytes: int, uri: str) -> tuple[str, str]:
    """The title and text of a DOCX: its paragraphs, headings as `#` lines, list items as
    `- ` or numbered (`2. `) lines, tables a line a row, each section's footnotes and
    reviewers' comments after it, endnotes at the end, and its headers' and footers' lines
    once each, first and last;
    `Unpacked` when its parts would unpack past `max_bytes` or its XML past `MARKUP_BYTES`;
    InvalidInput naming `uri` when its zip's list of files is past its bound."""
    import docx

    with open_package(data, uri, "DOCX") as package:  # a part never inflates past its size
        parts = package.infolist()
        size = sum(part.file_size for part in parts)
        if size > max_bytes:
            raise Unpacked("the DOCX package", size)
        markup = _docx_markup(package, parts)
    if markup > MARKUP_BYTES:
        raise Unpacked("the DOCX's XML", markup, MARKUP_BYTES)
    document = docx.Document(io.BytesIO(data))
    styling = read_styles(document.styles.element)  # (one walk of the styles part)
    styles, default, outlines = styling.names, styling.default, styling.outlines
    numbering = Numbering(document, styling.numbering)
    notes = Notes(document)
    body = document.element.body
    _drop_shadow_text(body)
    blocks = _running_lines(document, "headerReference")
    cells = 0
    code: list[str] = []  # the lines of the code block being read
    for item in _docx_content(body):
        if item.tag == _W_TBL:
            end_code(blocks, code)
            cells = _docx_rows(item, blocks, cells, notes)
            continue
        shown = _docx_text(item, notes).rstrip()
        style_element = item.find(f"{_W_PPR}/{_W_PSTYLE}")
        style_id = None if style_element is None else style_element.get(_W_VAL)
        style = styles.get(style_id, default) if style_id else default
        if _CONTENTS_ENTRY.fullmatch(style):  # (an entry of a table of contents or an index)
            continue
        marker = numbering.marker(item, style_id)  # (an empty one counts: it shows its number)
        if CODE_STYLE.search(style):  # a line of a code sample: its blank lines kept
            code.append(shown if marker is None else marker + shown)  # (a numbered step's)
            continue
        end_code(blocks, code)
        text = shown.strip()
        if not shows_something(text):  # (nor one of zero-width spaces: no heading of none)
            continue
        level = re.fullmatch(r"Heading (\d)", style)
        outline = _outline_level(item, outlines.get(style_id or "", BODY_TEXT))
        if level or style == "Title" or outline < BODY_TEXT:
            _add_notes(blocks, notes, FOOTNOTE)  # a section's footnotes end it, then comments
            _add_notes(blocks, notes, COMMENT)
            number = "" if marker in (None, "- ") else marker  # as Word numbers it: `2.1 `
            depth = int(level.group(1)) if level else 1 if style == "Title" else outline + 1
            blocks.append("#" * min(6, depth) + f" {number}{text}")
        elif marker is not None:
            blocks.append(marker + text)
        elif style.startswith("List"):
            blocks.append("- " + text)
        else:
            blocks.append(shown.lstrip("\n"))  # indented as it shows (a line of code)
    end_code(blocks, code)
    _add_notes(blocks, notes, FOOTNOTE)
    _add_notes(blocks, notes, COMMENT)
    _add_notes(blocks, notes, ENDNOTE)
    blocks.extend(_running_lines(document, "footerReference"))
    return _core_title(document), "\n\n".join(blocks)


# The paragraph styles of code samples (Word's "HTML Preformatted", "Macro Text" and "Plain
# Text", LibreOffice's "Preformatted Text", a template's "Code" or "Source Code"): their
# paragraphs are the lines of one block, their empty ones its blank lines (an ODT's too).
CODE_STYLE = re.compile(r"(?i)\b(?:code|preformatted|macro text|plain text)\b")


# A table of contents repeats the headings (with page numbers the text has no pages for):
# read, its chunk matched every question about a section beside the section itself. Left
# out, as an ODT's is: Word's content control of one (`w:docPartGallery`), and an entry's
# paragraph style outside one (Word's "toc 1", LibreOffice's "Contents 1"). So are the
# entries of the other indexes that repeat the text's words or captions with page numbers:
# an index (Word's "index 1", its letters' "index heading"), a table of figures, and
# LibreOffice's indexes of figures, tables, objects and a user's. A bibliography (Word's
# "Bibliography" entries, LibreOffice's "Bibliography 1") holds the references the text
# cites by a short form only: read.
_CONTENTS_ENTRY = re.compile(
    r"(?i)(?:toc|contents) [1-9]|index heading|table of figures"
    r"|(?:(?:figure|illustration|table|object|user) )?index [1-9]"
)
_TABLE_OF_CONTENTS = "Table of Contents"
_W_GALLERY = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}docPartGallery"


def end_code(blocks: list[str], code: list[str]) -> None:
    """The code block read so far (`code`, its lines) as one block; `code` emptied."""
    text = "\n".join(code).strip("\n")
    if shows_something(text):
        blocks.append(text)
    code.clear()


def _add_notes(blocks: list[str], notes: Notes, tag: str) -> None:
    """The notes of kind `tag` cited since the last call, a line each: `[^1]: its text`."""
    for marker, note in notes.take(tag):
        _drop_shadow_text(note)
        text = " ".join(_docx_text(p, notes) for p in _docx_content(note, (_W_P,)))
        blocks.append(f"{marker}: {' '.join(text.split())}")


def _running_lines(document: Any, reference: str) -> list[str]:
    """The distinct lines of the document's headers or footers (`reference`), page counts
    left out."""
    lines: dict[str, None] = {}
    for root in running_parts(document, reference):
        _drop_shadow_text(root)
        for paragraph in root.iter(_W_P):
            if next(paragraph.iterancestors(_W_P), None) is not None:
                continue  # (read with the paragraph holding it: a text box's)
            text = " ".join(_docx_text(paragraph).split())
            if text and not page_count_only(text):
                lines.setdefault(text)
    return list(lines)


def _outline_level(paragraph: Any, by_style: int) -> int:
    """The outline level of `paragraph`: its own (`w:pPr/w:outlineLvl`), else its style's."""
    properties = paragraph[0] if len(paragraph) else None  # (`w:pPr` comes first)
    if properties is None or properties.tag != _W_PPR:
        return by_style
    own = properties.find(W_OUTLINE)
    return by_style if own is None else level_of(own)


def _core_title(document: Any) -> str:
    """The title in the DOCX's core properties, their part found by its content type.

    Not `document.core_properties`: python-docx looks the part up by the relationship type of
    the standard's later editions only, and when it finds none (LibreOffice names it as the
    first edition did) makes one up titled "Word Document", the title of every chunk."""
    from docx.opc.parts.coreprops import CorePropertiesPart

    for part in document.part.package.iter_parts():
        if isinstance(part, CorePropertiesPart):
            return str(part.core_properties.title or "")
    return ""


_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_W_P, _W_TBL, _W_TR, _W_TC = f"{_W}p", f"{_W}tbl", f"{_W}tr", f"{_W}tc"
_W_PPR, _W_PSTYLE, _W_VAL = f"{_W}pPr", f"{_W}pStyle", f"{_W}val"
# What holds content without being content: a content control (its `sdtContent`), custom XML,
# a smart tag, a tracked insertion or move. Their paragraphs, rows, cells and runs count as if
# they stood in its place (Word templates and forms keep much of their text in controls).
_W_WRAPPERS = {f"{_W}{name}" for name in ("sdt", "sdtContent", "customXml", "smartTag", "ins",
                                           "moveTo")}  # fmt: skip
# Text a reader does not see as the document's: tracked deletions and the old place of a moved
# passage (Word keeps both), and the fallback copy of a text box (`mc:Fallback` repeats what
# its `mc:Choice` holds, for older readers).
_SHADOWS = (
    f"{_W}del",
    f"{_W}moveFrom",
    "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback",
)
# A run's characters (`w:t`) and what Word shows for its other marks (a note's reference:
# its marker, `Notes.cite`).
_W_CHARS = {f"{_W}t": None, f"{_W}tab": "\t", f"{_W}ptab": "\t", f"{_W}br": "\n",
            f"{_W}cr": "\n", f"{_W}noBreakHyphen": "-", FOOTNOTE: None, ENDNOTE: None,
            COMMENT: None}  # fmt: skip
_NOTE_REFERENCES = (FOOTNOTE, ENDNOTE, COMMENT)
# A paragraph's tab stops (`w:pPr/w:tabs/w:tab`): where its tabs go, not tabs of its own.
_W_TAB_STOPS = f"{_W}tabs"


def _drop_shadow_text(element: Any) -> None:
    """Take the text a reader does not see (`_SHADOWS`) out of `element`: the body, a header
    or footer, a note (in a header's text box, its `mc:Fallback` copy was read too:
    `DRAFTDRAFT`); and a table of contents (`_CONTENTS_ENTRY`), which a reader sees again."""
    for shadow in list(element.iter(*_SHADOWS, _W_GALLERY)):  # (one walk)
        if shadow.tag == _W_GALLERY:  # sdt/sdtPr/docPartObj/docPartGallery
            toc = shadow.get(_W_VAL) == _TABLE_OF_CONTENTS
            shadow = _up(shadow, 3) if toc else None
            if shadow is None or shadow.tag != f"{_W}sdt":
                continue
        parent = shadow.getparent()
        if parent is not None:
            parent.remove(shadow)


def _up(element: Any, steps: int) -> Any:
    """The ancestor `steps` levels above `element`, None past the root."""
    for _ in range(steps):
        element = None if element is None else element.getparent()
    return element


def _docx_content(element: Any, kinds: tuple[str, ...] = (_W_P, _W_TBL)) -> Iterator[Any]:
    """The children of `element` of `kinds`, in order, those inside wrappers (`_W_WRAPPERS`)
    included where the wrapper stands."""
    pending = list(reversed(element))
    while pending:
        child = pending.pop()
        if child.tag in kinds:
            yield child
        elif child.tag in _W_WRAPPERS:
            pending.extend(reversed(child))


def _docx_text(paragraph: Any, notes: Notes | None = None) -> str:
    """What a paragraph shows: every run's text, in a hyperlink, a field's result, a content
    control, a tracked insertion or a text box anchored in it; the markers of the notes it
    cites, counted by `notes`."""
    out = []
    for element in paragraph.iter(*_W_CHARS):
        mark = _W_CHARS[element.tag]
        if element.getparent().tag == _W_TAB_STOPS:
            continue
        if element.tag in _NOTE_REFERENCES:
            out.append("" if notes is None else notes.cite(element))
        else:
            out.append(element.text or "" if mark is None else mark)
    return "".join(out)


def _docx_markup(package: Any, parts: list[Any]) -> int:
    """The bytes of a DOCX's parts that python-docx may parse as XML: the relationship parts,
    and those whose content type (`[Content_Types].xml`: by part name, then by extension, as
    python-docx looks it up) is an XML one. By file name alone (`.xml`), a document part named
    `word/document.bin` went uncounted: 60 MB of XML in a 0.2 MB file, 62 s and 1.1 GB."""
    import lxml.etree

    listed = [p for p in parts if p.filename == "[Content_Types].xml"]
    if not listed:  # python-docx cannot open it either; count every part
        return sum(p.file_size for p in parts)
    if sum(p.file_size for p in listed) > MARKUP_BYTES:
        raise Unpacked("the DOCX's XML", listed[0].file_size, MARKUP_BYTES)
    parser = lxml.etree.XMLParser(resolve_entities=False, no_network=True)
    defaults: dict[str, str] = {}
    overrides: dict[str, str] = {}
    try:
        root = lxml.etree.fromstring(package.read(listed[-1]), parser=parser)
    except lxml.etree.XMLSyntaxError:
        return sum(p.file_size for p in parts)
    for entry in root:
        kind = str(entry.get("ContentType", "")).lower()
        if str(entry.tag).endswith("}Default"):
            defaults[str(entry.get("Extension", "")).lower()] = kind
        elif str(entry.tag).endswith("}Override"):
            overrides[str(entry.get("PartName", "")).lower()] = kind
    total = 0
    for part in parts:
        name = "/" + part.filename.lower()
        last = name.rsplit("/", 1)[-1]
        extension = last.rpartition(".")[2] if "." in last else ""
        kind = overrides.get(name) or defaults.get(extension, "")
        if name.endswith((".rels", ".xml")) or kind.endswith("xml"):
            total += part.file_size
    return total


def _docx_rows(table: Any, blocks: list[str], cells: int, notes: Notes) -> int:
    """A line per row of `table`, its cells' texts joined by ` | `; the rows and cells read
    so far, `cells` included.

    One cell per `w:tc`, with its own paragraphs; the rows of a table nested in a cell follow
    its row's line. Not python-docx's `row.cells`: it repeats a cell for each grid column it
    spans (a `w:gridSpan` of 3,000,000 took 120 s and 388 MB) and walks up the rows for each
    vertically merged one (200 × 20 such cells: 70 s). (A table nests in a table at most
    about 128 deep: the XML parser stops at 256 levels.)"""
    for row in _docx_content(table, (_W_TR,)):
        cells = _cell_read(cells)
        texts, nested = [], []
        for tc in _docx_content(row, (_W_TC,)):
            cells = _cell_read(cells)
            paragraphs = []
            for item in _docx_content(tc):
                if item.tag == _W_TBL:
                    nested.append(item)
                else:
                    paragraphs.append(_docx_text(item, notes))
            texts.append(" ".join("\n".join(paragraphs).split()))
        if any(texts):  # a row of empty (or vertically merged) cells says nothing
            blocks.append(" | ".join(texts))
        for inner in nested:
            cells = _docx_rows(inner, blocks, cells, notes)
    return cells


def _cell_read(cells: int) -> int:
    if cells >= DOCX_TABLE_CELLS:
        raise InvalidInput(
            "source",
            f"the DOCX's tables have over {DOCX_TABLE_CELLS} rows and cells "
            "(knowledge/docx_text.DOCX_TABLE_CELLS); nothing was indexed",
        )
    return cells + 1
