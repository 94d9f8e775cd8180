"""ODT (OpenDocument Text) and RTF documents: read as their word processors show them."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from octobrain.errors import InvalidInput
from octobrain.knowledge.extract import DocType, extract
from octobrain.knowledge.sources import Fetched, parse_source, read_file

from .conftest import MakeKnowledge

_NS = (
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
    'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
    'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
    'xmlns:dc="http://purl.org/dc/elements/1.1/" '
    'xmlns:meta="urn:oasis:names:tc:opendocument:xmlns:meta:1.0"'
)
# What LibreOffice writes for a handbook: a heading per section, a numbered and a bulleted
# list, a footnote, a reviewer's comment, an endnote, a table with a nested table.
BODY = (
    '<text:h text:outline-level="1">Operations</text:h>'
    '<text:p>Backups run<text:s text:c="3"/>nightly.<text:note text:note-class="footnote">'
    "<text:note-citation>1</text:note-citation><text:note-body><text:p>Except on holidays."
    "</text:p></text:note-body></text:note></text:p>"
    '<text:list text:style-name="L1"><text:list-item><text:p>Stop the writers</text:p>'
    "<text:list><text:list-item><text:p>and the readers</text:p></text:list-item></text:list>"
    "</text:list-item><text:list-item><text:p>Snapshot the volume</text:p></text:list-item>"
    "</text:list>"
    '<text:h text:outline-level="2">Paging<office:annotation><dc:creator>Ana</dc:creator>'
    "<text:p>Check the rota.</text:p></office:annotation></text:h>"
    '<text:p>The rota changes on Mondays.<text:note text:note-class="endnote">'
    "<text:note-citation>i</text:note-citation><text:note-body><text:p>Since 2024.</text:p>"
    "</text:note-body></text:note></text:p>"
    "<text:list><text:list-item><text:p>page once</text:p></text:list-item></text:list>"
    "<table:table><table:table-header-rows><table:table-row><table:table-cell><text:p>region"
    "</text:p></table:table-cell><table:table-cell><text:p>quota</text:p></table:table-cell>"
    "</table:table-row></table:table-header-rows><table:table-row><table:table-cell><text:p>"
    "eu-west</text:p><table:table><table:table-row><table:table-cell><text:p>inner</text:p>"
    "</table:table-cell></table:table-row></table:table></table:table-cell><table:table-cell>"
    "<text:p>400</text:p></table:table-cell></table:table-row></table:table>"
)
LIST_STYLE = (
    '<office:automatic-styles><text:list-style style:name="L1"><text:list-level-style-number '
    'text:level="1" style:num-suffix="." style:num-format="1"/><text:list-level-style-number '
    'text:level="2" style:num-suffix=")" style:num-format="a"/></text:list-style>'
    '<style:style style:name="P1" style:family="paragraph" style:parent-style-name='
    '"Heading_20_1"/></office:automatic-styles>'
)


def write_odt(path: Path, body: str = BODY, title: str = "Ops Handbook", styles: str = "") -> Path:
    """An ODT as LibreOffice lays one out: `mimetype` first and stored, then its parts."""
    content = (
        f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {_NS}>{LIST_STYLE}'
        f"<office:body><office:text>{body}</office:text></office:body></office:document-content>"
    )
    meta = (
        f'<?xml version="1.0"?><office:document-meta {_NS}><office:meta><dc:title>{title}'
        "</dc:title></office:meta></office:document-meta>"
    )
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as package:
        package.writestr("mimetype", "application/vnd.oasis.opendocument.text", zipfile.ZIP_STORED)
        package.writestr("content.xml", content)
        package.writestr("meta.xml", meta)
        if styles:
            package.writestr(
                "styles.xml", f"<office:document-styles {_NS}>{styles}</office:document-styles>"
            )
    return path


def _read(path: Path, max_bytes: int = 1 << 20) -> tuple[str, str, DocType]:
    document = extract(read_file(parse_source(str(path)), max_bytes), max_bytes)
    return document.title, document.text, document.doc_type


def test_an_odt_reads_its_headings_lists_tables_and_notes_as_a_docx_does(tmp_path: Path) -> None:
    # Before: "unsupported file type '.odt'"; named otherwise, refused as not UTF-8 text.
    title, text, doc_type = _read(write_odt(tmp_path / "ops.odt"))
    assert (title, doc_type) == ("Ops Handbook", DocType.ODT)
    assert text == (
        "# Operations\n\nBackups run   nightly.[^1]\n\n"
        "1. Stop the writers\n\na) and the readers\n\n2. Snapshot the volume\n\n"
        "[^1]: Except on holidays.\n\n"
        "## Paging\n\nThe rota changes on Mondays.[^i]\n\n- page once\n\n"
        "region | quota\n\neu-west | 400\n\ninner\n\n"
        "Comment (Ana): Check the rota.\n\n[^i]: Since 2024."
    )
    renamed = tmp_path / "ops.bin"  # no extension: known by its first entry
    renamed.write_bytes((tmp_path / "ops.odt").read_bytes())
    assert _read(renamed)[2] is DocType.ODT


def test_an_odt_past_its_bounds_or_broken_is_one_line_naming_the_file(tmp_path: Path) -> None:
    big = write_odt(tmp_path / "big.odt", "<text:p>x</text:p>" * 20_000)
    with pytest.raises(InvalidInput, match=r"big\.odt: the ODT package unpacks to \d+ bytes"):
        _read(big, max_bytes=20_000)
    entity = '<!DOCTYPE x [<!ENTITY e "boom">]>'
    broken = tmp_path / "broken.odt"
    with zipfile.ZipFile(broken, "w") as package:
        package.writestr("mimetype", "application/vnd.oasis.opendocument.text")
        package.writestr("content.xml", f"{entity}<office:document-content {_NS}>&e;")
    with pytest.raises(InvalidInput, match=r"broken\.odt: cannot read this ODT: its content\.xml"):
        _read(broken)
    locked = tmp_path / "locked.odt"
    manifest = (
        '<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0">'
        '<manifest:file-entry manifest:full-path="content.xml"><manifest:encryption-data/>'
        "</manifest:file-entry></manifest:manifest>"
    )
    with zipfile.ZipFile(locked, "w") as package:
        package.writestr("META-INF/manifest.xml", manifest)
        package.writestr("content.xml", b"\x8f\x01 encrypted")
    with pytest.raises(InvalidInput, match=r"locked\.odt: the ODT is encrypted with a password"):
        _read(locked)


def test_rtf_is_read_with_its_paragraphs_whatever_its_name(tmp_path: Path) -> None:
    # Before: refused ("an RTF document is not read (save it as .docx or .pdf)").
    rtf = (
        b"{\\rtf1\\ansi\\ansicpg1252\\deff0{\\fonttbl{\\f0 Arial;}}{\\info{\\title Ops}}"
        b"\\f0\\pard Backups run nightly.\\par\\par The caf\\'e9 opens at \\u8364? 9.\\par}"
    )
    for name in ("notes.rtf", "notes.txt", "notes"):
        path = tmp_path / name
        path.write_bytes(rtf)
        document = extract(Fetched(parse_source(str(path)), path.read_bytes()), 1_000_000)
        assert document.doc_type is DocType.RTF
        assert document.text == "Backups run nightly.\n\nThe café opens at € 9."
        assert document.title == "Ops"


def test_an_rtf_is_read_in_its_code_page_and_titled_by_its_info(
    make_knowledge: MakeKnowledge, tmp_path: Path
) -> None:
    # Before: bytes written as they are (not `\'hh`) were read as Latin-1 whatever the code
    # page (`\ansicpg1251`: `Привет` read `Ïðèâåò`, a UTF-8 `Grüße` read `GrÃ¼Ãe`), and the
    # `\info` group's `\title` was left out: titled by its first line, as a document without.
    cyrillic = (
        b"{\\rtf1\\ansi\\ansicpg1251\\deff0{\\info{\\title \\'cf\\'eb\\'e0\\'ed "
        + "работ".encode("cp1251")
        + b"}}\\pard "
        + "Привет, смена.".encode("cp1251")
        + b"\\par}"
    )
    (tmp_path / "plan.rtf").write_bytes(cyrillic)
    assert _read(tmp_path / "plan.rtf")[:2] == ("План работ", "Привет, смена.")
    hits = make_knowledge().match("смена", source="plan.rtf").hits
    assert [h.line for h in hits] == ["Привет, смена."]
    utf8 = "{\\rtf1\\ansi\\ansicpg1252\\pard Grüße aus Köln, \\'e9t\\'e9.\\par}".encode()
    (tmp_path / "gruss.rtf").write_bytes(utf8)
    assert _read(tmp_path / "gruss.rtf")[:2] == ("Grüße aus Köln, été.", "Grüße aus Köln, été.")
    # No code page named: RTF's default, Windows-1252 (its quotes, not Latin-1's controls).
    quoted = b"{\\rtf1\\ansi\\pard \x93Quoted\x94 \xe9t\xe9.\\par}"
    (tmp_path / "quoted.rtf").write_bytes(quoted)
    assert _read(tmp_path / "quoted.rtf")[1] == "\u201cQuoted\u201d été."


def test_an_odt_paragraph_in_a_heading_style_is_a_heading(tmp_path: Path) -> None:
    # LibreOffice writes a heading that starts a page (its first, often) as a `text:p` of an
    # automatic style whose parent is "Heading 1".
    styles = (
        '<office:styles><style:style style:name="Heading_20_1" style:display-name="Heading 1" '
        'style:family="paragraph" style:default-outline-level="1"/></office:styles>'
    )
    body = '<text:p text:style-name="P1">Install</text:p><text:p>Run it twice.</text:p>'
    text = _read(write_odt(tmp_path / "install.odt", body, styles=styles))[1]
    assert text == "# Install\n\nRun it twice."


def test_an_odt_s_counts_do_not_inflate_its_text(tmp_path: Path) -> None:
    # A run of spaces is stored as a count (`text:s text:c`), a list's numbers as a start.
    # Before, each was made as counted: these 20 runs were 40 MB of text from a 1 kB file
    # (200 runs of a billion spaces: 200 GB asked for, the process killed), and a lettered
    # list starting at 10**7 made 385,000 letters an item (10**12: 38 billion).
    spaces = '<text:p>a<text:s text:c="2000000"/>b</text:p>' * 20
    lettered = (
        '<text:list text:style-name="L1"><text:list-item><text:list><text:list-item '
        'text:start-value="10000000"><text:p>deep</text:p></text:list-item></text:list>'
        "</text:list-item></text:list>"
    )
    text = _read(write_odt(tmp_path / "bomb.odt", spaces + lettered))[1]
    assert len(text) < 100_000
    assert text.splitlines()[0].startswith("a ") and text.splitlines()[0].endswith(" b")
    assert text.endswith("10000000) deep")


def test_an_rtf_nested_past_any_document_is_refused_before_it_is_read(tmp_path: Path) -> None:
    # Before: read, a group level at a time, ~85 bytes each: 2 MB of `{` took 190 MB, the
    # 50 MB a source may be 4 GB. A document's groups nest a few levels deep; braces written
    # as text (`\{`) open none.
    path = tmp_path / "deep.rtf"
    path.write_bytes(b"{\\rtf1\\ansi " + b"{" * 2_000_000 + b"x}")
    with pytest.raises(InvalidInput, match=r"deep\.rtf: its groups nest more than 1000 deep"):
        _read(path, max_bytes=4_000_000)
    braces = tmp_path / "braces.rtf"
    braces.write_bytes(b"{\\rtf1\\ansi {\\b " + b"\\{" * 5000 + b"}}")
    assert _read(braces)[1] == "{" * 5000


def test_an_rtf_whose_binary_picture_holds_braces_is_read(tmp_path: Path) -> None:
    # A picture's raw bytes after `\binN` open no group; before, their `{` bytes counted as
    # groups and a real document was refused as nested past any document.
    path = tmp_path / "picture.rtf"
    picture = b"{" * 5000
    path.write_bytes(
        b"{\\rtf1\\ansi {\\pict\\wmetafile8\\bin5000 " + picture + b"}\\par Real text after it.}"
    )
    assert _read(path)[1].strip() == "Real text after it."


def test_an_odt_s_headers_and_footers_are_read_once_first_and_last(tmp_path: Path) -> None:
    # Before: left out (styles.xml was read for its styles only): the header a runbook's
    # every page carries, "ACME internal: OPS-114", was found by no search. As a DOCX's: each
    # line once however many page styles repeat it, page counts left out, a header or footer
    # switched off (`style:display="false"`) not read; the first page's, as LibreOffice
    # writes it in ODF 1.2 (`loext:footer-first`) or 1.3 (`style:footer-first`).
    header = "<style:header><text:p>ACME internal: OPS-114</text:p></style:header>"
    styles = (
        '<office:master-styles><style:master-page style:name="Standard">'
        f"{header}"
        '<style:header-left style:display="false"><text:p>Switched off</text:p>'
        "</style:header-left><style:footer><text:p>Page <text:page-number>1</text:page-number>"
        " of <text:page-count>3</text:page-count></text:p><style:region-right><text:p>"
        "Owner: platform team</text:p></style:region-right></style:footer></style:master-page>"
        f'<style:master-page style:name="Landscape">{header}<loext:footer-first xmlns:loext='
        '"urn:org:documentfoundation:names:experimental:office:xmlns:loext:1.0"><text:p>'
        "Printed copies are not controlled</text:p></loext:footer-first>"
        "</style:master-page></office:master-styles>"
    )
    body = '<text:h text:outline-level="1">Rotate keys</text:h><text:p>Monthly.</text:p>'
    text = _read(write_odt(tmp_path / "runbook.odt", body, styles=styles))[1]
    assert text == (
        "ACME internal: OPS-114\n\n# Rotate keys\n\nMonthly.\n\n"
        "Owner: platform team\n\nPrinted copies are not controlled"
    )


def test_an_odt_list_continued_after_a_paragraph_goes_on_numbering(tmp_path: Path) -> None:
    # Before: every `text:list` started again at its style's start: steps 3 and 4, after a
    # paragraph between them, read "1. Snapshot the volume" and "2. Restart the service", and
    # an item holding only a nested list counted as one. Now numbered as LibreOffice shows
    # them: `text:continue-numbering` goes on from the list before it if of the same style,
    # `text:continue-list` from the list it names (and those it continued), nested levels too.
    def item(text: str, inner: str = "") -> str:
        return f"<text:list-item><text:p>{text}</text:p>{inner}</text:list-item>"

    nested = f"<text:list>{item('check its size')}</text:list>"
    body = (
        f'<text:list xml:id="list1" text:style-name="L1">{item("Drain the node")}'
        f"{item('Stop the service')}</text:list><text:p>Wait for the alert to clear.</text:p>"
        f'<text:list xml:id="list2" text:continue-numbering="true" text:style-name="L1">'
        f"{item('Snapshot the volume', nested)}</text:list><text:p>Elsewhere:</text:p>"
        f'<text:list xml:id="list3" text:style-name="L1">{item("Unrelated")}</text:list>'
        '<text:list text:continue-numbering="true"><text:list-item><text:p>a bullet'
        '</text:p></text:list-item></text:list><text:list text:continue-list="list2" '
        'text:style-name="L1"><text:list-item><text:list>'
        f"{item('verify its checksum')}</text:list></text:list-item>"
        f"{item('Restart the service')}</text:list>"
    )
    text = _read(write_odt(tmp_path / "steps.odt", body))[1]
    assert text.split("\n\n") == [
        "1. Drain the node",
        "2. Stop the service",
        "Wait for the alert to clear.",
        "3. Snapshot the volume",
        "a) check its size",
        "Elsewhere:",
        "1. Unrelated",
        "- a bullet",
        "b) verify its checksum",
        "4. Restart the service",
    ]


def test_an_odt_s_preformatted_paragraphs_are_one_code_block_as_they_show(tmp_path: Path) -> None:
    # Before: each line of a code sample in LibreOffice's "Preformatted Text" (or a style
    # built on it) was a paragraph of its own, its indentation and blank lines dropped:
    # "def rotate(key):\n\nreturn key[::-1]". Now one block as it shows, as a DOCX's.
    styles = (
        '<office:styles><style:style style:name="Preformatted_20_Text" style:display-name='
        '"Preformatted Text" style:family="paragraph"/><style:style style:name="Shell" '
        'style:family="paragraph" style:parent-style-name="Preformatted_20_Text"/>'
        "</office:styles>"
    )
    code = '<text:p text:style-name="Preformatted_20_Text">'
    body = (
        f"<text:p>Run:</text:p>{code}def rotate(key):</text:p><text:soft-page-break/>"
        f'{code}<text:s text:c="4"/>return key[::-1]</text:p>{code}</text:p>'
        '<text:p text:style-name="Shell">rotate("k") <text:s/># twice</text:p>'
        "<text:p>Done.</text:p>"
    )
    text = _read(write_odt(tmp_path / "code.odt", body, styles=styles))[1]
    assert text == 'Run:\n\ndef rotate(key):\n    return key[::-1]\n\nrotate("k")  # twice\n\nDone.'
