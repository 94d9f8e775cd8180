"""Extraction of web pages: the article and its headings without chrome, a word processor's
export, pages nested deep, left open, holding control characters or too large to parse."""

from __future__ import annotations

import logging
import time
import zipfile
from pathlib import Path

import pytest

from octobrain.errors import InvalidInput
from octobrain.knowledge.extract import DocType, extract
from octobrain.knowledge.sources import parse_source, read_file
from tests.knowledge.sources_extract_support import extracted, written

from .conftest import HTML_PAGE


def test_html_keeps_the_article_and_its_headings_without_chrome(tmp_path: Path) -> None:
    title, kind, text = extracted(written(tmp_path / "page.html", HTML_PAGE))
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
    _, _, text = extracted(written(tmp_path / "runbook.html", page.encode()))
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
    title, _, text = extracted(written(tmp_path / "handbook.html", page.encode()))
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
    title, kind, text = extracted(written(tmp_path / "deep.html", page.encode()))
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
    title, _, text = extracted(written(tmp_path / "open.html", page.encode()))
    assert title == "Quarterly report"
    assert text.endswith("Revenue grew 12%.") and "<" not in text


def test_a_deep_page_skips_a_bogus_section_and_a_pictures_title(tmp_path: Path) -> None:
    page = (
        "<div>" * 300 + "<p>Before.</p><![ x <p>After.</p>"
        + "<svg><title>icon</title></svg><p>End.</p>"
    )  # fmt: skip
    title, _, text = extracted(written(tmp_path / "odd.html", page.encode()))
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
        title, _, text = extracted(written(tmp_path / "notes.html", page.encode()))
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert title == "Release notes"
    assert text == (
        "Version 2 ships the new importer.\n\nUpgrades need a reindex.\n\nRollback is supported."
    )


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
