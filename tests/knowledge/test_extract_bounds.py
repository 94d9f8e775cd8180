"""Hostile documents: every extraction path stays about linear in what it is given."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from octobrain.errors import InvalidInput
from octobrain.knowledge.extract import extract
from octobrain.knowledge.sources import parse_source, read_file


def _text(path: Path) -> str:
    return extract(read_file(parse_source(str(path)), 1 << 20), 1 << 20).text


def _save(document: Any, path: Path, edit: Callable[[bytes], bytes] = lambda xml: xml) -> Path:
    """Save a python-docx document, its `word/document.xml` passed through `edit`."""
    saved = io.BytesIO()
    document.save(saved)
    with zipfile.ZipFile(saved) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for part in src.infolist():
            body = src.read(part)
            out.writestr(
                part.filename, edit(body) if part.filename == "word/document.xml" else body
            )
    return path


def _table(rows: list[list[str]]) -> Any:
    import docx

    document = docx.Document()
    document.add_paragraph("Before the table.")
    table = document.add_table(rows=len(rows), cols=len(rows[0]))
    for r, row in enumerate(rows):
        for c, text in enumerate(row):
            table.cell(r, c).text = text
    document.add_paragraph("After the table.")
    return document


def test_docx_merged_cells_read_once_in_document_order(tmp_path: Path) -> None:
    document = _table([["", "", "Total"], ["eu-west", "platform", ""], ["us-east", "data", ""]])
    table = document.tables[0]
    table.cell(0, 0).merge(table.cell(0, 1)).text = "Team budget"
    table.cell(1, 2).merge(table.cell(2, 2)).text = "12"
    document.add_heading("Notes", level=1)
    text = _text(_save(document, tmp_path / "merged.docx"))
    # python-docx's row.cells gave "Team budget | Team budget | Total" and "us-east | data | 12"
    assert text == (
        "Before the table.\n\nTeam budget | Total\n\neu-west | platform | 12\n\n"
        "us-east | data |\n\nAfter the table.\n\n# Notes"
    )


def test_docx_a_huge_grid_span_is_one_cell(tmp_path: Path) -> None:
    # A 37 kB file: python-docx's row.cells repeated the cell 3,000,000 times (120 s, 388 MB).
    def span(xml: bytes) -> bytes:
        return xml.replace(b"<w:tcPr>", b'<w:tcPr><w:gridSpan w:val="3000000"/>', 1)

    document = _table([["wide", "narrow"], ["a", "b"]])
    text = _text(_save(document, tmp_path / "span.docx", span))
    assert text == "Before the table.\n\nwide | narrow\n\na | b\n\nAfter the table."


def test_docx_a_chain_of_vertically_merged_cells_is_read_once(tmp_path: Path) -> None:
    # 200 rows of 20 cells each merged with the one above: python-docx walked up the rows for
    # every cell (70 s) and repeated the top row's text 200 times.
    def merge_down(xml: bytes) -> bytes:
        first = xml.index(b"<w:tr")
        second = xml.index(b"<w:tr", first + 1)
        end = xml.index(b"</w:tbl>")
        top = xml[first:second].replace(b"<w:tcPr>", b'<w:tcPr><w:vMerge w:val="restart"/>')
        below = xml[second:end].replace(b"<w:tcPr>", b"<w:tcPr><w:vMerge/>")
        return xml[:first] + top + below * 199 + xml[end:]

    tops = [f"top{c}" for c in range(20)]
    document = _table([tops, ["own text"] + [""] * 19])  # a merged cell's own text is kept
    text = _text(_save(document, tmp_path / "vmerge.docx", merge_down))
    below = " | ".join(["own text"] + [""] * 19).rstrip()
    assert text == "\n\n".join(
        ["Before the table.", " | ".join(tops), *[below] * 199, "After the table."]
    )


def test_docx_with_too_many_table_cells_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from octobrain.knowledge import docx_text

    path = _save(_table([["a", "b", "c"]] * 4), tmp_path / "cells.docx")
    assert _text(path).count("a | b | c") == 4
    monkeypatch.setattr(docx_text, "DOCX_TABLE_CELLS", 15)  # 4 rows + 12 cells: one too many
    with pytest.raises(InvalidInput, match=r"^source: the DOCX's tables have over 15 rows and"):
        _text(path)


def _page(text: str, head: str = "") -> str:
    return f"<html><head>{head}<title>Notes</title></head><body><p>{text}</p></body></html>"


@pytest.mark.parametrize(
    ("declared", "encoding", "text"),
    [
        ('<meta charset="iso-8859-1">', "latin-1", "Résumé du café."),
        ("<META CHARSET=windows-1251>", "cp1251", "Кофе и чай."),
        ('<meta http-equiv="Content-Type" content="text/html; charset=koi8-r" />', "koi8-r",
         "Кофе и чай."),
        ("", "cp1252", "Résumé, “quoted” for 5 €."),  # not UTF-8: what browsers assume
        ("", "utf-8", "Café: кофе."),
        ('<meta charset="x-no-such-charset">', "utf-8", "Café: кофе."),  # passed over
        ('<meta charset="rot13">', "cp1252", "Café “au lait”."),  # Python's, not the web's
        ('<meta name="viewport" content="width=device-width"><meta charset="utf-8">', "utf-8",
         "Café: кофе."),
    ],
)  # fmt: skip
def test_html_in_the_charset_it_declares_or_the_one_browsers_assume(
    tmp_path: Path, declared: str, encoding: str, text: str
) -> None:
    path = tmp_path / "page.html"
    path.write_bytes(_page(text, declared).encode(encoding))
    doc = extract(read_file(parse_source(str(path)), 1 << 20), 1 << 20)
    assert (doc.title, doc.text) == ("Notes", text)


def test_html_charset_from_http_first_after_a_bom(tmp_path: Path) -> None:
    from octobrain.knowledge.sources import Fetched, SourceKind, SourceRef

    def read(data: bytes, charset: str = "") -> str:
        ref = SourceRef("https://example.org/page", SourceKind.URL)
        return extract(Fetched(ref, data, "text/html", charset=charset), 1 << 20).text

    page = _page("Кофе и чай.", '<meta charset="iso-8859-1">')
    assert read(page.encode("koi8-r"), charset="KOI8-R") == "Кофе и чай."  # HTTP over meta
    assert read(page.encode("koi8-r"), charset="bogus") != "Кофе и чай."  # then the meta
    assert read(page.encode("utf-16"), charset="iso-8859-1") == "Кофе и чай."  # a BOM first
    # A named charset the bytes belie: replacement characters, not an error.
    assert (
        read(_page("Le café est bon.").encode("latin-1"), charset="utf-8")
        == "Le caf\ufffd est bon."
    )
    xhtml = '<?xml version="1.0" encoding="ISO-8859-1"?>\n' + _page("Résumé.")
    assert read(xhtml.encode("latin-1")) == "Résumé."


@pytest.mark.parametrize("tail", ["<a ", "<meta ", "<meta charset=x "])
def test_a_non_utf8_page_of_unclosed_tags_reads_in_one_pass(tmp_path: Path, tail: str) -> None:
    # Given bytes, readability looked for their charset with regexes quadratic on such pages:
    # 100 kB of `<a ` in Latin-1 took 15.5 s, of `<meta ` 52 s.
    path = tmp_path / "open.html"
    page = "<html><head><title>Café notes</title></head><body><p>Le café est bon.</p>"
    path.write_bytes((page + tail * (100_000 // len(tail))).encode("latin-1"))
    doc = extract(read_file(parse_source(str(path)), 1 << 20), 1 << 20)
    assert doc.title == "Café notes" and doc.text.endswith("Le café est bon.")
    assert "<" not in doc.text and len(doc.text) < 100


def test_every_web_encoding_is_a_python_codec_by_its_own_name() -> None:
    import codecs

    from octobrain.knowledge.charset import _READ_AS, _WEB

    assert {codecs.lookup(name).name for name in _WEB} == _WEB
    assert {codecs.lookup(label).name for label in _READ_AS} == set(_READ_AS)
    assert set(_READ_AS.values()) <= _WEB


def test_docx_paragraph_styles_as_python_docx_names_them(tmp_path: Path) -> None:
    # python-docx looked each paragraph's style up among all the styles, and the default among
    # them again: 5,000 styles and 5,000 paragraphs took 282 s. Now read once, same names.
    import docx

    from octobrain.knowledge.docx_styles import read_styles

    document = docx.Document()
    document.add_heading("Runbook", level=0)
    document.add_heading("Failover", level=2)
    document.add_paragraph("Promote the replica.", style="List Number")
    for style_id in ("Chr", "Nope", "Heading1", ""):
        document.add_paragraph(f"Styled {style_id}")._p.get_or_add_pPr().style = style_id or None
    extra = "".join(
        f'<w:style w:type="paragraph" w:styleId="S{i}"><w:name w:val="Extra {i}"/></w:style>'
        for i in range(1000)
    )
    styles = document.styles.element
    added = docx.oxml.parse_xml(  # an id a character style has; an id given twice
        f"<w:styles {docx.oxml.ns.nsdecls('w')}>{extra}"
        '<w:style w:type="character" w:styleId="Chr"><w:name w:val="Chr"/></w:style>'
        '<w:style w:type="paragraph" w:styleId="Heading1"><w:name w:val="Second"/></w:style>'
        "</w:styles>"
    )
    for style in list(added):
        styles.append(style)
    names, default = read_styles(styles)[:2]
    for paragraph in document.paragraphs:
        expected = paragraph.style.name if paragraph.style is not None else ""
        style_id = paragraph._p.style
        assert (names.get(style_id, default) if style_id else default) == expected
    text = _text(_save(document, tmp_path / "styles.docx"))
    assert text.startswith("# Runbook\n\n## Failover\n\n1. Promote the replica.\n\nStyled Chr")
    assert text.endswith("Styled Nope\n\n# Styled Heading1\n\nStyled")


def test_a_tag_with_thousands_of_attributes_is_read_without_a_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # libxml2 and readability take time growing with the square of one element's attributes:
    # 30,000 on one `<p>` took 17.8 s (40,000: 53 s), the knowledge lock held all along.
    import lxml.html

    def no_tree(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("built a tree of a page with a 30,000-attribute tag")

    monkeypatch.setattr(lxml.html, "document_fromstring", no_tree)
    attributes = " ".join(f"a{i}='{i}'" for i in range(30_000))
    path = tmp_path / "attrs.html"
    path.write_text(
        f"<html><head><title>Crowded</title></head><body><p {attributes}>first</p>"
        "<p>second paragraph</p></body></html>"
    )
    doc = extract(read_file(parse_source(str(path)), 1 << 20), 1 << 20)
    assert doc.title == "Crowded" and doc.text.split() == ["first", "second", "paragraph"]


@pytest.fixture
def articles_looked_for(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The pages readability is asked to find the article of (each raises: it must not be)."""
    import readability

    looked: list[str] = []

    def article(markup: str, *args: Any, **kwargs: Any) -> Any:
        looked.append(markup)
        raise AssertionError("readability looked for the article of a page too costly for it")

    monkeypatch.setattr(readability, "Document", article)
    return looked


def test_a_page_of_too_many_elements_is_read_whole_without_readability(
    tmp_path: Path, articles_looked_for: list[str]
) -> None:
    # Readability cleans each element in Python three times and scores it twice: a 4 MB page
    # of 500,000 `<p>` took 16–31 s. Past `ARTICLE_ELEMENTS` it is read as when it gives up.
    path = tmp_path / "many.html"
    cells = "".join(f"<p>{i}</p>" for i in range(200_000))  # and html, head, title, body, nav
    path.write_text(
        f"<html><head><title>Many</title></head><body><nav>Menu</nav>{cells}</body></html>"
    )
    doc = extract(read_file(parse_source(str(path)), 8 << 20), 8 << 20)
    assert not articles_looked_for
    assert doc.title == "Many"
    # The whole body, chrome left out (the head's title is the title, not a line of the text).
    assert doc.text.split("\n\n") == [str(i) for i in range(200_000)]


SENTENCE = "Prose of the article, with commas, as readability likes it."
PROSE = f"<p>{SENTENCE}</p>" * 5
SHAPES = {
    # Each took 4-11 s at this size, and grows with its square (readability 0.9).
    "3,000 sibling blocks holding only an image": "<div><img src='a.png'></div>" * 3_000,
    "250 nested blocks over 20,000 <p>": "<div>" * 250 + "<p>x</p>" * 20_000 + "</div>" * 250,
    "20,000 images in one block, text after each": "<div>" + "<img>x" * 20_000 + "</div>",
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_page_whose_shape_readability_rereads_is_read_whole(
    tmp_path: Path, articles_looked_for: list[str], shape: str
) -> None:
    # An 84-163 kB page, far under `ARTICLE_ELEMENTS`, held the knowledge lock 4-11 s (50,000
    # image-only blocks in 1.4 MB: about 48 min); it is read as when readability gives up.
    path = tmp_path / "shape.html"
    path.write_text(
        f"<html><head><title>Shape</title></head><body><nav>Menu</nav><div>{PROSE}"
        f"{SHAPES[shape]}</div></body></html>"
    )
    doc = extract(read_file(parse_source(str(path)), 1 << 20), 1 << 20)
    assert not articles_looked_for
    assert doc.title == "Shape"
    # The whole body, chrome left out (the head's title is the title, not a line of the text).
    assert doc.text.split("\n\n")[:5] == [SENTENCE] * 5
    assert "Menu" not in doc.text
