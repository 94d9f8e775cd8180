"""ODT documents (OpenDocument Text: LibreOffice, Google Docs' export): the text of its
`content.xml` in document order, read as the DOCX reader reads a Word file, within the bounds
on what the zip unpacks to.

An ODT says what each paragraph is in its XML: `text:h` is a heading of `text:outline-level`
(numbered as the outline style, `text:outline-style`, says: `odt_numbering.Outline`),
`text:list` a list whose style (`text:list-style`, among the automatic styles or in
`styles.xml`) numbers its items or bullets them (`odt_numbering.py`), `table:table` a table,
`text:note` a footnote or endnote with its text where it is cited, `office:annotation` a
reviewer's comment; a paragraph in a code style (LibreOffice's "Preformatted Text") a line of
code; a page style (`style:master-page` in `styles.xml`) its headers and footers. Read with
the zip and the XML parser the EPUB reader uses (no entities, no network): odfdo, the
maintained ODF library, parses with lxml's defaults and renders notes and tables otherwise."""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from typing import Any, NamedTuple

from octobrain.knowledge.docx_notes import page_count_only
from octobrain.knowledge.docx_numbering import roman
from octobrain.knowledge.docx_styles import inherited
from octobrain.knowledge.docx_text import CODE_STYLE, end_code
from octobrain.knowledge.odt_numbering import (
    ListCounts,
    Outline,
    count,
    counts_item,
    level_number,
    list_styles,
    marker,
)
from octobrain.knowledge.unpacked import Unpacked, open_package, package_xml
from octobrain.safe_text import shows_something

_TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
_TABLE = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}"
_OFFICE = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}"
_STYLE = "{urn:oasis:names:tc:opendocument:xmlns:style:1.0}"
_DC = "{http://purl.org/dc/elements/1.1/}"
_MANIFEST = "{urn:oasis:names:tc:opendocument:xmlns:manifest:1.0}"
_H, _P, _LIST, _ITEM = f"{_TEXT}h", f"{_TEXT}p", f"{_TEXT}list", f"{_TEXT}list-item"
_LIST_HEADER, _NOTE = f"{_TEXT}list-header", f"{_TEXT}note"
# A heading's number as the program that wrote it printed it (`text:number`): shown where the
# outline style numbers none (LibreOffice writes none; numbers it counts itself).
_NUMBER = f"{_TEXT}number"
_TBL, _ROW, _CELL = f"{_TABLE}table", f"{_TABLE}table-row", f"{_TABLE}table-cell"
_ANNOTATION = f"{_OFFICE}annotation"
# What holds blocks without being one: a section, a table's groups of rows, a change of text
# a reviewer accepted (`text:tracked-changes` holds the deleted text: not read).
_WRAPPERS = {f"{_TEXT}section", f"{_TABLE}table-header-rows", f"{_TABLE}table-rows",
             f"{_TABLE}table-row-group", f"{_TEXT}soft-page-break",
             f"{_TEXT}index-title"}  # fmt: skip
# The indexes LibreOffice makes of a document (`text:index-body`, what they showed when last
# updated): a bibliography's holds the references themselves, which the text cites only by
# their short names (`[Knuth84]`; their authors and titles are attributes of the citation),
# and is read; a table of contents, an alphabetical index, the indexes of figures, tables,
# objects and a user's repeat the text's headings, words and captions with page numbers the
# text has none for, and are left out (read, their chunk matched a question about any of
# them beside the section that answers it). Its title (`text:index-title`) read as it shows.
_BIBLIOGRAPHY, _INDEX_BODY = f"{_TEXT}bibliography", f"{_TEXT}index-body"
# Inside a paragraph, text that is not the paragraph's: deleted text of a tracked change, an
# image's bytes and descriptions, a note (cited by its marker) and a comment (read after its
# section), the end marker of a comment's range.
_NOT_INLINE = {f"{_TEXT}tracked-changes", f"{_OFFICE}binary-data", _NOTE, _ANNOTATION,
               f"{_OFFICE}annotation-end", _NUMBER}  # fmt: skip
_INLINE = {f"{_TEXT}tab": "\t", f"{_TEXT}line-break": "\n"}
_SVG = "{urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0}"
# The longest run of spaces a `text:s` makes: an indent or a gap in a line, never a page of
# them (200 counts of a billion, in a 2 kB file, asked for 200 GB).
_MOST_SPACES = 100
# What a page style repeats on its pages: its headers and footers, on left pages, on the first
# (LibreOffice wrote the first page's in its own namespace before ODF 1.3 named them).
_LOEXT = "{urn:org:documentfoundation:names:experimental:office:xmlns:loext:1.0}"
_HEADERS = (f"{_STYLE}header", f"{_STYLE}header-left", f"{_STYLE}header-first",
            f"{_LOEXT}header-first")  # fmt: skip
_FOOTERS = (f"{_STYLE}footer", f"{_STYLE}footer-left", f"{_STYLE}footer-first",
            f"{_LOEXT}footer-first")  # fmt: skip


class _Notes:
    """The notes and comments cited since the last section break, numbered as cited."""

    def __init__(self, styling: _Styles | None = None) -> None:
        self._styling = styling  # (a note's lists are numbered by the document's list styles)
        self.footnotes: list[str] = []
        self.endnotes: list[str] = []
        self.comments: list[str] = []
        self._counts = {"footnote": 0, "endnote": 0}

    def cite(self, note: Any) -> str:
        kind = "endnote" if note.get(f"{_TEXT}note-class") == "endnote" else "footnote"
        self._counts[kind] += 1
        number = self._counts[kind]
        marker = f"[^{number}]" if kind == "footnote" else f"[^{roman(number)}]"
        body = note.find(f"{_TEXT}note-body")
        parts: list[str] = []
        if body is not None:
            styling = self._styling or _Styles({}, {}, frozenset(), ListCounts(), Outline(None))
            _read_blocks(body, parts, self, styling._replace(counts=ListCounts()))  # own counts
        text = " ".join(" ".join(parts).split())
        (self.footnotes if kind == "footnote" else self.endnotes).append(f"{marker}: {text}")
        return marker

    def comment(self, annotation: Any) -> None:
        creator = annotation.find(f"{_DC}creator")
        author = " ".join("".join(creator.itertext()).split())[:80] if creator is not None else ""
        paragraphs = [_inline(p, self) for p in _own_paragraphs(annotation)]
        text = " ".join(" ".join(paragraphs).split())
        if text:
            self.comments.append(f"Comment ({author}): {text}" if author else f"Comment: {text}")

    def section_end(self, blocks: list[str]) -> None:
        """The footnotes then the comments cited since the last call, after `blocks`."""
        blocks.extend(self.footnotes + self.comments)
        self.footnotes.clear()
        self.comments.clear()


def _own_paragraphs(root: Any) -> Iterator[Any]:
    """The paragraphs of a comment (or a header) that are not inside another of its
    paragraphs or another comment (which `_inline` reads with theirs): each read once. Read
    every one, a comment in a comment's paragraph was read again by each comment around it,
    2**depth times (18 deep, 1 kB: 2.6 MB of text; 30 deep, gigabytes). One walk down from
    `root`, in document order, that enters no paragraph and no comment: looked for up from
    each paragraph, its holders were 240 elements for each of 600,000 empty paragraphs (5.4
    MB) in a header, 30 s."""
    walking = [iter(root)]
    while walking:
        for element in walking[-1]:
            if element.tag in (_P, _H):
                yield element
            elif element.tag != _ANNOTATION:
                walking.append(iter(element))
                break
        else:
            walking.pop()


def title_and_text(data: bytes, max_bytes: int, uri: str) -> tuple[str, str]:
    """The title (`dc:title` of `meta.xml`) and text of an ODT: headings as `#` lines, list
    items as `- ` or numbered (`2. `) lines, tables a line a row (`a | b`), a code sample's
    lines one block, footnotes (`[^1]: …`) and comments (`Comment (author): …`) after the
    section citing them, endnotes (`[^i]: …`) at the end, its headers' and footers' lines once
    each, first and last; `Unpacked` past `max_bytes` (the zip) or `MARKUP_BYTES` (one part's
    XML)."""
    with open_package(data, uri, "ODT") as package:  # an entry never inflates past its size
        entries = package.infolist()
        size = sum(entry.file_size for entry in entries)
        if size > max_bytes:
            raise Unpacked("the ODT package", size)
        named = {entry.filename: entry for entry in entries}
        _refuse_encrypted(package, named, uri)
        content = package_xml(package, named, "content.xml", uri, "ODT")
        meta = styles = None
        if "meta.xml" in named:
            meta = package_xml(package, named, "meta.xml", uri, "ODT")
        if "styles.xml" in named:
            styles = package_xml(package, named, "styles.xml", uri, "ODT")
    headings, code = _paragraph_styles(content, styles)
    styling = _Styles(list_styles(content, styles), headings, code, ListCounts(), Outline(styles))
    body = content.find(f"{_OFFICE}body/{_OFFICE}text")
    blocks = _running_lines(styles, _HEADERS)
    notes = _Notes(styling)
    if body is not None:
        _read_blocks(body, blocks, notes, styling)
    notes.section_end(blocks)
    blocks.extend(notes.endnotes)
    blocks.extend(_running_lines(styles, _FOOTERS))
    return _title(meta), "\n\n".join(blocks)


def _running_lines(styles: Any, kinds: tuple[str, ...]) -> list[str]:
    """The distinct lines of the headers or footers (`kinds`) of the page styles in
    `styles.xml`, page counts left out, those switched off (`style:display="false"`) not
    read: a line repeated on every page, or by every page style, is worth finding once."""
    lines: dict[str, None] = {}
    if styles is None:
        return []
    for page in styles.iter(f"{_STYLE}master-page"):
        for part in page:
            if part.tag not in kinds or part.get(f"{_STYLE}display") == "false":
                continue
            for paragraph in _own_paragraphs(part):
                text = " ".join(_inline(paragraph, _Notes()).split())
                if shows_something(text) and not page_count_only(text):
                    lines.setdefault(text)
    return list(lines)


def _refuse_encrypted(package: zipfile.ZipFile, named: dict[str, Any], uri: str) -> None:
    """A password-protected ODT keeps `content.xml` encrypted, as its manifest says."""
    from octobrain.errors import InvalidInput

    if "META-INF/manifest.xml" not in named:
        return
    manifest = package_xml(package, named, "META-INF/manifest.xml", uri, "ODT")
    for entry in manifest.iter(f"{_MANIFEST}file-entry"):
        if entry.get(f"{_MANIFEST}full-path") == "content.xml" and len(entry):
            raise InvalidInput(
                "source", f"{uri}: the ODT is encrypted with a password; nothing was indexed"
            )


def _title(meta: Any) -> str:
    if meta is None:
        return ""
    for element in meta.iter(f"{_DC}title"):
        title = " ".join("".join(element.itertext()).split())
        if shows_something(title):
            return title
    return ""


class _Styles(NamedTuple):
    """The styles the text is read by: list styles by name, the levels of the paragraph
    styles that make a heading, the paragraph styles of code; the lists' counters, and the
    headings' numbering (and counters)."""

    lists: dict[str, dict[int, Any]]
    headings: dict[str, int]
    code: frozenset[str]
    counts: ListCounts
    outline: Outline


def _paragraph_styles(content: Any, styles: Any) -> tuple[dict[str, int], frozenset[str]]:
    """The paragraph styles that make a heading, by name: their level, as their own
    `style:default-outline-level`, or a parent's, says (or their name: `Heading 2`, `Title`);
    LibreOffice writes a heading that starts a page as a `text:p` of such a style. And those
    of code: named so (`docx_text.CODE_STYLE`: "Preformatted Text"), or built on one."""
    import re

    parents: dict[str, str] = {}
    levels: dict[str, int] = {}
    code: dict[str, bool] = {}
    for root in (styles, content):
        if root is None:
            continue
        for style in root.iter(f"{_STYLE}style"):
            if style.get(f"{_STYLE}family") != "paragraph":
                continue
            name = str(style.get(f"{_STYLE}name", ""))
            parents[name] = str(style.get(f"{_STYLE}parent-style-name", ""))
            shown = str(style.get(f"{_STYLE}display-name") or name.replace("_20_", " "))
            named = re.fullmatch(r"(?i)heading (\d)", shown)
            if CODE_STYLE.search(shown):
                code[name] = True
            if style.get(f"{_STYLE}default-outline-level"):
                levels[name] = _level(style.get(f"{_STYLE}default-outline-level"))
            elif named or shown.lower() == "title":
                levels[name] = _level(named.group(1) if named else 1)
    found = {name: level for name in parents if (level := inherited(name, levels, parents, None))}
    return found, frozenset(name for name in parents if inherited(name, code, parents, None))


def _read_blocks(
    element: Any, blocks: list[str], notes: _Notes, styling: _Styles, tables: bool = True
) -> None:
    """The blocks among the children of `element`, in order, onto `blocks` (its tables too
    unless `tables` is false: a cell's come after its row); a run of paragraphs in a code
    style one block, as its lines show."""
    code: list[str] = []  # the lines of the code block being read
    for child in element:
        tag = child.tag
        if tag == _P and _is_code(child, styling):
            code.append(_inline(child, notes).rstrip())
            continue
        if tag != f"{_TEXT}soft-page-break":  # (a page break in a code sample goes on with it)
            end_code(blocks, code)
        if tag == _H:
            notes.section_end(blocks)  # (before its text: a comment on it is of its section)
            text = " ".join(_inline(child, notes).split())
            level = child.get(f"{_TEXT}outline-level")  # (an empty one counts: it shows its number)
            number = styling.outline.number(child, level_number(level)) or _printed(child)
            if shows_something(text):
                blocks.append("#" * _level(level) + " " + number + text)
        elif tag == _P and str(child.get(f"{_TEXT}style-name")) in styling.headings:
            notes.section_end(blocks)  # a paragraph in a heading's style (LibreOffice's first)
            text = " ".join(_inline(child, notes).split())
            if shows_something(text):
                level = styling.headings[str(child.get(f"{_TEXT}style-name"))]
                blocks.append("#" * level + " " + text)
        elif tag == _P:
            text = _inline(child, notes).strip()
            if shows_something(text):
                blocks.append(text)
        elif tag == _LIST:
            _read_list(child, blocks, notes, styling)
        elif tag == _TBL:
            if tables:
                _read_table(child, blocks, notes, styling)
        elif tag in _WRAPPERS:
            _read_blocks(child, blocks, notes, styling, tables)
        elif tag == _BIBLIOGRAPHY:  # (the other indexes, a table of contents: left out)
            for index_body in child.iterchildren(_INDEX_BODY):
                _read_blocks(index_body, blocks, notes, styling, tables)
    end_code(blocks, code)


def _printed(heading: Any) -> str:
    """The number the writing program printed in `heading` (`text:number`), a space after."""
    if not len(heading):  # (most hold their text only)
        return ""
    printed = next((child for child in heading if child.tag == _NUMBER), None)
    number = "" if printed is None else " ".join("".join(printed.itertext()).split())[:80]
    return f"{number} " if shows_something(number) else ""


def _level(value: Any) -> int:
    try:
        return min(6, max(1, int(value)))
    except (TypeError, ValueError):
        return 1


def _read_list(
    element: Any,
    blocks: list[str],
    notes: _Notes,
    styling: _Styles,
    depth: int = 1,
    style: str = "",
    counts: dict[int, int] | None = None,
) -> None:
    """A list's items, a line each, its marker as the list's style gives it at `depth`,
    numbered on from the list it continues (`counts`: its counters; a list not in a list
    finds them); nested lists after their item's line."""
    style = str(element.get(f"{_TEXT}style-name") or style)
    if counts is None:
        counts = styling.counts.begin(element, style)
    levels = styling.lists.get(style, {})
    number_style = levels.get(depth)
    for item in element:
        if item.tag not in (_ITEM, _LIST_HEADER):
            continue
        shown = ""  # a list header's, or an item's holding no paragraph: no number
        own = any(child.tag in (_P, _H) for child in item)
        if item.tag == _ITEM and counts_item(counts, depth, own):
            count(counts, depth, item, number_style)
            shown = marker(levels, depth, counts) if own else ""
        first = True
        code: list[str] = []  # a code sample's lines: one block, as they show
        for child in item:
            if _is_code(child, styling):
                code.append(_inline(child, notes).rstrip())
                continue
            first = _end_item_code(blocks, code, shown if first else "") and first
            if child.tag == _LIST:
                _read_list(child, blocks, notes, styling, depth + 1, style, counts)
            elif child.tag == _H:  # a heading numbered by a list: a heading, with its number
                notes.section_end(blocks)
                text = " ".join(_inline(child, notes).split())
                level = level_number(child.get(f"{_TEXT}outline-level"))
                number = shown if first and shown != "- " else ""
                if style not in styling.lists:  # (in a list of the outline style: numbered so)
                    number = styling.outline.number(child, level)
                if shows_something(text):
                    blocks.append("#" * _level(level) + " " + number + text)
                    first = False
            elif child.tag == _P:
                text = " ".join(_inline(child, notes).split())
                if shows_something(text):
                    blocks.append((shown if first else "  ") + text)
                    first = False
            elif child.tag == _TBL:
                _read_table(child, blocks, notes, styling)
        _end_item_code(blocks, code, shown if first else "")


def _is_code(paragraph: Any, styling: _Styles) -> bool:
    """Whether `paragraph` is a line of code: a `text:p` in a code style (looked up only in a
    document that has one)."""
    code = styling.code
    return bool(code) and paragraph.tag == _P and str(paragraph.get(f"{_TEXT}style-name")) in code


def _end_item_code(blocks: list[str], code: list[str], shown: str) -> bool:
    """The code sample read so far in a list item (`code`) as one block, the item's number
    (`shown`) before its first line; whether there was none."""
    had = len(blocks)
    end_code(blocks, code)
    if len(blocks) == had:
        return True
    blocks[-1] = shown + blocks[-1]
    return False


def _read_table(table: Any, blocks: list[str], notes: _Notes, styling: _Styles) -> None:
    """A line per row, its cells' texts joined by ` | ` (a repeated row or cell once: a
    repeat count is how a sheet says "and so on", not text); the rows of a table nested in a
    cell after its row's line."""
    for row in _children(table, _ROW):
        texts: list[str] = []
        nested: list[Any] = []
        for cell in _children(row, _CELL):
            parts: list[str] = []
            _read_blocks(cell, parts, notes, styling, tables=False)
            nested.extend(_children(cell, _TBL))
            texts.append(" ".join(" ".join(parts).split()))
        if any(texts):
            blocks.append(" | ".join(texts))
        for inner in nested:
            _read_table(inner, blocks, notes, styling)


def _children(element: Any, tag: str) -> Iterator[Any]:
    """The children of `element` of `tag`, those in wrappers (`_WRAPPERS`) where they stand."""
    for child in element:
        if child.tag == tag:
            yield child
        elif child.tag in _WRAPPERS:
            yield from _children(child, tag)


def _inline(paragraph: Any, notes: _Notes) -> str:
    """What a paragraph shows: its characters, `text:s` spaces, tabs and line breaks, the
    text of a frame anchored in it; a note's marker where it is cited; a comment counted for
    after its section."""
    out: list[str] = [paragraph.text or ""]
    for child in paragraph:
        tag = child.tag
        if tag == f"{_TEXT}s":
            out.append(" " * min(level_number(child.get(f"{_TEXT}c") or 1), _MOST_SPACES))
        elif tag in _INLINE:
            out.append(_INLINE[tag])
        elif tag == _NOTE:
            out.append(notes.cite(child))
        elif tag == _ANNOTATION:
            notes.comment(child)
        elif tag in _NOT_INLINE or not isinstance(tag, str) or tag.startswith(_SVG):
            pass
        else:
            inner = _inline(child, notes)
            out.append(f" {inner} " if tag in (_P, _H) else inner)
        out.append(child.tail or "")
    return "".join(out)
