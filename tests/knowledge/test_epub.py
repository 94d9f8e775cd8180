"""EPUB books: spine order, a section per document, the book's title; each guard on the zip."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

from octobrain.cli.main import main
from octobrain.errors import InvalidInput
from octobrain.knowledge.extract import DocType, extract
from octobrain.knowledge.sources import parse_source, read_file

CONTAINER = (
    '<?xml version="1.0"?><container version="1.0" '
    'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
    '<rootfile full-path="{opf}" media-type="application/oebps-package+xml"/>'
    "</rootfiles></container>"
)
XHTML = (
    '<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml">'
    "<head><title>{title}</title></head><body>{body}</body></html>"
)
# The book as a reader shows it: the cover image, the navigation document (not in the text),
# two chapters, a note pop-up out of the reading order (`linear="no"`), listed in the manifest
# out of spine order.
CHAPTERS = {
    "nav.xhtml": ("Contents", '<nav epub:type="toc"><ol><li>Chapter list entry</li></ol></nav>'),
    "notes.xhtml": ("Notes", "<p>A pop-up note about salt.</p>"),
    "ch2.xhtml": (
        "Winter",
        "<section><header><h1>Winter Stores</h1></header><p>Granaries were sealed with clay."
        '</p><img src="plate.png" alt="a plate"/><h2>Salt</h2><p>Fish was packed in salt.</p>'
        "</section>",
    ),
    "ch1.xhtml": ("Spring Sowing", "<p>Barley went in after the thaw.</p>"),
}
SPINE = '<itemref idref="nav"/><itemref idref="ch1"/><itemref idref="notes" linear="no"/>' + (
    '<itemref idref="ch2"/>'
)


def write_epub(
    path: Path,
    *,
    opf_path: str = "OEBPS/content.opf",
    spine: str = SPINE,
    chapters: dict[str, tuple[str, str]] = CHAPTERS,
    extra: Sequence[tuple[str, bytes]] = (),
    leave_out: Sequence[str] = (),
    replace: tuple[str, str] = ("", ""),
    doctype: str = "",
) -> Path:
    """An EPUB of `chapters` (file: (title, body)) under OEBPS/, titled "The Farm Year", each
    declaring `doctype` after its XML declaration."""
    manifest = "".join(
        f'<item id="{name.split(".")[0]}" href="{name}" media-type="application/xhtml+xml"'
        + (' properties="nav"/>' if name == "nav.xhtml" else "/>")
        for name in chapters
    )
    opf = (
        '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
        '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>The Farm Year'
        f'</dc:title></metadata><manifest>{manifest}<item id="plate" href="plate.png" '
        f'media-type="image/png"/></manifest><spine>{spine}</spine></package>'
    )
    entries = [
        ("META-INF/container.xml", CONTAINER.format(opf=opf_path).encode()),
        (opf_path, opf.replace(*replace).encode() if replace[0] else opf.encode()),
        ("OEBPS/plate.png", b"\x89PNG\r\n\x1a\n"),
    ]
    for name, (title, body) in chapters.items():
        xhtml = XHTML.format(title=title, body=body).replace("?>", "?>" + doctype, 1)
        entries.append((f"OEBPS/{name}", xhtml.encode()))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as book:
        book.writestr("mimetype", "application/epub+zip", zipfile.ZIP_STORED)
        for name, data in [*entries, *extra]:
            if name not in leave_out:
                book.writestr(name, data)
    return path


def _read(path: Path, max_bytes: int = 1 << 20) -> tuple[str, str, DocType]:
    document = extract(read_file(parse_source(str(path)), max_bytes), max_bytes)
    return document.title, document.text, document.doc_type


def test_an_epub_reads_its_spine_in_order_a_section_a_document(tmp_path: Path) -> None:
    title, text, doc_type = _read(write_epub(tmp_path / "farm.epub"))
    assert (title, doc_type) == ("The Farm Year", DocType.EPUB)
    assert text == (
        "# Spring Sowing\n\nBarley went in after the thaw.\n\n"  # (no heading: its <title>)
        "# Winter Stores\n\nGranaries were sealed with clay.\n\n## Salt\n\nFish was packed in salt."
    )  # the navigation document, the pop-up note and the image left out
    renamed = tmp_path / "farm.bin"  # no extension: known by its first entry
    renamed.write_bytes((tmp_path / "farm.epub").read_bytes())
    assert _read(renamed)[2] is DocType.EPUB


def test_index_read_and_search_an_epub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("OCTOBRAIN_EMBEDDING_MODEL", "hash:64")
    monkeypatch.delenv("OCTOBRAIN_CONFIG_PATH", raising=False)
    monkeypatch.chdir(tmp_path)
    write_epub(tmp_path / "farm.epub")

    def run(*args: str) -> str:
        result = CliRunner().invoke(main, ["knowledge", "--scope", "github.com/acme/farm", *args])
        assert result.exit_code == 0, result.output
        return result.output

    assert "✓ Indexed" in run("index", "farm.epub")
    page = run("read", "farm.epub")
    assert "The Farm Year" in page and "Type: epub" in page and "Fish was packed in salt" in page
    hits = json.loads(run("search", "fish packed in salt", "--format", "json"))["hits"]
    assert hits[0]["section_path"] == ["Winter Stores", "Salt"]
    assert "pop-up note" not in page and "Chapter list entry" not in page


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"leave_out": ["META-INF/container.xml"]}, "it has no META-INF/container.xml"),
        ({"leave_out": ["OEBPS/content.opf"]}, "it has no OEBPS/content.opf"),
        ({"opf_path": "../content.opf"}, 'the path "../content.opf" leads out of the book'),
        (
            {
                "spine": '<itemref idref="ch1"/><itemref idref="gone"/>',
                "chapters": {"ch1.xhtml": ("One", "<p>x</p>"), "gone.xhtml": ("Gone", "<p>y</p>")},
                "leave_out": ["OEBPS/gone.xhtml"],
            },
            'its spine names "gone.xhtml", which the zip does',
        ),
        ({"spine": ""}, "its spine names no XHTML document"),
        (
            {"replace": ('href="ch1.xhtml"', 'href="../../ch1.xhtml"')},
            'the path "../../ch1.xhtml" leads out of the book',
        ),
        ({"replace": ("<spine>", "<spin>")}, "is not well-formed XML"),
        ({"extra": [("OEBPS/evil.opf", b"<package><spine>")]}, None),
    ],
)
def test_a_broken_epub_is_one_line_naming_the_file_and_what_is_wrong(
    tmp_path: Path, edit: dict[str, object], message: str | None
) -> None:
    path = write_epub(tmp_path / "broken.epub", **edit)  # type: ignore[arg-type]
    if message is None:  # an unused entry that is not well-formed does no harm
        assert "Barley" in _read(path)[1]
        return
    with pytest.raises(InvalidInput) as raised:
        _read(path)
    assert str(raised.value).startswith(f"source: {path.resolve().as_uri()}: cannot read this EPUB")
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_a_drm_encrypted_epub_is_refused_saying_so(tmp_path: Path) -> None:
    def encryption(uri: str) -> tuple[str, bytes]:
        return "META-INF/encryption.xml", (
            '<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
            'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData><enc:CipherData>'
            f'<enc:CipherReference URI="{uri}"/></enc:CipherData></enc:EncryptedData></encryption>'
        ).encode()

    locked = write_epub(tmp_path / "locked.epub", extra=[encryption("OEBPS/ch1.xhtml")])
    with pytest.raises(InvalidInput, match=r"^source: .*locked\.epub: the EPUB's documents are "):
        _read(locked)
    fonts = write_epub(tmp_path / "fonts.epub", extra=[encryption("OEBPS/font.otf")])
    assert "Barley" in _read(fonts)[1]  # an obfuscated font is no matter


def test_an_epub_that_unpacks_too_far_or_lists_too_many_entries_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from octobrain.knowledge import epub_text

    bomb = write_epub(tmp_path / "bomb.epub", extra=[("OEBPS/zeros.bin", bytes(11 << 20))])
    assert bomb.stat().st_size < 1 << 20
    with pytest.raises(InvalidInput, match=r"the EPUB package unpacks to \d+ bytes or more, over"):
        _read(bomb)
    monkeypatch.setattr(epub_text, "EPUB_ENTRIES", 5)
    with pytest.raises(InvalidInput, match=r"cannot read this EPUB: its zip lists 8 entries, ov"):
        _read(write_epub(tmp_path / "many.epub"))


def test_an_epub_of_documents_past_the_markup_bound_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from octobrain.knowledge import epub_text

    monkeypatch.setattr(epub_text, "EPUB_MARKUP_BYTES", 300)
    with pytest.raises(InvalidInput, match=r"long\.epub: the EPUB's documents hold \d+ bytes of"):
        _read(write_epub(tmp_path / "long.epub"))


def test_a_chapter_titled_only_by_the_book_is_a_section_of_its_own(tmp_path: Path) -> None:
    # Before: a chapter with no heading whose <title> is the book's (as Calibre and many
    # converters write them) was read as more of the chapter before it: "Threshing" under
    # "Spring Sowing". Now its table of contents entry heads it, else the book's title.
    chapters = {
        "nav.xhtml": ("Contents", '<nav><ol><li><a href="ch2.xhtml#top">Harvest Home</a>'
                                  "</li></ol></nav>"),
        "ch1.xhtml": ("Spring Sowing", "<p>Barley went in after the thaw.</p>"),
        "ch2.xhtml": ("The Farm Year", "<p>Threshing took the whole of October.</p>"),
        "ch3.xhtml": ("The Farm Year", "<p>Snow closed the lane.</p>"),
    }  # fmt: skip
    spine = '<itemref idref="ch1"/><itemref idref="ch2"/><itemref idref="ch3"/>'
    text = _read(write_epub(tmp_path / "farm.epub", spine=spine, chapters=chapters))[1]
    assert text == (
        "# Spring Sowing\n\nBarley went in after the thaw.\n\n"
        "# Harvest Home\n\nThreshing took the whole of October.\n\n"
        "# The Farm Year\n\nSnow closed the lane."
    )


def test_a_chapter_declaring_entities_reads_without_its_doctype_or_their_values(
    tmp_path: Path,
) -> None:
    # Before: an HTML parser ends a DOCTYPE at its first `>`, so a chapter declaring entities
    # (`<!DOCTYPE html [ <!ENTITY ...> ]>`) began with "]>", and its <title> fell into the
    # text ("]>Spring Sowing"). Its entities are still not expanded, nor read from a file.
    doctype = (
        '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.1//EN" "xhtml11.dtd" [ <!ENTITY farm "FARM">'
        ' <!-- "]>" --> <!ENTITY pw SYSTEM "file:///etc/passwd"> <!ENTITY gt2 \'>]\'> ]>'
    )
    chapters = {"ch1.xhtml": ("Spring Sowing", "<p>Barley &farm; went &pw; in.</p>")}
    path = write_epub(
        tmp_path / "farm.epub", spine='<itemref idref="ch1"/>', chapters=chapters, doctype=doctype
    )
    assert _read(path)[1] == "# Spring Sowing\n\nBarley &farm; went &pw; in."
    page = tmp_path / "ch1.xhtml"  # the chapter on its own, read as a web page
    with zipfile.ZipFile(path) as book:
        page.write_bytes(book.read("OEBPS/ch1.xhtml"))
    assert _read(page)[:2] == ("Spring Sowing", "Barley &farm; went &pw; in.")
