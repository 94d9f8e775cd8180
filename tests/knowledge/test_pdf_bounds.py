"""A PDF page's parse is bounded before pypdf parses it: by its content streams' inflated size
and by the drawing tokens of all the streams it parses together. What is done with its text
after (`PDF_SECONDS` no longer counting) reads each line once."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from octobrain.errors import InvalidInput
from octobrain.knowledge import pdf_pieces, pdf_text
from octobrain.knowledge.extract import extract
from octobrain.knowledge.sources import parse_source, read_file

from .conftest import write_pdf_objects, write_pdf_pages

_CAP = 1 << 20
_INTRO = "BT /F1 11 Tf 72 700 Td (The intro page.) Tj ET"
_CLOSING = "BT /F1 11 Tf 72 700 Td (The closing page.) Tj ET"
_HIDDEN = "BT /F1 11 Tf 72 700 Td (Hidden words.) Tj ET\n"


def _text(pdf: Path) -> str:
    return extract(read_file(parse_source(str(pdf)), _CAP), _CAP).text


def _filler(kind: str, size: int) -> str:
    """`size` bytes or more of content pypdf parses whole, slowly, before any operator is read:
    one hex string (0.5 s a megabyte), comment lines, one string literal."""
    if kind == "hex":
        return "<" + "ab" * (size // 2) + "> Tj"
    if kind == "comments":
        return "%\n" * (size // 2 + 1)
    return "(" + "a" * size + ") Tj"


@pytest.mark.parametrize("kind", ["hex", "comments", "string"])
def test_a_page_whose_content_inflates_past_the_bound_is_left_out_before_it_is_parsed(
    tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    # 75 MB inflated (pypdf's own bound; 75 kB compressed) of one hex string was parsed for
    # 36 s before the time was first read; of comment lines 15 s, of a string literal 7 s.
    from octobrain.knowledge.pdf_streams import PDF_STREAM_BYTES

    body = _HIDDEN + _filler(kind, PDF_STREAM_BYTES)
    pdf = write_pdf_pages(tmp_path / "big.pdf", [_INTRO, body, _CLOSING], deflate=True)
    with caplog.at_level("WARNING", logger="octobrain.knowledge.extract"):
        assert _text(pdf) == "The intro page.\n\nThe closing page."
    assert (
        f"page 2 of the PDF has a content stream that inflates to {PDF_STREAM_BYTES + 1} bytes "
        f"or more, over the {PDF_STREAM_BYTES}-byte bound on one: its text is left out"
    ) in caplog.text


def test_a_page_drawing_a_form_that_inflates_past_the_bound_is_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from octobrain.knowledge import pdf_streams

    monkeypatch.setattr(pdf_streams, "PDF_STREAM_BYTES", 1_000)
    form = _filler("hex", 1_000)
    pdf = write_pdf_pages(tmp_path / "f.pdf", [_INTRO, _HIDDEN + "/Fm1 Do"], form=form)
    with caplog.at_level("WARNING", logger="octobrain.knowledge.extract"):
        assert _text(pdf) == "The intro page."
    assert "page 2 of the PDF has a content stream that inflates to 1005 bytes or more" in (
        caplog.text
    )
    only = write_pdf_pages(tmp_path / "only.pdf", [_HIDDEN + "/Fm1 Do"], form=form)
    with pytest.raises(
        InvalidInput,
        match=r"every page of the PDF with text has a content stream that inflates to 1005 bytes "
        r"or more, over the 1000-byte bound on one \(1 of 1\); nothing was indexed",
    ):
        _text(only)


def _nested_forms_pdf(path: Path, body: str, large: str) -> Path:
    """A page drawing `body`, its resources naming a form /Fm1 of a line of text and a form
    /Fm2 that draws its own /Fm1, of `large`."""
    font = b"/Resources << /Font << /F1 3 0 R >>"

    def form(resources: bytes, data: str) -> bytes:
        head = b"<< /Type /XObject /Subtype /Form /BBox [0 0 612 792] " + resources + b" >>"
        return head[:-3] + f" /Length {len(data)} >>\nstream\n{data}\nendstream".encode()

    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 5 0 R "
        + font
        + b" /XObject << /Fm1 6 0 R /Fm2 7 0 R >> >> >>",
        f"<< /Length {len(body)} >>\nstream\n{body}\nendstream".encode(),
        form(font + b" >>", "BT /F1 11 Tf 72 700 Td (The form of the page.) Tj ET"),
        form(font + b" /XObject << /Fm1 8 0 R >> >>", "/Fm1 Do"),
        form(font + b" >>", large),
    ]
    return write_pdf_objects(path, objects)


def test_a_form_is_measured_as_the_resources_it_is_drawn_by_name_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Forms too large were kept by name across every resource dictionary: a page drawing its
    # own small /Fm1 was left out because a form it holds draws another /Fm1, over the bound.
    from octobrain.knowledge import pdf_streams

    monkeypatch.setattr(pdf_streams, "PDF_STREAM_BYTES", 1_000)
    large = "BT /F1 11 Tf 72 650 Td (The nested form.) Tj ET\n" + _filler("comments", 1_000)
    own = _nested_forms_pdf(tmp_path / "own.pdf", "/Fm1 Do", large)
    assert _text(own) == "The form of the page."
    nested = _nested_forms_pdf(tmp_path / "nested.pdf", "/Fm1 Do /Fm2 Do", large)
    with pytest.raises(InvalidInput, match=r"inflates to 1050 bytes or more, over the 1000-byte"):
        _text(nested)
    monkeypatch.setattr(pdf_streams, "PDF_STREAM_BYTES", 2_000)
    assert _text(nested) == "The form of the page.\nThe nested form."


def test_a_content_stream_of_the_bound_is_read_and_one_byte_more_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from octobrain.knowledge import pdf_streams

    body = _HIDDEN + " " * (1_000 - len(_HIDDEN))
    assert len(body) == 1_000
    pdf = write_pdf_pages(tmp_path / "edge.pdf", [_INTRO, body, _CLOSING], deflate=True)
    monkeypatch.setattr(pdf_streams, "PDF_STREAM_BYTES", 1_000)
    assert "Hidden words." in _text(pdf)
    monkeypatch.setattr(pdf_streams, "PDF_STREAM_BYTES", 999)
    assert _text(pdf) == "The intro page.\n\nThe closing page."


def test_a_form_drawn_again_and_again_counts_its_tokens_each_time_it_is_drawn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The token bound was on each stream: a form of 499,999 tokens drawn 5,000 times was
    # parsed anew each time (2 s here), stopped only by `PDF_SECONDS`.
    from octobrain.knowledge import extract as extraction

    monkeypatch.setattr(extraction, "PDF_PAGE_TOKENS", 1_000)
    form = "0 0 m " * 200 + "BT /F1 11 Tf 72 700 Td (Drawn by the form.) Tj ET"  # 610 tokens
    once = write_pdf_pages(tmp_path / "once.pdf", [_INTRO, "/Fm1 Do"], form=form)
    assert "Drawn by the form." in _text(once)
    thrice = write_pdf_pages(tmp_path / "thrice.pdf", [_INTRO, "/Fm1 Do " * 3], form=form)
    with caplog.at_level("WARNING", logger="octobrain.knowledge.extract"):
        assert _text(thrice) == "The intro page."
    assert "page 2 of the PDF has over 1000 drawing tokens: its text is left out" in caplog.text


def test_a_page_past_another_limit_of_pypdfs_is_left_out_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # An array of 100,001 numbers (200 kB; pypdf's bound on one array is 100,000) was reported
    # as "over 500000 drawing tokens", a bound the page is far below.
    body = _HIDDEN + "BT [" + "0 " * 100_001 + "] TJ ET"
    pdf = write_pdf_pages(tmp_path / "array.pdf", [_INTRO, body, _CLOSING])
    with caplog.at_level("WARNING", logger="octobrain.knowledge.extract"):
        assert _text(pdf) == "The intro page.\n\nThe closing page."
    assert (
        "page 2 of the PDF reaches a limit of pypdf's (Reached maximum array element count): "
        "its text is left out"
    ) in caplog.text
    assert "drawing tokens" not in caplog.text
    from octobrain.knowledge import extract as extraction

    monkeypatch.setattr(extraction, "PDF_PAGE_TOKENS", 1_000)  # (reached inside the array)
    caplog.clear()
    with caplog.at_level("WARNING", logger="octobrain.knowledge.extract"):
        assert _text(pdf) == "The intro page.\n\nThe closing page."
    assert "page 2 of the PDF has over 1000 drawing tokens: its text is left out" in caplog.text


def test_a_page_of_one_long_word_is_read_and_its_cut_words_still_join(tmp_path: Path) -> None:
    # Joining words cut at a line end read on from each letter of a word to its end: one word
    # of 40,000 letters (one `Tj`, 250 bytes compressed) took 74 s; of 200,000, half an hour.
    word = "a" * 200_000
    lines = ["Word list:", word, "The infor-", "mation desk opens.", "Ask for information."]
    body = "BT /F1 11 Tf 14 TL 72 760 Td " + " ".join(f"({line}) Tj T*" for line in lines) + " ET"
    pdf = write_pdf_pages(tmp_path / "word.pdf", [body], deflate=True)
    text = _text(pdf)
    assert word in text.split("\n")
    assert "The information\ndesk opens." in text


def test_a_page_of_many_note_like_lines_keeps_them_in_its_text() -> None:
    # The run of `[^1]: …` lines that ends a page (its footnotes) was looked for from each
    # such line and read on to the page's end: 8,000 of them before a line of text took
    # 1.9 s, 40,000 minutes (a page's text may be megabytes). Lines of that shape but not the
    # last stay text.
    lines = ["[^1]: a"] * 100_000
    page = "\n".join(["Intro.", *lines, "The end.", "[^2]: The real note."])
    assert pdf_text.tidy(SimpleNamespace(outline=[]), [page]).split("\n") == [
        "Intro.",
        *lines,
        "The end.",
        "",
        "[^2]: The real note.",
    ]


def test_a_footnote_of_many_lines_reads_as_one() -> None:
    # Each line of a footnote at a page's foot was added to its text by copying it: a note
    # of 80,000 lines took 2 s, of the 250,000 a page's drawing tokens allow, about 20 s.
    visitor = pdf_pieces.PageText()
    drawn = [("The budget", 72, 700, 12), ("1", 130, 704, 7), (" resets.\n", 135, 700, 12)]
    drawn += [("Body words " * 400_000 + "\n", 72, 690, 12), ("1 The note\n", 72, 100, 8)]
    drawn += [("runs on\n", 72, 90, 8)] * 250_000
    for text, x, y, size in drawn:
        visitor(text, [1, 0, 0, 1, 0, 0], [1, 0, 0, 1, x, y], {}, size)
    text = visitor.text("".join(piece[0] for piece in drawn))
    assert text.endswith("\n[^1]: The note " + " ".join(["runs on"] * 250_000))
    assert text.startswith("The budget[^1] resets.\nBody words")


def _outlined_pdf(path: Path, bookmarks: int) -> Path:
    """A one-page PDF ("Rotation" then a line of text) whose outline lists `bookmarks`
    bookmarks to that page, each titled "Rotation"."""
    body = "BT /F1 11 Tf 14 TL 72 760 Td (Rotation) Tj T* (Rotate the keys.) Tj ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R /Outlines 6 0 R >>",
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 5 0 R "
        b"/Resources << /Font << /F1 3 0 R >> >> >>",
        f"<< /Length {len(body)} >>\nstream\n{body}\nendstream".encode(),
        f"<< /Type /Outlines /First 7 0 R /Last {6 + bookmarks} 0 R >>".encode(),
    ]
    for n in range(7, 7 + bookmarks):
        after = f" /Next {n + 1} 0 R" if n < 6 + bookmarks else ""
        objects.append(f"<< /Title (Rotation) /Parent 6 0 R{after} /Dest [4 0 R /Fit] >>".encode())
    return write_pdf_objects(path, objects)


def test_an_outline_of_more_bookmarks_than_the_bound_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Read whole after the pages, `PDF_SECONDS` no longer counting: pypdf builds each bookmark
    # in 0.2 ms and 6 kB, so 100,000 of them (an 11 MB PDF of one page) took 21 s of CPU and
    # 570 MB, and the 50 MB `max_source_bytes` lets in 440,000 (more in compressed objects).
    from pypdf import PdfReader

    built: list[int] = []
    build = PdfReader._build_outline_item
    monkeypatch.setattr(PdfReader, "_build_outline_item", lambda *a: built.append(1) or build(*a))
    monkeypatch.setattr(pdf_text, "PDF_BOOKMARKS", 20)
    assert _text(_outlined_pdf(tmp_path / "within.pdf", 20)) == "# Rotation\nRotate the keys."
    built.clear()
    assert _text(_outlined_pdf(tmp_path / "over.pdf", 21)) == "Rotation\nRotate the keys."
    assert len(built) <= 20  # (before: 21, and pypdf's own bound 100,000)


def _xref_stream_pdf(path: Path, listed: int) -> Path:
    """A one-page PDF whose cross-reference stream lists `listed` objects, those past its own
    pointing at its page (compressed: a few kilobytes)."""
    import zlib

    body = b"BT /F1 11 Tf 72 700 Td (Hello there.) Tj ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 5 0 R "
        b"/Resources << /Font << /F1 3 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(body), body),
    ]
    out, offsets = bytearray(b"%PDF-1.7\n"), []
    for number, obj in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, obj)
    rows = [b"\x00\x00\x00\x00\x00\xff"] + [
        b"\x01" + o.to_bytes(4, "big") + b"\x00" for o in offsets
    ]
    rows += [b"\x01" + offsets[3].to_bytes(4, "big") + b"\x00"] * (listed - len(rows))
    data = zlib.compress(b"".join(rows), 9)
    start = len(out)
    out += b"6 0 obj\n<< /Type /XRef /Size %d /W [1 4 1] /Root 1 0 R /Filter /FlateDecode " % listed
    out += b"/Length %d >>\nstream\n%s\nendstream\nendobj\nstartxref\n%d\n%%%%EOF\n" % (
        len(data),
        data,
        start,
    )
    path.write_bytes(bytes(out))
    return path


def test_a_cross_reference_stream_listing_more_objects_than_its_size_holds_is_refused(
    tmp_path: Path,
) -> None:
    # pypdf reads every entry a cross-reference stream lists (about 10 µs and 200 bytes each)
    # before any page, outside `PDF_SECONDS`, up to 2,000,000: an 18 kB PDF listing that many
    # took 20.5 s and 260 MB. A real PDF's object takes tens of bytes even compressed.
    small = _xref_stream_pdf(tmp_path / "small.pdf", 1_000)
    assert _text(small) == "Hello there."
    listing = _xref_stream_pdf(tmp_path / "listing.pdf", 200_000)
    assert listing.stat().st_size < 3_000
    with pytest.raises(InvalidInput, match=r"listing\.pdf: .*XRef stream entry limit .*> 100000"):
        _text(listing)
