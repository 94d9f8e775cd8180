"""Source arguments, local-file errors and extraction of every supported type."""

from __future__ import annotations

import io
import logging
import socket
import struct
import time
import tracemalloc
import zipfile
import zlib
from pathlib import Path

import pytest

from octobrain.errors import InvalidInput
from octobrain.knowledge.extract import DocType, extract
from octobrain.knowledge.sources import Fetched, SourceKind, parse_source, read_file

from .conftest import HTML_PAGE, write_docx, write_pdf


def test_sources_normalise_to_one_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = tmp_path / "guide.md"
    doc.write_text("# Guide\n")
    monkeypatch.setenv("HOME", str(tmp_path))
    uris = {
        parse_source("guide.md", cwd=tmp_path).uri,
        parse_source(str(doc)).uri,
        parse_source("~/guide.md").uri,
        parse_source(doc.as_uri()).uri,
        parse_source(f"file:{doc}").uri,  # (RFC 8089's one slash: read as a relative path)
        parse_source(f"FILE://localhost{doc}").uri,
    }
    assert uris == {doc.resolve().as_uri()}
    url = parse_source("https://Docs.Example.com/api/?v=2#frag")
    assert (url.kind, url.uri) == (SourceKind.URL, "https://docs.example.com/api?v=2")
    assert parse_source("stored://notes-1").kind is SourceKind.STORED
    for bad, field in [
        ("ftp://host/x", "source"),
        ("", "source"),
        ("stored://a b", "key"),
        ("notes\x00.md", "source"),
        ("file:///tmp/notes%00.md", "source"),
        ("file:notes.md", "source"),  # (not ./file:notes.md: a file: URI is absolute)
    ]:
        with pytest.raises(InvalidInput, match=f"^{field}: "):
            parse_source(bad)


def test_local_file_errors_name_the_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InvalidInput, match=r"^source: .* is a directory; give one file"):
        read_file(parse_source(str(tmp_path)), 1000)
    with pytest.raises(InvalidInput, match=r"^source: no such file: .*missing\.md"):
        read_file(parse_source(str(tmp_path / "missing.md")), 1000)
    (tmp_path / "a.md").symlink_to(tmp_path / "b.md")
    (tmp_path / "b.md").symlink_to(tmp_path / "a.md")
    with pytest.raises(InvalidInput, match=r"^source: cannot read .*: Too many levels of symbolic"):
        read_file(parse_source(str(tmp_path / "a.md")), 1000)  # a loop, not a swap
    monkeypatch.chdir(tmp_path)  # (a socket's path is bound to about 100 bytes)
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind("sock.md")  # a project may hold one: an agent's, a dev server's
        with pytest.raises(InvalidInput, match=r"^source: .*sock\.md is not a regular file$"):
            read_file(parse_source(str(tmp_path / "sock.md")), 1000)
    big = tmp_path / "big.txt"
    big.write_text("x" * 2000)
    with pytest.raises(
        InvalidInput, match=r"^source: .* over the 1000-byte cap .*max_source_bytes"
    ):
        read_file(parse_source(str(big)), 1000)
    binary = tmp_path / "blob.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(InvalidInput, match=r'^source: .* unsupported file type "\.bin"'):
        extract(read_file(parse_source(str(binary)), 10_000), 10_000)
    other = tmp_path / "settings.conf"
    other.write_text("timeout = 30\n")
    assert extract(read_file(parse_source(str(other)), 10_000), 10_000).doc_type is DocType.TEXT


def _extract(path: Path) -> tuple[str, DocType, str]:
    doc = extract(read_file(parse_source(str(path)), 1_000_000), 1_000_000)
    return doc.title, doc.doc_type, doc.text


def test_html_keeps_the_article_and_its_headings_without_chrome(tmp_path: Path) -> None:
    title, kind, text = _extract(_write(tmp_path / "page.html", HTML_PAGE))
    assert (title, kind) == ("Widget API reference", DocType.HTML)
    assert "## Pagination" in text and "## Errors" in text
    assert "Retry-After" in text and "- 404 means no such widget." in text
    for chrome in ("Navigation chrome", "Site banner", "cookie settings"):
        assert chrome not in text


def test_html_exported_by_a_word_processor_reads_a_line_a_paragraph_item_and_row(
    tmp_path: Path,
) -> None:
    # As LibreOffice and Word save a page: source lines wrapped inside a `<p>`, list items and
    # table cells holding `<p>`s. Each wrap was a line break ("The\ninformation …", so a
    # match for a phrase across it failed), items lost their "- ", and each cell was a
    # paragraph of its own, the table's rows unreadable.
    page = """<html><head><title>Runbook</title></head><body>
<h1>Runbook</h1>
<p align="justify">The
information retrieval service answers
within two seconds.<br>Escalate after that.</p>
<ol>
  <li><p>Download the
  release archive.</p></li>
  <li><p>Verify the checksum.</p></li>
</ol>
<table><tr><td><p>Error code</p></td><td><p>Meaning</p></td></tr>
<tr><td><p>E429</p></td><td><p>Quota</p><p>exceeded</p></td></tr></table>
<p>That is all there is to the runbook; the rest is in the wiki, with its history.</p>
</body></html>"""
    _, _, text = _extract(_write(tmp_path / "runbook.html", page.encode()))
    assert text.split("\n\n") == [
        "# Runbook",
        "The information retrieval service answers within two seconds.\nEscalate after that.",
        "1. Download the release archive.",
        "2. Verify the checksum.",
        "Error code | Meaning",
        "E429 | Quota exceeded",
        "That is all there is to the runbook; the rest is in the wiki, with its history.",
    ]


def test_html_that_is_all_article_keeps_its_bulleted_list_and_leaves_out_its_title(
    tmp_path: Path,
) -> None:
    # Readability drops a list of short items from the article it finds; on a page that is
    # nothing but its article (as a word processor saves one) the list was lost, unsaid.
    prose = "The retrieval service talks to the authentication service, as documented. " * 4
    page = (
        "<html><head><title>Handbook</title></head><body><h1>Handbook</h1>"
        f"<p>{prose}</p><p>{prose}</p><ul><li><p>Bullets are fine.</p></li>"
        "<li><p>Another bullet about throttling.</p></li><li><p>Третий пункт: кириллица.</p>"
        f"</li></ul><h2>Next</h2><p>{prose}</p></body></html>"
    )
    title, _, text = _extract(_write(tmp_path / "handbook.html", page.encode()))
    assert title == "Handbook" and text.startswith("# Handbook\n\nThe retrieval service")
    assert "- Another bullet about throttling.\n\n- Третий пункт: кириллица." in text


def test_html_nested_deeper_than_a_tree_still_gives_its_text(tmp_path: Path) -> None:
    # libxml2 stops 256 elements deep: such a page extracted to nothing at all.
    depth = 5_000
    page = (
        "<html><head><title>Generated report</title></head><body><nav>Site menu</nav>"
        + "<div>" * depth + "<p>Quarterly revenue\ngrew 12%.</p>" + "</div>" * depth
        + "<p>Figures are unaudited.</p><script>track()</script></body></html>"
    )  # fmt: skip
    title, kind, text = _extract(_write(tmp_path / "deep.html", page.encode()))
    assert (title, kind) == ("Generated report", DocType.HTML)
    assert text == "Quarterly revenue grew 12%.\n\nFigures are unaudited."


@pytest.mark.parametrize("depth", [0, 300])
@pytest.mark.parametrize("tail", ["<a " * 30_000, "<!--" * 25_000, "<a b='" * 15_000])
def test_html_with_a_tag_left_open_reads_as_a_browser_shows_it(
    tmp_path: Path, depth: int, tail: str
) -> None:
    # At every `<` of an unclosed tag or comment, readability's encoding guess and the flat
    # reader rescanned the rest of the page: 100 kB of `<a ` took 11 s on a page and 130 s
    # nested deep, and the flat reader then indexed the `<a <a …` itself.
    page = (
        "<html><head><title>Quarterly report</title></head><body>" + "<div>" * depth
        + "<p>Revenue grew 12%.</p>" + tail
    )  # fmt: skip
    title, _, text = _extract(_write(tmp_path / "open.html", page.encode()))
    assert title == "Quarterly report"
    assert text.endswith("Revenue grew 12%.") and "<" not in text


def test_a_deep_page_skips_a_bogus_section_and_a_pictures_title(tmp_path: Path) -> None:
    page = (
        "<div>" * 300 + "<p>Before.</p><![ x <p>After.</p>"
        + "<svg><title>icon</title></svg><p>End.</p>"
    )  # fmt: skip
    title, _, text = _extract(_write(tmp_path / "odd.html", page.encode()))
    assert text == "Before.\n\nAfter.\n\nEnd." and title != "icon"


@pytest.mark.parametrize("control", ["\x0b", "\x0c", "\x01", "\x1f", "\ufffe"])
def test_a_page_holding_a_control_character_is_read_without_a_logged_traceback(
    tmp_path: Path, control: str, caplog: pytest.LogCaptureFixture
) -> None:
    # lxml cannot set such a character as a text: readability, moving the text after the
    # first `<p>` into a new one, failed and logged "error getting summary" with a traceback.
    page = (
        "<html><head><title>Release notes</title></head><body><div>"
        f"<p>Version 2 ships the new importer.</p>Upgrades{control}need a reindex."
        f"<p>Rollback{control}is supported.</p></div></body></html>"
    )
    with caplog.at_level("DEBUG"):
        title, _, text = _extract(_write(tmp_path / "notes.html", page.encode()))
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert title == "Release notes"
    assert text == (
        "Version 2 ships the new importer.\n\nUpgrades need a reindex.\n\nRollback is supported."
    )


def test_pdf_text_and_title(tmp_path: Path) -> None:
    pdf = write_pdf(
        tmp_path / "paper.pdf",
        [["Sharded counters", "Writes go to one of sixteen shards."], ["Reads sum every shard."]],
        title="Counter design",
    )
    title, kind, text = _extract(pdf)
    assert (title, kind) == ("Counter design", DocType.PDF)
    assert "sixteen shards" in text and "Reads sum every shard." in text


def test_docx_headings_lists_and_tables(tmp_path: Path) -> None:
    title, kind, text = _extract(write_docx(tmp_path / "handbook.docx"))
    assert (title, kind) == ("Deployment handbook", DocType.DOCX)
    assert "# Rollbacks" in text and "## Database migrations" in text
    assert "- Run the canary first." in text
    assert "eu-west | platform team" in text


def test_docx_code_keeps_its_indentation(tmp_path: Path) -> None:
    # Each paragraph was stripped: a code sample lost the indentation that is its meaning.
    import docx

    document = docx.Document()
    document.add_heading("Rotation", level=1)
    for line in ("def rotate(keys):", "    for key in keys:", "\tkey.rotate()  # monthly"):
        document.add_paragraph(line)
    document.save(str(tmp_path / "code.docx"))
    _, _, text = _extract(tmp_path / "code.docx")
    assert text.split("\n\n") == [
        "# Rotation",
        "def rotate(keys):",
        "    for key in keys:",
        "\tkey.rotate()  # monthly",
    ]


def test_docx_text_in_controls_nested_tables_and_tracked_changes_is_read(tmp_path: Path) -> None:
    # Word templates and forms keep text in content controls; review copies carry tracked
    # changes; tables nest. Their text was left out of the index, without a word said.
    import docx

    document = docx.Document()
    document.add_paragraph("Opening paragraph.")
    outer = document.add_table(rows=1, cols=2)
    outer.cell(0, 0).text = "Service"
    inner = outer.cell(0, 1).add_table(rows=1, cols=2)
    inner.cell(0, 0).text, inner.cell(0, 1).text = "on-call rota", "weekly handover"
    plain = tmp_path / "plain.docx"
    document.save(str(plain))
    mc = 'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"'
    run = "<w:r><w:t>{}</w:t></w:r>".format
    added = "".join(
        (
            f"<w:sdt><w:sdtPr/><w:sdtContent><w:p>{run('Owner: platform team')}</w:p>"
            "</w:sdtContent></w:sdt>",
            f"<w:p>{run('Backups run ')}<w:ins w:id='1' w:author='a' w:date='2026-01-01T00:00:00Z'>"
            f"{run('hourly')}</w:ins><w:del w:id='2' w:author='a' w:date='2026-01-01T00:00:00Z'>"
            "<w:r><w:delText>daily</w:delText></w:r></w:del></w:p>",
            f"<w:p>{run('Region: ')}<w:sdt><w:sdtContent>{run('eu-west')}</w:sdtContent>"
            "</w:sdt></w:p>",
            f"<w:moveFrom w:id='3' w:author='a' w:date='2026-01-01T00:00:00Z'><w:p>"
            f"{run('Escalate to the lead.')}</w:p></w:moveFrom>",
            f"<w:moveTo w:id='4' w:author='a' w:date='2026-01-01T00:00:00Z'><w:p>"
            f"{run('Escalate to the lead.')}</w:p></w:moveTo>",
            f"<w:p><mc:AlternateContent {mc}><mc:Choice Requires='wps'>"
            f"<w:r><w:t>Boxed note.</w:t></w:r></mc:Choice><mc:Fallback>"
            f"<w:r><w:t>Boxed note.</w:t></w:r></mc:Fallback></mc:AlternateContent></w:p>",
        )
    ).encode()
    full = tmp_path / "full.docx"
    with zipfile.ZipFile(plain) as src, zipfile.ZipFile(full, "w", zipfile.ZIP_DEFLATED) as out:
        for part in src.infolist():
            body = src.read(part)
            if part.filename == "word/document.xml":
                body = body.replace(b"<w:sectPr", added + b"<w:sectPr", 1)
            out.writestr(part.filename, body)
    _, _, text = _extract(full)
    for seen in ("Opening paragraph.", "on-call rota | weekly handover", "Owner: platform team",
                 "Backups run hourly", "Region: eu-west"):  # fmt: skip
        assert seen in text, (seen, text)
    assert "daily" not in text  # deleted
    assert text.count("Escalate to the lead.") == 1 and text.count("Boxed note.") == 1, text
    assert text.index("Service") < text.index("on-call rota") < text.index("Owner")


@pytest.mark.parametrize(
    "relationship",
    [  # As LibreOffice names the part (as the standard's first edition did), or any name.
        b"http://schemas.openxmlformats.org/officedocument/2006/relationships/metadata/"
        b"core-properties",
        b"urn:x-unknown",
    ],
)
def test_docx_title_is_its_own_not_a_made_up_one(tmp_path: Path, relationship: bytes) -> None:
    # python-docx made up core properties titled "Word Document" for a DOCX saved by
    # LibreOffice: the title every chunk of it was indexed under.
    import docx

    plain = write_docx(tmp_path / "plain.docx")
    saved = tmp_path / "saved.docx"
    standard = (
        b"http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties"
    )
    with zipfile.ZipFile(plain) as src, zipfile.ZipFile(saved, "w") as out:
        for part in src.infolist():
            body = src.read(part)
            body = body.replace(b">Deployment handbook</dc:title>", b">Ops handbook</dc:title>")
            out.writestr(part, body.replace(standard, relationship))
    assert docx.Document(str(saved)).core_properties.title == "Word Document"  # (the cause)
    assert _extract(saved)[0] == "Ops handbook"


def test_markdown_and_text_titles(tmp_path: Path) -> None:
    md = _write(tmp_path / "a.md", b"Some preface\n\n# Real title\n\nBody.\n")
    assert _extract(md)[:2] == ("Real title", DocType.MARKDOWN)
    txt = _write(tmp_path / "a.txt", b"\n\n  First line here\r\nsecond\r\n")
    assert _extract(txt) == ("First line here", DocType.TEXT, "First line here\nsecond")


def test_binary_content_named_as_text_is_refused_and_utf16_text_is_read(tmp_path: Path) -> None:
    # Before: a program copied to `ls.txt` was indexed as 191 chunks of Latin-1 garbage.
    program = _write(tmp_path / "ls.txt", b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256)))
    with pytest.raises(InvalidInput, match=r"^source: .*ls\.txt: holds NUL bytes: binary content"):
        extract(Fetched(parse_source(str(program)), program.read_bytes()), 1_000_000)
    # An RTF file (LibreOffice's, Word's) was indexed as text: its font table and control
    # words, titled `{\rtf1\ansi\deff3`; it is read as RTF (`test_odt_rtf.py`).
    wide = _write(tmp_path / "wide.md", "\ufeff# Titre\n\nTexte é.\n".encode("utf-16-le"))
    assert _extract(wide)[:2] == ("Titre", DocType.MARKDOWN)


def test_corrupt_pdf_is_a_clear_error(tmp_path: Path) -> None:
    bad = _write(tmp_path / "broken.pdf", b"%PDF-1.4\nthis is not really a pdf")
    with pytest.raises(InvalidInput, match=r"^source: .*cannot read this pdf document"):
        extract(Fetched(parse_source(str(bad)), bad.read_bytes()), 1_000_000)


def test_a_pdf_of_images_only_or_locked_is_refused_naming_it(tmp_path: Path) -> None:
    # A scan's PDF (pages of images, no text) was indexed as 0 chunks with a ✓; a locked
    # PDF's error did not name the file among several indexed.
    from pypdf import PdfWriter

    from .conftest import write_pdf_pages

    scan = write_pdf_pages(tmp_path / "scan.pdf", ["0 0 0 rg 72 72 400 600 re f", "q Q"])
    with pytest.raises(
        InvalidInput,
        match=r"^source: .*scan\.pdf: the PDF's 2 page\(s\) hold no text \(only images, as a "
        r"scan's pages are: make its text searchable first, e\.g\. `ocrmypdf`\); nothing was",
    ):
        _extract(scan)
    writer = PdfWriter(clone_from=write_pdf(tmp_path / "locked.pdf", [["Secret plans."]]))
    writer.encrypt("hunter2")
    writer.write(tmp_path / "locked.pdf")
    with pytest.raises(InvalidInput, match=r"^source: .*locked\.pdf: the PDF is encrypted"):
        _extract(tmp_path / "locked.pdf")


def _png(side: int = 1) -> bytes:
    """A real grey PNG, `side` pixels square."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    header = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)
    rows = b"".join(b"\x00" + b"\x80" * side for _ in range(side))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def test_a_docx_that_unpacks_past_the_cap_is_refused_before_it_is_read(tmp_path: Path) -> None:
    import docx

    document = docx.Document()
    document.add_paragraph("The handbook, with a picture.")
    document.add_picture(io.BytesIO(_png()))
    plain = tmp_path / "plain.docx"
    document.save(str(plain))
    assert "with a picture" in extract(read_file(parse_source(str(plain)), 200_000), 200_000).text
    # The picture's part swapped for 64 MiB of zeros: a 64 KiB file python-docx reads whole.
    bomb = tmp_path / "bomb.docx"
    with zipfile.ZipFile(plain) as src, zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as out:
        for part in src.infolist():
            body = src.read(part)
            out.writestr(part.filename, bytes(64 << 20) if "media/" in part.filename else body)
    assert bomb.stat().st_size < 200_000
    tracemalloc.start()
    try:
        with pytest.raises(
            InvalidInput,
            match=r"DOCX package unpacks to \d+ bytes or more, over the 2000000-byte bound "
            r"\(10 × knowledge.max_source_bytes\)",
        ):
            extract(read_file(parse_source(str(bomb)), 200_000), 200_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak


def test_markup_too_large_to_parse_at_once_is_refused_before_it_is_parsed(
    tmp_path: Path,
) -> None:
    # A tree costs 40–90 times its markup: a DOCX of a few kB of compressed empty paragraphs
    # took a minute and a gigabyte, an HTML page of 50 MB would take gigabytes.
    import docx

    from octobrain.knowledge.unpacked import MARKUP_BYTES

    cap = 64 << 20
    plain = tmp_path / "plain.docx"
    document = docx.Document()
    document.add_paragraph("The handbook.")
    document.save(str(plain))
    empty = b"<w:p/>" * (MARKUP_BYTES // 6 + 1)
    padded = tmp_path / "padded.docx"
    with zipfile.ZipFile(plain) as src, zipfile.ZipFile(padded, "w", zipfile.ZIP_DEFLATED) as out:
        for part in src.infolist():
            body = src.read(part)
            if part.filename == "word/document.xml":
                body = body.replace(b"</w:body>", empty + b"</w:body>")
            out.writestr(part.filename, body)
    assert padded.stat().st_size < 200_000
    # The same document part renamed `word/document.bin`, the package's content types and
    # relationships following: the parts were counted by their names, so it went uncounted.
    renamed = tmp_path / "renamed.docx"
    with zipfile.ZipFile(padded) as src, zipfile.ZipFile(renamed, "w", zipfile.ZIP_DEFLATED) as out:
        for part in src.infolist():
            body = src.read(part).replace(b"word/document.xml", b"word/document.bin")
            body = body.replace(b'Target="document.xml"', b'Target="document.bin"')
            name = part.filename.replace("word/document.xml", "word/document.bin")
            out.writestr(name, body)
    started = time.monotonic()
    for docx_file in (padded, renamed):
        with pytest.raises(InvalidInput, match=r"DOCX's XML unpacks to \d+ bytes or more, over "):
            extract(read_file(parse_source(str(docx_file)), cap), cap)
    page = tmp_path / "page.html"
    page.write_bytes(b"<html><body>" + b"<p>x</p>" * (MARKUP_BYTES // 8 + 1) + b"</body></html>")
    with pytest.raises(InvalidInput, match=r"HTML unpacks to \d+ bytes or more, over the "):
        extract(read_file(parse_source(str(page)), cap), cap)
    assert time.monotonic() - started < 5
    small = tmp_path / "small.html"
    small.write_bytes(b"<html><body>" + b"<p>x</p>" * 1000 + b"</body></html>")
    assert extract(read_file(parse_source(str(small)), cap), cap).text.startswith("x")


def test_a_pdf_whose_pages_take_too_long_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from octobrain.knowledge import extract as extraction

    pdf = write_pdf(tmp_path / "long.pdf", [[f"page {i} of the handbook"] for i in range(40)])
    assert "page 39" in extract(read_file(parse_source(str(pdf)), 1 << 20), 1 << 20).text
    monkeypatch.setattr(extraction, "PDF_SECONDS", 0.0)
    with pytest.raises(InvalidInput, match=r"text was not out within 0 s \(0 of 40 pages read\)"):
        extract(read_file(parse_source(str(pdf)), 1 << 20), 1 << 20)


def test_a_pdf_page_that_takes_too_long_is_stopped_within_the_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The time bound was read between pages: one page drawing a form of 10 MB of whitespace
    # (10 kB compressed) 200 times took 156 s, parsed anew at each; 5,000 times, an hour.
    from octobrain.knowledge import extract as extraction

    from .conftest import write_pdf_pages

    class Clock:  # a second passes each time the time is read
        now = 0.0

        def monotonic(self) -> float:
            self.now += 1.0
            return self.now

    form = "BT /F1 11 Tf 72 700 Td (Drawn by the form.) Tj ET"
    pdf = write_pdf_pages(tmp_path / "forms.pdf", ["/Fm1 Do " * 100], form=form)
    assert extract(read_file(parse_source(str(pdf)), 1 << 20), 1 << 20).text.count("form.") == 100
    monkeypatch.setattr(extraction, "time", Clock())  # 60 s: 60 reads of the time
    with pytest.raises(InvalidInput, match=r"not out within 60 s \(0 of 1 pages read\); nothing"):
        extract(read_file(parse_source(str(pdf)), 1 << 20), 1 << 20)


def test_a_pdf_page_of_too_many_drawing_tokens_is_left_out_not_parsed_for_minutes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # One page of 990,000 operators, 10.7 kB compressed, took pypdf 27.5 s and 372 MB: the time
    # limit is read between pages. pypdf's token bound now stops such a page.
    from octobrain.knowledge import extract as extraction

    pages = [["The intro page."], [f"mark {i}" for i in range(1_000)], ["The closing page."]]
    pdf = write_pdf(tmp_path / "drawing.pdf", pages)
    monkeypatch.setattr(extraction, "PDF_PAGE_TOKENS", 1_000)  # the page holds 3,000
    with caplog.at_level("WARNING", logger="octobrain.knowledge.extract"):
        text = extract(read_file(parse_source(str(pdf)), 1 << 20), 1 << 20).text
    assert text == "The intro page.\n\nThe closing page."
    assert "page 2 of the PDF has over 1000 drawing tokens" in caplog.text
    monkeypatch.setattr(extraction, "PDF_PAGE_TOKENS", 10_000)
    assert "mark 999" in extract(read_file(parse_source(str(pdf)), 1 << 20), 1 << 20).text
    only = write_pdf(tmp_path / "only.pdf", pages[1:2])
    monkeypatch.setattr(extraction, "PDF_PAGE_TOKENS", 1_000)
    with pytest.raises(InvalidInput, match=r"over 1000 drawing tokens \(1 of 1\); nothing was"):
        extract(read_file(parse_source(str(only)), 1 << 20), 1 << 20)


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path
