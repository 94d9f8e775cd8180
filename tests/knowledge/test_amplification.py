"""Hostile office documents whose text was read again and again: every part of a document is
read a bounded number of times, so its text stays about as large as its markup.

Sizes are small enough that the code before each fix ran them in seconds and megabytes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from octobrain.errors import InvalidInput
from octobrain.knowledge.extract import extract
from octobrain.knowledge.sources import parse_source, read_file

from .conftest import write_docx
from .test_epub import write_epub
from .test_odt_rtf import write_odt


def _text(path: Path) -> str:
    return extract(read_file(parse_source(str(path)), 10**7), 10**7).text


def test_an_odt_comment_nested_in_comments_is_read_once(tmp_path: Path) -> None:
    # Before: each comment read the paragraphs of every comment inside it, and each of
    # those again: 2**depth readings, 655,000 characters from these 1 kB (30 deep: gigabytes).
    depth = 16
    body = (
        "<text:p>Rotate keys."
        + "<office:annotation><text:p>note" * depth
        + "</text:p></office:annotation>" * depth
        + "</text:p>"
    )
    text = _text(write_odt(tmp_path / "nested.odt", body))
    assert len(text) < 2_000
    assert text.startswith("Rotate keys.\n\nComment: note")
    assert text.count("Comment: ") == depth


def test_an_odt_header_of_many_paragraphs_nested_deep_is_read_in_one_walk(
    tmp_path: Path,
) -> None:
    # Before: each paragraph of a header (or a comment) looked up through its holders for one
    # that is a paragraph: 600,000 empty ones 240 sections deep (5.4 MB) took 30 s.
    deep = "<text:section>" * 240
    header = f"<text:p>ACME internal</text:p>{deep}{'<text:p/>' * 600_000}<text:p>OPS-114</text:p>"
    styles = (
        '<office:master-styles><style:master-page style:name="Standard"><style:header>'
        f"{header}{deep.replace('<', '</')}</style:header></style:master-page>"
        "</office:master-styles>"
    )
    text = _text(write_odt(tmp_path / "deep.odt", "<text:p>Rotate keys.</text:p>", styles=styles))
    assert text == "ACME internal\n\nOPS-114\n\nRotate keys."


def test_an_odt_list_style_prints_a_bounded_number_before_each_item(tmp_path: Path) -> None:
    # Before: a 20 kB `num-prefix` was printed before each of 100 items (2 MB of text from a
    # 30 kB file), a 4,000-digit start before each of its items.
    styles = (
        '<office:styles><text:list-style style:name="Long"><text:list-level-style-number '
        f'text:level="1" style:num-prefix="{"Step " * 4_000}" style:num-suffix="." '
        'style:num-format="1"/></text:list-style><text:list-style style:name="Huge">'
        f'<text:list-level-style-number text:level="1" text:start-value="{"9" * 4_000}" '
        'style:num-format="1"/></text:list-style></office:styles>'
    )
    items = "<text:list-item><text:p>drain</text:p></text:list-item>" * 100
    body = (
        f'<text:list text:style-name="Long">{items}</text:list>'
        f'<text:list text:style-name="Huge">{items}</text:list>'
    )
    text = _text(write_odt(tmp_path / "prefix.odt", body, styles=styles))
    assert len(text) < 20_000
    lines = text.split("\n\n")
    assert lines[0].startswith("Step Step ") and lines[0].endswith(" 1. drain")
    assert lines[1].endswith(" 2. drain")
    assert lines[100] == "1 drain"  # a start no list counts from is read as none


def _docx(path: Path, build: Any) -> Path:
    import docx

    document = docx.Document()
    build(document)
    document.save(str(path))
    return path


def test_a_docx_level_text_is_printed_bounded_before_each_paragraph(tmp_path: Path) -> None:
    # Before: a 20 kB `w:lvlText` of `%1`, counted from a 4,000-digit `w:start`, was printed
    # before each of 50 paragraphs: 40 million characters an item asked for. Now 60
    # characters of it, the start read as none past 9 digits.
    from docx.oxml.ns import qn

    def build(document: Any) -> None:
        for _ in range(50):
            document.add_paragraph("Drain the node.", style="List Number")
        for level in document.part.numbering_part.element.iter(qn("w:lvl")):
            level.find(qn("w:lvlText")).set(qn("w:val"), "%1" * 10_000)
            level.find(qn("w:start")).set(qn("w:val"), "9" * 40)

    text = _text(_docx(tmp_path / "levels.docx", build))
    assert len(text) < 5_000
    assert text.split("\n\n")[1] == "2" * 30 + " Drain the node."


def test_a_docx_comment_citing_itself_is_read_once(tmp_path: Path) -> None:
    # Before: a comment whose text cites it twice was read anew at each citation, after each
    # heading: 2**12 = 4,096 copies after 12 headings (30: a billion).
    from docx.oxml import parse_xml
    from docx.oxml.ns import nsdecls

    def build(document: Any) -> None:
        paragraph = document.add_paragraph("Each region holds 400 nodes.")
        comment = document.add_comment(paragraph.runs, "Ask the storage team.", "Ann")
        runs = f'<w:r><w:commentReference w:id="{comment.comment_id}"/></w:r>' * 2
        comment.paragraphs[0]._p.extend(list(parse_xml(f"<w:p {nsdecls('w')}>{runs}</w:p>")))
        for number in range(12):
            document.add_heading(f"Part {number}", level=1)

    text = _text(_docx(tmp_path / "cites.docx", build))
    assert text.count("Comment (Ann): Ask the storage team.") == 1


def test_a_docx_header_paragraph_nested_in_paragraphs_is_read_once(tmp_path: Path) -> None:
    # Before: each header paragraph was read with all those nested in it, then each of those
    # again: 150 nested, 1 kB of text each, made 11 MB of header lines from 170 kB.
    from docx.oxml import parse_xml
    from docx.oxml.ns import nsdecls

    def build(document: Any) -> None:
        document.add_paragraph("Body.")
        depth, words = 150, "word " * 200
        chain = f"<w:p><w:r><w:t>{words}</w:t></w:r>" * depth + "</w:p>" * depth
        header = document.sections[0].header
        header._element.append(parse_xml(f"<w:hdr {nsdecls('w')}>{chain}</w:hdr>")[0])

    text = _text(_docx(tmp_path / "header.docx", build))
    assert len(text) < 200_000
    assert text.endswith("Body.")


def test_an_html_list_start_past_a_browser_s_integer_is_none(tmp_path: Path) -> None:
    # Before: a 4,000-digit `start` was printed before each `<li>`: 4 MB of text from 9 kB.
    # Browsers read a number past 32 bits as none; so does the flat reader of a deep page.
    items = "<li>drain" * 1_000
    page = tmp_path / "list.html"
    page.write_text(f'<html><body><ol start="{"9" * 4_000}">{items}</ol></body></html>')
    text = _text(page)
    assert len(text) < 20_000
    assert text.startswith("1. drain\n\n2. drain")
    deep = tmp_path / "deep.html"
    deep.write_text(f'<html><body>{"<div>" * 300}<ol start="{"9" * 4_000}">{items}</ol>')
    assert _text(deep).startswith("1. drain\n\n2. drain")


def test_a_heading_line_of_a_megabyte_heads_its_chunks_cut_short() -> None:
    # Before: each chunk of the section repeated its 300 kB heading in its header: 52 MB of
    # chunk contents from 500 kB (a 5 MB heading over 5 MB of text: the process killed).
    from octobrain.knowledge.chunk import HEADING_CHARS, chunk_text

    text = "# Runbook " + "x" * 300_000 + "\n\n" + "Drain the node first. " * 10_000
    chunks = chunk_text(text, "Ops")
    assert sum(len(chunk.content) for chunk in chunks) < 3 * len(text)
    (heading,) = chunks[-1].section_path
    assert len(heading) == HEADING_CHARS and heading.startswith("Runbook xx")
    assert heading.endswith("x…")
    assert "Drain the node first." in chunks[-1].body


def test_an_epub_spine_past_its_entries_is_refused(tmp_path: Path) -> None:
    # Before: each of a spine's items was looked up among the documents found so far: 150,000
    # items naming 15,000 documents (a 3 MB book) took 50 s. A spine names each document once.
    spine = '<itemref idref="ch1"/>' * 20_001
    book = write_epub(tmp_path / "spine.epub", spine=spine)
    with pytest.raises(InvalidInput, match=r"spine\.epub: .*its spine lists 20001 items, over"):
        _text(book)


def _listing_300_empty_files(kind: str, tmp_path: Path) -> tuple[Path, str]:
    """A real document of `kind` whose zip also lists 300 empty files, and a phrase of its text."""
    import zipfile

    if kind == "EPUB":
        empty = [(f"OEBPS/blank{n}.txt", b"") for n in range(300)]
        return write_epub(tmp_path / "listed.epub", extra=empty), "Barley went in"
    if kind == "ODT":
        made = write_odt(tmp_path / "listed.odt")
    else:
        made = write_docx(tmp_path / "listed.docx")
    with zipfile.ZipFile(made, "a") as package:
        for n in range(300):
            package.writestr(f"blank{n}.txt", b"")
    return made, "Rollbacks" if kind == "DOCX" else "Snapshot the volume"


@pytest.mark.parametrize("kind", ["EPUB", "ODT", "DOCX"])
def test_a_zip_whose_list_of_files_is_past_its_bound_is_refused_before_it_is_read(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: zipfile read the whole central directory into objects before any count was
    # checked: a 50 MB EPUB of 600,000 empty entries took 8.6 s of CPU and 440 MB, then was
    # refused for its 600,001 entries; a DOCX so made 15.9 s and 735 MB, an ODT 7.8 s and
    # 443 MB, both then read on.
    import zipfile

    from octobrain.knowledge import unpacked

    made, phrase = _listing_300_empty_files(kind, tmp_path)
    assert phrase in _text(made)
    monkeypatch.setattr(unpacked, "PACKAGE_DIRECTORY_BYTES", 10_000, raising=False)
    read: list[int] = []
    listing = zipfile.ZipFile._RealGetContents  # type: ignore[attr-defined]
    monkeypatch.setattr(
        zipfile.ZipFile, "_RealGetContents", lambda *a: read.append(1) or listing(*a)
    )
    with pytest.raises(InvalidInput) as refused:
        _text(made)
    assert read == []
    assert re.search(
        rf"{made.name}: cannot read this {kind}: its zip lists its files in 1[0-9]{{4}} bytes, "
        r"over the 10000-byte bound \(knowledge/unpacked\.PACKAGE_DIRECTORY_BYTES; ",
        str(refused.value),
    ), refused.value


def test_an_epub_navigation_link_nested_in_links_is_read_once() -> None:
    # Before: each link's label held the text of every link nested in it: 200 links nested,
    # 1 kB each, were 20 MB of labels from 200 kB (6 MB of navigation: gigabytes).
    import lxml.etree

    from octobrain.knowledge.epub_text import _nav_links

    nav = '<a href="c.xhtml">Chapter words words</a>'.replace("words", "words " * 100)
    depth = 200
    markup = nav.replace("</a>", "") * depth + "</a>" * depth
    links = list(_nav_links(lxml.etree.fromstring(f"<nav>{markup}</nav>")))
    assert sum(len(label) for label, _ in links) < 2 * len(markup)
    assert links[0][0].startswith("Chapter words")


def test_an_odt_list_style_s_levels_are_read_once_not_for_each_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: each list looked its level up among all its style's levels: 20,000 levels and
    # 1,000 lists (1 MB) took 24 s, 6 MB of each hours. ODF defines ten levels.
    from octobrain.knowledge import odt_numbering

    levels, lists = 2_000, 100
    styles = (
        '<office:styles><text:list-style style:name="Many">'
        + '<text:list-level-style-bullet text:level="9"/>' * levels
        + '<text:list-level-style-number text:level="1" style:num-format="1"/>'
        + "</text:list-style></office:styles>"
    )
    item = "<text:list-item><text:p>drain</text:p></text:list-item>"
    body = f'<text:list text:style-name="Many">{item}</text:list>' * lists
    odt = write_odt(tmp_path / "levels.odt", body, styles=styles)
    reads = 0
    level_number = odt_numbering.level_number

    def counted(value: Any) -> int:
        nonlocal reads
        reads += 1
        return level_number(value)

    monkeypatch.setattr(odt_numbering, "level_number", counted)
    assert _text(odt) == "\n\n".join(["1 drain"] * lists)
    assert reads < 2 * (levels + lists)  # (before: 200,000)


def test_a_pdf_page_s_lines_are_read_once_for_all_its_bookmarks() -> None:
    # Before: each bookmark looked for its title line by line in its page: 20,000 bookmarks
    # of a page of 20,000 lines (2.4 MB) took 61 s, 3 s now; a 50 MB PDF, hours.
    from octobrain.knowledge.pdf_text import _mark_outline

    class Page(list[str]):
        reads = 0

        def __iter__(self) -> Any:
            Page.reads += 1
            return super().__iter__()

    class Bookmark:
        def __init__(self, title: str) -> None:
            self.title = title

    class Reader:
        outline = [Bookmark(f"Step {n}") for n in range(300)] + [Bookmark("Step 7")]

        def get_destination_page_number(self, bookmark: Bookmark) -> int:
            return 0

    page = Page([f"Step {n}" for n in range(300)] + ["Step 7"])
    _mark_outline(Reader(), [page])
    assert Page.reads <= 1  # (before: 301)
    assert page[7] == page[300] == "# Step 7"
    assert page[299] == "# Step 299"


def test_a_pdf_layout_line_s_cells_are_each_read_once() -> None:
    # Before: each cell of a line in pypdf's layout mode was looked for in the rest of the
    # line, cut anew for each: a line of 80,000 cells (within `PDF_PAGE_TOKENS`) took 2.6 s,
    # time growing with the square of its cells.
    from octobrain.knowledge.pdf_columns import _cells

    class Line(str):
        cut = 0  # characters of the line cut out of it

        def __getitem__(self, key: Any) -> str:
            part = super().__getitem__(key)
            Line.cut += len(part)
            return part

    line = Line("   ".join(["ab"] * 2_000))
    starts, texts = _cells(line)
    assert starts[:3] == [0, 5, 10] and texts == ["ab"] * 2_000
    assert Line.cut <= 2 * len(line)  # (before: 19,990,000, 2,000 times the line)
