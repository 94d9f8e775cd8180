"""What a document's structure keeps in its text: list numbers, notes, running headers and
footers, and titles that show something."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import pytest

from octobrain.knowledge.chunk import chunk_text
from octobrain.knowledge.extract import DocType, extract
from octobrain.knowledge.sources import parse_source, read_file
from octobrain.safe_text import shows_something

from .conftest import MakeKnowledge

_W_NS = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def _extract(path: Path) -> tuple[str, str]:
    document = extract(read_file(parse_source(str(path)), 10**7), 10**7)
    return document.title, document.text


def _saved(document: Any, path: Path) -> str:
    """The text of a python-docx `document` saved at `path`."""
    document.save(str(path))
    return _extract(path)[1]


def test_html_numbered_lists_keep_their_numbers(tmp_path: Path) -> None:
    # Every item was `- `: "step 3 of the runbook" was not in the text.
    page = tmp_path / "runbook.html"
    page.write_text(
        "<html><body><h1>Runbook</h1><p>Follow the steps in order, every time.</p>"
        "<ol><li>Drain the node.</li><li><p>Cordon it.</p><ol><li>Check pods.</li></ol></li>"
        '<li value="7">Reboot it.</li><li>Uncordon it.</li></ol>'
        '<ol start="3"><li>Third.</li></ol><ol reversed><li>Two.</li><li>One.</li></ol>'
        "<ul><li>A bullet.</li></ul></body></html>"
    )
    _, text = _extract(page)
    assert text.split("\n\n")[2:] == [
        "1. Drain the node.",
        "2. Cordon it.",
        "1. Check pods.",
        "7. Reboot it.",
        "8. Uncordon it.",
        "3. Third.",
        "2. Two.",
        "1. One.",
        "- A bullet.",
    ]


def test_html_too_deep_for_a_tree_keeps_its_list_markers_and_headings(tmp_path: Path) -> None:
    # A page nested past libxml2's 256 levels is read flat: its list items lost their `- `
    # and numbers, its headings their `#` (no section paths), which the tree's reading keeps.
    body = (
        "<h1>Runbook</h1><h2>Steps</h2><ol><li>Drain the node.</li><li><p>Cordon it.</p>"
        '<ol><li>Check pods.</li></ol></li><li value="7">Reboot it.</li></ol>'
        '<ol start="3"><li>Third.</li></ol><ol reversed start="2"><li>Two.</li><li>One.</li>'
        "</ol><ul><li>A bullet.</li></ul>"
    )
    deep = tmp_path / "deep.html"
    deep.write_text(f"<html><body>{body}{'<div>' * 300}{'</div>' * 300}</body></html>")
    assert _extract(deep)[1].split("\n\n") == [
        "# Runbook",
        "## Steps",
        "1. Drain the node.",
        "2. Cordon it.",
        "1. Check pods.",
        "7. Reboot it.",
        "3. Third.",
        "2. Two.",
        "1. One.",
        "- A bullet.",
    ]


def test_docx_numbered_lists_keep_their_numbers(tmp_path: Path) -> None:
    import docx

    document = docx.Document()
    document.add_heading("Runbook", level=1)
    for step in ("Drain the node.", "Cordon it.", "Reboot it."):
        document.add_paragraph(step, style="List Number")
    document.add_paragraph("Mind the pager.", style="List Bullet")
    assert _saved(document, tmp_path / "runbook.docx").split("\n\n") == [
        "# Runbook",
        "1. Drain the node.",
        "2. Cordon it.",
        "3. Reboot it.",
        "- Mind the pager.",
    ]


def _with_notes(path: Path) -> Path:
    """`path`, a python-docx file, given a footnote and an endnote, cited in the paragraphs
    that say `(footnote)` and `(endnote)` (python-docx writes no notes)."""
    notes = {
        "footnotes": "The staging cluster runs on spot instances.",
        "endnotes": "Runbook reviewed by the platform team in March.",
    }
    with zipfile.ZipFile(path) as package:
        parts = {name: package.read(name) for name in package.namelist()}
    for kind, note in notes.items():
        one = kind[:-1]
        parts[f"word/{kind}.xml"] = (
            f'<w:{kind} {_W_NS}><w:{one} w:type="separator" w:id="-1"><w:p><w:r><w:t>sep</w:t>'
            f'</w:r></w:p></w:{one}><w:{one} w:id="1"><w:p><w:r><w:t>{note}</w:t></w:r></w:p>'
            f"</w:{one}></w:{kind}>"
        ).encode()
        parts["[Content_Types].xml"] = parts["[Content_Types].xml"].replace(
            b"</Types>",
            f'<Override PartName="/word/{kind}.xml" ContentType="application/vnd.'
            f'openxmlformats-officedocument.wordprocessingml.{kind}+xml"/></Types>'.encode(),
        )
        parts["word/_rels/document.xml.rels"] = parts["word/_rels/document.xml.rels"].replace(
            b"</Relationships>",
            f'<Relationship Id="rId{kind}" Type="http://schemas.openxmlformats.org/'
            f'officeDocument/2006/relationships/{kind}" Target="{kind}.xml"/>'
            "</Relationships>".encode(),
        )
        parts["word/document.xml"] = parts["word/document.xml"].replace(
            f"({one})</w:t></w:r>".encode(),
            f'</w:t></w:r><w:r><w:{one}Reference w:id="1"/></w:r>'.encode(),
        )
    with zipfile.ZipFile(path, "w") as package:
        for name, data in parts.items():
            package.writestr(name, data)
    return path


def test_docx_notes_headers_and_footers_are_read_once(tmp_path: Path) -> None:
    # Footnotes, endnotes, headers and footers were not indexed: `spot instances` in a
    # footnote, or the document number in its running header, found nothing.
    import docx

    document = docx.Document()
    document.add_heading("Staging", level=1)
    document.add_paragraph("Deploys go to staging first.(footnote)")
    document.add_heading("Production", level=1)
    document.add_paragraph("Production deploys need a second reviewer.(endnote)")
    document.sections[0].header.paragraphs[0].text = "OPS-114 Deployment runbook"
    footer = document.sections[0].footer
    footer.paragraphs[0].text = "ACME internal"
    footer.add_paragraph("Page 3 of 9")
    document.save(str(tmp_path / "notes.docx"))
    _, text = _extract(_with_notes(tmp_path / "notes.docx"))
    assert text.split("\n\n") == [
        "OPS-114 Deployment runbook",
        "# Staging",
        "Deploys go to staging first.[^1]",
        "[^1]: The staging cluster runs on spot instances.",  # at the end of its section
        "# Production",
        "Production deploys need a second reviewer.[^i]",
        "[^i]: Runbook reviewed by the platform team in March.",
        "ACME internal",  # once, and no page count
    ]


def _text_box(text: str) -> str:
    """A run holding a text box as Word writes one: in `mc:Choice`, and again in the
    `mc:Fallback` kept for readers of older versions."""
    box = f"<w:txbxContent><w:p><w:r><w:t>{text}</w:t></w:r></w:p></w:txbxContent>"
    return (
        '<w:r><mc:AlternateContent xmlns:mc="http://schemas.openxmlformats.org/markup-'
        'compatibility/2006"><mc:Choice Requires="wps"><w:drawing><wps:txbx xmlns:wps="http:'
        f'//schemas.microsoft.com/office/word/2010/wordprocessingShape">{box}</wps:txbx>'
        '</w:drawing></mc:Choice><mc:Fallback><w:pict><v:shape xmlns:v="urn:schemas-microsoft-'
        f'com:vml"><v:textbox>{box}</v:textbox></v:shape></w:pict></mc:Fallback>'
        "</mc:AlternateContent></w:r>"
    )


def test_a_docx_text_box_in_a_header_footer_or_note_is_read_once(
    make_knowledge: MakeKnowledge, tmp_path: Path
) -> None:
    # Before: a text box's fallback copy was left out of the body only: a header's box read
    # `DRAFTDRAFT OPS-114 runbook`, and `match DRAFT` found no word `DRAFT` in it.
    import docx
    from docx.oxml import parse_xml

    document = docx.Document()
    document.add_paragraph("Deploys go to staging first.(footnote)")
    document.add_paragraph("Production needs a reviewer.(endnote)")
    for part, box, text in (
        (document.sections[0].header, "DRAFT", " OPS-114 runbook"),
        (document.sections[0].footer, "ACME", " internal"),
    ):
        runs = _text_box(box) + f"<w:r><w:t xml:space='preserve'>{text}</w:t></w:r>"
        part._element.append(parse_xml(f"<w:p {_W_NS}>{runs}</w:p>"))
    path = tmp_path / "boxed.docx"
    document.save(str(path))
    _with_notes(path)
    with zipfile.ZipFile(path) as package:
        parts = {name: package.read(name) for name in package.namelist()}
    parts["word/footnotes.xml"] = parts["word/footnotes.xml"].replace(
        b"<w:r><w:t>The staging", _text_box("Spot").encode() + b"<w:r><w:t> The staging", 1
    )
    with zipfile.ZipFile(path, "w") as package:
        for name, data in parts.items():
            package.writestr(name, data)
    text = _extract(path)[1]
    assert text.split("\n\n")[0] == "DRAFT OPS-114 runbook"
    assert text.split("\n\n")[-1] == "ACME internal"
    assert "[^1]: Spot The staging cluster runs on spot instances." in text
    hits = make_knowledge().match(r"\bDRAFT\b", source="boxed.docx").hits
    assert [h.line for h in hits] == ["DRAFT OPS-114 runbook"]


def test_docx_reviewers_comments_follow_their_section(
    make_knowledge: MakeKnowledge, tmp_path: Path
) -> None:
    # A reviewer's comment (often the point of a reviewed document) was not indexed at all:
    # `storage team` in a comment found nothing.
    import docx

    document = docx.Document()
    document.add_heading("Capacity", level=1)
    paragraph = document.add_paragraph("Each region holds 400 nodes.")
    document.add_comment(paragraph.runs, "Wrong for us-east: ask the storage team.", "Ann Lee")
    document.add_heading("Rollout", level=1)
    table = document.add_table(rows=1, cols=1)
    table.cell(0, 0).text = "canary first"
    document.add_comment(table.cell(0, 0).paragraphs[0].runs, "And watch the error budget.")
    document.save(str(tmp_path / "review.docx"))
    assert _extract(tmp_path / "review.docx")[1].split("\n\n") == [
        "# Capacity",
        "Each region holds 400 nodes.",  # no marker: Word prints none
        "Comment (Ann Lee): Wrong for us-east: ask the storage team.",
        "# Rollout",
        "canary first",
        "Comment: And watch the error budget.",
    ]
    k = make_knowledge()
    k.index("review.docx")
    hits = k.search("storage team us-east").hits
    assert hits and hits[0].section_path == ("Capacity",)


@pytest.mark.parametrize(
    ("name", "data", "title"),
    [
        ("page.html", "<html><head><title>\u200b</title></head><body><h1>\u200b</h1>"
         "<h2>Rotation policy</h2><p>Keys rotate monthly.</p></body></html>", "Rotation policy"),
        ("note.md", "# \u200b\u200d\n\nKeys rotate monthly.\n", "Keys rotate monthly."),
        ("blank.txt", "\u2060\n\u200b\n", "Untitled"),
    ],
)  # fmt: skip
def test_a_title_that_shows_nothing_falls_back_as_an_empty_one(
    tmp_path: Path, name: str, data: str, title: str
) -> None:
    # A `<title>` of a zero-width space was the title printed before every hit: nothing.
    (tmp_path / name).write_text(data)
    got, text = _extract(tmp_path / name)
    assert got == title
    chunks = chunk_text(text, got, setext=name.endswith(".md"))
    assert all(shows_something(part) for c in chunks for part in c.section_path)


def test_a_docx_titled_with_a_zero_width_space_is_titled_by_its_heading(tmp_path: Path) -> None:
    import docx

    document = docx.Document()
    document.core_properties.title = "\u200b"
    document.add_heading("Key rotation", level=1)
    document.save(str(tmp_path / "keys.docx"))
    doc = extract(read_file(parse_source(str(tmp_path / "keys.docx")), 10**7), 10**7)
    assert (doc.title, doc.doc_type) == ("Key rotation", DocType.DOCX)


def test_docx_code_keeps_its_lines_together_and_its_blank_lines(tmp_path: Path) -> None:
    # Each line of a code sample was a paragraph of its own and its empty lines were dropped:
    # the blank line between two functions read as any line break.
    import docx
    from docx.enum.style import WD_STYLE_TYPE

    document = docx.Document()
    document.styles.add_style("Code", WD_STYLE_TYPE.PARAGRAPH)
    document.add_paragraph("Two helpers:")
    for line in ("def one():", "    return 1", "", "def two():", "    return 2", ""):
        document.add_paragraph(line, style="Code")
    document.add_paragraph("Both are pure.")
    text = _saved(document, tmp_path / "code.docx")
    assert text.split("\n\n") == [
        "Two helpers:",
        "def one():\n    return 1",
        "def two():\n    return 2",
        "Both are pure.",
    ]
    assert "    return 1\n\ndef two():" in text  # one block, its blank line kept


def test_docx_tab_stops_are_not_tabs_of_the_paragraph(tmp_path: Path) -> None:
    # A paragraph with tab stops set (columns laid out with tabs, as LibreOffice saves them)
    # read a tab for each stop before its text: `\t\t\tregion\towner`.
    import docx
    from docx.shared import Cm

    document = docx.Document()
    for row in ("region\towner\tcapacity", "eu-west\tplatform team\t400"):
        paragraph = document.add_paragraph(row)
        for at in (5, 10, 15):
            paragraph.paragraph_format.tab_stops.add_tab_stop(Cm(at))
    text = _saved(document, tmp_path / "columns.docx")
    assert text.split("\n\n") == ["region\towner\tcapacity", "eu-west\tplatform team\t400"]


@pytest.mark.parametrize("kind", ["pdf", "docx"])
def test_a_title_holding_an_invisible_character_is_held_without_it(
    tmp_path: Path, kind: str
) -> None:
    # A title saved with a zero-width space inside (`Capacity\u200b Plan`) led every chunk
    # with it: it printed as `Capacity Plan` and a search or match for that missed it.
    import docx

    from .conftest import write_pdf

    path = tmp_path / f"plan.{kind}"
    if kind == "pdf":
        from pypdf import PdfWriter

        writer = PdfWriter(clone_from=write_pdf(path, [["Body text."]]))
        writer.add_metadata({"/Title": "Capacity\u200b Plan\u00ad"})
        writer.write(path)
    else:
        document = docx.Document()
        document.core_properties.title = "Capacity\u200b Plan\u2060"
        document.add_paragraph("Body text.")
        document.save(str(path))
    assert _extract(path)[0] == "Capacity Plan"


def test_a_docx_lettered_list_past_zz_is_numbered_in_digits(tmp_path: Path) -> None:
    # Before: a list lettered from 10**7 was 385,000 letters an item (10**12: 38 billion,
    # the process killed); past ten of one letter (260), digits say it as well.
    import docx
    from docx.oxml.ns import qn

    document = docx.Document()
    document.add_paragraph("Drain the node.", style="List Number")
    for level in document.part.numbering_part.element.iter(qn("w:lvl")):
        level.find(qn("w:numFmt")).set(qn("w:val"), "lowerLetter")
        level.find(qn("w:start")).set(qn("w:val"), "10000000")
    assert _saved(document, tmp_path / "lettered.docx") == "10000000. Drain the node."


def test_docx_headings_numbered_by_their_style_keep_their_numbers(tmp_path: Path) -> None:
    # Word's multilevel heading numbering: the Heading styles hold a `w:numPr` of one list,
    # a level each ("1", "1.1"). Before: "# Introduction", "## Rotation", the numbers a
    # reader cites ("see 2.1") not in the text. A heading taken off the list by its own
    # `w:numId` 0 stays bare.
    import docx
    from docx.oxml import parse_xml

    document = docx.Document()
    numbering = document.part.numbering_part.element
    numbering.insert(
        0,
        parse_xml(
            f'<w:abstractNum {_W_NS} w:abstractNumId="90"><w:lvl w:ilvl="0"><w:start w:val="1"/>'
            '<w:numFmt w:val="decimal"/><w:lvlText w:val="%1"/></w:lvl><w:lvl w:ilvl="1">'
            '<w:start w:val="1"/><w:numFmt w:val="decimal"/><w:lvlText w:val="%1.%2"/></w:lvl>'
            "</w:abstractNum>"
        ),
    )
    numbering.append(
        parse_xml(f'<w:num {_W_NS} w:numId="90"><w:abstractNumId w:val="90"/></w:num>')
    )
    for name, level in (("Heading 1", 0), ("Heading 2", 1)):
        style = document.styles[name].element
        style.get_or_add_pPr().insert(
            0,
            parse_xml(f'<w:numPr {_W_NS}><w:ilvl w:val="{level}"/><w:numId w:val="90"/></w:numPr>'),
        )
    document.add_heading("Introduction", level=1)
    document.add_paragraph("Why keys rotate.")
    document.add_heading("Keys", level=1)
    document.add_heading("Storage", level=2)
    document.add_heading("Rotation", level=2)
    bare = document.add_heading("Appendix", level=1)
    bare._p.get_or_add_pPr().insert(
        0, parse_xml(f'<w:numPr {_W_NS}><w:numId w:val="0"/></w:numPr>')
    )
    assert _saved(document, tmp_path / "keys.docx").split("\n\n") == [
        "# 1 Introduction",
        "Why keys rotate.",
        "# 2 Keys",
        "## 2.1 Storage",
        "## 2.2 Rotation",
        "# Appendix",
    ]


def test_a_docx_table_of_contents_is_left_out_as_its_headings_repeat(tmp_path: Path) -> None:
    # A table of contents repeats the headings, each with a page number the text has no
    # pages for; read, its chunk matched every question about any section beside the
    # section itself. Before: "Contents", "Introduction\t1", "Keys\t2" were read; now left
    # out, as an ODT's is: Word's in its content control, entries in "toc N" styles outside.
    import docx
    from docx.oxml import parse_xml

    document = docx.Document()
    entry = '<w:p><w:pPr><w:pStyle w:val="TOC1"/></w:pPr><w:r><w:t>{}</w:t></w:r><w:r><w:tab/></w:r><w:r><w:t>{}</w:t></w:r></w:p>'  # noqa: E501
    toc = (
        f'<w:sdt {_W_NS}><w:sdtPr><w:docPartObj><w:docPartGallery w:val="Table of Contents"/>'
        "</w:docPartObj></w:sdtPr><w:sdtContent><w:p><w:r><w:t>Contents</w:t></w:r></w:p>"
        f"{entry.format('Introduction', 1)}{entry.format('Keys', 2)}</w:sdtContent></w:sdt>"
    )
    body = document.element.body
    body.insert(0, parse_xml(toc))
    document.styles.add_style("toc 1", docx.enum.style.WD_STYLE_TYPE.PARAGRAPH)
    document.styles["toc 1"].element.set(
        "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}styleId", "TOC1"
    )
    document.add_heading("Introduction", level=1)
    document.add_paragraph("Why keys rotate.")
    bare_entry = parse_xml(f"<w:body {_W_NS}>{entry.format('Keys', 2)}</w:body>")[0]
    body.insert(len(body) - 1, bare_entry)  # an entry outside a control (before sectPr)
    document.add_heading("Keys", level=1)
    assert _saved(document, tmp_path / "toc.docx").split("\n\n") == [
        "# Introduction",
        "Why keys rotate.",
        "# Keys",
    ]


def test_an_empty_numbered_docx_paragraph_counts_as_word_shows_it(tmp_path: Path) -> None:
    # Word shows an empty numbered paragraph's number ("2.") and counts it: before, it
    # counted none and the steps after it were numbered one short ("2. Reboot").
    import docx

    document = docx.Document()
    for step in ("Drain the node.", "", "Reboot it."):
        document.add_paragraph(step, style="List Number")
    assert _saved(document, tmp_path / "steps.docx").split("\n\n") == [
        "1. Drain the node.",
        "3. Reboot it.",
    ]


def test_a_docx_paragraph_with_an_outline_level_is_a_heading(tmp_path: Path) -> None:
    # Word makes a heading of any paragraph with an outline level (its navigation pane and
    # table of contents list it): a template's own "Chapter" style, one built on it, a
    # paragraph given a level itself. Before: read as body text, its section without a path.
    import docx
    from docx.enum.style import WD_STYLE_TYPE
    from docx.oxml import parse_xml

    def level(value: int) -> Any:
        return parse_xml(f'<w:outlineLvl {_W_NS} w:val="{value}"/>')

    document = docx.Document()
    chapter = document.styles.add_style("Chapter", WD_STYLE_TYPE.PARAGRAPH)
    chapter.element.get_or_add_pPr().append(level(0))
    part = document.styles.add_style("Part", WD_STYLE_TYPE.PARAGRAPH)
    part.base_style = chapter
    aside = document.styles.add_style("Aside", WD_STYLE_TYPE.PARAGRAPH)
    aside.base_style = chapter
    aside.element.get_or_add_pPr().append(level(9))  # (9: body text, its base's level undone)
    document.add_paragraph("Chapter one", style="Chapter")
    document.add_paragraph("Body.")
    document.add_paragraph("Part two", style="Part")
    document.add_paragraph("An aside.", style="Aside")
    document.add_paragraph("Direct level")._p.get_or_add_pPr().append(level(1))
    assert _saved(document, tmp_path / "outline.docx").split("\n\n") == [
        "# Chapter one",
        "Body.",
        "# Part two",
        "An aside.",
        "## Direct level",
    ]
