"""Extraction of PDF, DOCX, Markdown and text: titles, headings, lists, tables and code, and
files refused by name when corrupt, images only, locked, too large unpacked or too slow."""

from __future__ import annotations

import io
import struct
import tracemalloc
import zipfile
import zlib
from pathlib import Path

import pytest

from octobrain.errors import InvalidInput
from octobrain.knowledge.extract import DocType, extract
from octobrain.knowledge.sources import Fetched, parse_source, read_file
from tests.knowledge.sources_extract_support import extracted, written

from .conftest import write_docx, write_pdf


def test_pdf_text_and_title(tmp_path: Path) -> None:
    pdf = write_pdf(
        tmp_path / "paper.pdf",
        [["Sharded counters", "Writes go to one of sixteen shards."], ["Reads sum every shard."]],
        title="Counter design",
    )
    title, kind, text = extracted(pdf)
    assert (title, kind) == ("Counter design", DocType.PDF)
    assert "sixteen shards" in text and "Reads sum every shard." in text


def test_docx_headings_lists_and_tables(tmp_path: Path) -> None:
    title, kind, text = extracted(write_docx(tmp_path / "handbook.docx"))
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
    _, _, text = extracted(tmp_path / "code.docx")
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
    _, _, text = extracted(full)
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
    assert extracted(saved)[0] == "Ops handbook"


def test_markdown_and_text_titles(tmp_path: Path) -> None:
    md = written(tmp_path / "a.md", b"Some preface\n\n# Real title\n\nBody.\n")
    assert extracted(md)[:2] == ("Real title", DocType.MARKDOWN)
    txt = written(tmp_path / "a.txt", b"\n\n  First line here\r\nsecond\r\n")
    assert extracted(txt) == ("First line here", DocType.TEXT, "First line here\nsecond")


def test_binary_content_named_as_text_is_refused_and_utf16_text_is_read(tmp_path: Path) -> None:
    # Before: a program copied to `ls.txt` was indexed as 191 chunks of Latin-1 garbage.
    program = written(tmp_path / "ls.txt", b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256)))
    with pytest.raises(InvalidInput, match=r"^source: .*ls\.txt: holds NUL bytes: binary content"):
        extract(Fetched(parse_source(str(program)), program.read_bytes()), 1_000_000)
    # An RTF file (LibreOffice's, Word's) was indexed as text: its font table and control
    # words, titled `{\rtf1\ansi\deff3`; it is read as RTF (`test_odt_rtf.py`).
    wide = written(tmp_path / "wide.md", "\ufeff# Titre\n\nTexte é.\n".encode("utf-16-le"))
    assert extracted(wide)[:2] == ("Titre", DocType.MARKDOWN)


def test_corrupt_pdf_is_a_clear_error(tmp_path: Path) -> None:
    bad = written(tmp_path / "broken.pdf", b"%PDF-1.4\nthis is not really a pdf")
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
        extracted(scan)
    writer = PdfWriter(clone_from=write_pdf(tmp_path / "locked.pdf", [["Secret plans."]]))
    writer.encrypt("hunter2")
    writer.write(tmp_path / "locked.pdf")
    with pytest.raises(InvalidInput, match=r"^source: .*locked\.pdf: the PDF is encrypted"):
        extracted(tmp_path / "locked.pdf")


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
