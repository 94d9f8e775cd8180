"""PDF text as its pages read: words a line end hyphenates, running headers and footers,
ligatures, headings from the outline."""

from __future__ import annotations

import io
import logging
import sys
from pathlib import Path

import pytest

from octobrain.knowledge.extract import extract
from octobrain.knowledge.sources import parse_source, read_file

from .conftest import MakeKnowledge, pdf_escape, write_pdf, write_pdf_pages


def _text(path: Path) -> str:
    return extract(read_file(parse_source(str(path)), 1 << 20), 1 << 20).text


def test_a_word_hyphenated_at_a_line_end_is_found_and_reads_whole(
    make_knowledge: MakeKnowledge, tmp_path: Path
) -> None:
    # Justified text breaks words at line ends: `misunder-` / `stand` was two terms and two
    # lines, so neither a search nor a match for the word found it.
    write_pdf(
        tmp_path / "ops.pdf",
        [
            [
                "Operators occasionally misunder-",
                "stand the quaran-",
                "tine rota. A well-",
                "known fix: never misunderstand alerts.",
                "Pages are Lists-",
                "Of-Things, kept as they are.",
            ]
        ],
    )
    text = _text(tmp_path / "ops.pdf")
    assert text.splitlines()[:4] == [
        "Operators occasionally misunderstand",  # spelled so elsewhere: the word, whole
        "the quaran-tine",  # not: its parts and the word joined are both searchable
        "rota. A well-known",
        "fix: never misunderstand alerts.",
    ]
    assert "Lists-\nOf-Things" in text  # a capital after the hyphen: not a word cut
    k = make_knowledge()
    assert [h.line_number for h in k.match("misunderstand", source="ops.pdf").hits] == [1, 4]
    k.index("ops.pdf")
    (tmp_path / "other.md").write_text("# Other\n\nThe rota for the quarter is on the wall.\n")
    k.index("other.md")
    hits = k.search("quarantine").hits
    assert hits and hits[0].uri == (tmp_path / "ops.pdf").as_uri()


def test_running_headers_and_footers_are_left_out_of_the_text(tmp_path: Path) -> None:
    # Each page's header and footer were text of their own, repeated in every section and
    # found by every match for their words.
    steps = ["Rotate the keys.", "Renew the certificates.", "Drain the queue.", "Ship it."]
    pages = [
        [
            "ACME handbook - confidential",
            f"Step {n}: {step}",
            "ACME handbook - confidential",  # the body's own line: kept
            f"Then check the {step.split()[0].lower()} dashboard.",
            f"Row {10 * n}: {7 * n} kg",  # numbers that do not count the pages: kept
            f"Page {n} of 4",
        ]
        for n, step in enumerate(steps, 1)
    ]
    text = _text(write_pdf(tmp_path / "book.pdf", pages))
    assert text.count("ACME handbook - confidential") == 4 and "Page " not in text
    assert text.startswith("Step 1: Rotate the keys.\nACME handbook - confidential\nThen")
    assert text.endswith("Then check the ship dashboard.\nRow 40: 28 kg")


def test_ligatures_read_as_their_letters(make_knowledge: MakeKnowledge, tmp_path: Path) -> None:
    # A typeset PDF draws `fi` and `fl` as one glyph each; `match 'office'` missed `ofﬁce`.
    write_pdf(tmp_path / "memo.pdf", [["Our ofﬁce ﬂoor is closed on Friday."]])
    assert _text(tmp_path / "memo.pdf") == "Our office floor is closed on Friday."
    hits = make_knowledge().match("office floor", source="memo.pdf").hits
    assert [h.line for h in hits] == ["Our office floor is closed on Friday."]


def test_the_outline_gives_the_sections_their_heading_paths(
    make_knowledge: MakeKnowledge, tmp_path: Path
) -> None:
    # A PDF's bookmarks name its headings; its chunks had no section path at all.
    from pypdf import PdfWriter

    path = write_pdf(
        tmp_path / "guide.pdf",
        [
            ["Guide", "This guide covers the service from start to end."],
            ["Install", "Unpack the archive into the opt directory and run the installer."],
            ["Upgrade", "Stop the service, swap the binaries, then start it again."],
        ],
    )
    writer = PdfWriter(clone_from=path)
    top = writer.add_outline_item(title="Guide", page_number=0)
    writer.add_outline_item(title="Install", page_number=1, parent=top)
    writer.add_outline_item(title="Upgrade", page_number=2, parent=top)
    writer.add_outline_item(title="Not in the text", page_number=2, parent=top)
    writer.write(path)
    text = _text(path)
    assert [line for line in text.splitlines() if line.startswith("#")] == [
        "# Guide",
        "## Install",
        "## Upgrade",
    ]
    k = make_knowledge()
    k.index("guide.pdf")
    hits = k.search("swap the binaries").hits
    assert hits and hits[0].section_path == ("Guide", "Upgrade")


def test_a_damaged_pdf_is_one_warning_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pypdf logged a line for each fault it read around (`incorrect startxref pointer(2)`,
    # `parsing for Object Streams`), naming no file, onto the terminal or the server's stderr.
    from octobrain.cli.library_log import install

    path = write_pdf(tmp_path / "scan.pdf", [["The vault opens at dawn."]])
    data = path.read_bytes()
    path.write_bytes(data[: data.rindex(b"startxref")] + b"startxref\n999999\n%%EOF\n")
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    install()  # as the CLI and the server do: library warnings on stderr
    assert _text(path) == "The vault opens at dawn."
    assert err.getvalue() == (
        f"{path.as_uri()}: the PDF is damaged and was read around its faults (pypdf reported 2;"
        " the first: incorrect startxref pointer(2))\n"
    )


def test_a_raised_note_number_is_a_marker_apart_from_its_word(
    make_knowledge: MakeKnowledge, tmp_path: Path
) -> None:
    # A footnote's number, raised and smaller (Tm-placed, as LibreOffice and Word draw it),
    # was glued to its word, `budget1`, and the space after it doubled: neither `budget` nor
    # `budget closely` matched. A power stays as it was; so do the note's own line and a
    # number of the line's size.
    body = (
        "BT /F1 11 Tf 1 0 0 1 72 760 Tm (The error budget) Tj"
        " /F1 7 Tf 1 0 0 1 154 765 Tm (1) Tj"
        " /F1 11 Tf 1 0 0 1 160 760 Tm ( closely tracks rollouts.) Tj"
        " 1 0 0 1 72 740 Tm (The site covers 12 km) Tj"
        " /F1 7 Tf 1 0 0 1 179.7 745 Tm (2) Tj"
        " /F1 11 Tf 1 0 0 1 183.6 740 Tm ( of land, see table 3.) Tj"
        " /F1 9 Tf 1 0 0 1 72 100 Tm (1 The budget resets monthly.) Tj ET"
    )
    path = write_pdf_pages(tmp_path / "notes.pdf", [body])
    assert _text(path).splitlines() == [
        "The error budget[^1] closely tracks rollouts.",
        "The site covers 12 km2 of land, see table 3.",
        "",
        "[^1]: The budget resets monthly.",
    ]
    hits = make_knowledge().match(r"budget\b", source="notes.pdf").hits
    assert [h.line_number for h in hits] == [1, 4]


def test_a_footnote_at_a_page_foot_follows_the_sentence_its_page_break_cut(
    tmp_path: Path,
) -> None:
    # The notes at a page's foot came between the page's last line and the next page's first
    # (`keeps the` / `1 The budget resets` / `monthly at midnight.` / blank / `budget honest.`):
    # the sentence the page break cut read as two paragraphs with a note between.
    footer = " /F1 9 Tf 1 0 0 1 300 60 Tm (Ops handbook) Tj ET"  # under the note, no note's
    first = (
        "BT /F1 11 Tf 1 0 0 1 72 760 Tm (The error budget) Tj"
        " /F1 7 Tf 1 0 0 1 154 765 Tm (1) Tj"
        " /F1 11 Tf 1 0 0 1 160 760 Tm ( tracks rollouts, and the on-call rota keeps the) Tj"
        " /F1 9 Tf 1 0 0 1 72 100 Tm (1) Tj 1 0 0 1 84 100 Tm (The budget resets) Tj"
        " 1 0 0 1 84 89 Tm (monthly at midnight.) Tj" + footer
    )
    second = "BT /F1 11 Tf 14 TL 72 760 Td (budget honest.) Tj T* (The queue drains.) Tj" + footer
    third = "BT /F1 11 Tf 72 760 Td (The third page.) Tj" + footer
    path = write_pdf_pages(tmp_path / "budget.pdf", [first, second, third])
    assert _text(path).split("\n\n") == [
        "The error budget[^1] tracks rollouts, and the on-call rota keeps the\nbudget honest.",
        "[^1]: The budget resets monthly at midnight.",
        "The queue drains.",
        "The third page.",
    ]


def test_a_word_hyphenated_across_a_page_break_reads_whole(tmp_path: Path) -> None:
    # Within a page `infor-` / `mation` was joined; at a page's end the two halves stayed
    # pages apart, and neither a search nor a match for the word found it.
    path = write_pdf(
        tmp_path / "long.pdf",
        [
            ["Keep the information current.", "Every release note carries infor-"],
            ["mation for operators.", "A well-"],
            ["Known section starts here."],
        ],
    )
    assert _text(path) == (
        "Keep the information current.\nEvery release note carries information\n"
        "for operators.\nA well-\n\nKnown section starts here."
    )


def _cells(rows: list[tuple[float, list[tuple[float, str]]]]) -> str:
    """A content stream drawing each (x, text) of each (height, row) in a text object of its
    own, as LibreOffice and Word draw a table's cells."""
    return " ".join(
        f"BT /F1 11 Tf 1 0 0 1 {x} {y} Tm ({text}) Tj ET" for y, row in rows for x, text in row
    )


def test_table_cells_are_apart_and_prose_is_not(
    make_knowledge: MakeKnowledge, tmp_path: Path
) -> None:
    # A table's row read as one run of words, `eu-west platform team 400`: which words were
    # one cell (and which owner went with which region) was lost.
    table = [
        (760, [(72, "region"), (200, "owner"), (350, "capacity")]),
        (746, [(72, "eu-west"), (200, "platform team"), (350, "400")]),
        (732, [(72, "us-east"), (200, "storage team"), (350, "250")]),
    ]
    prose = [  # words spread as a justified line spreads them: in no columns
        (700, [(72, "Incomprehensibly"), (200, "wide"), (330, "words")]),
        (686, [(72, "administrators"), (260, "reconsidered"), (350, "it")]),
    ]
    notes = [(120, [(72, "1"), (80, "The budget is reset monthly.")]),
             (108, [(72, "2"), (80, "A second note.")])]  # fmt: skip
    path = write_pdf_pages(tmp_path / "capacity.pdf", [_cells(table + prose + notes)])
    assert _text(path).splitlines() == [
        "region | owner | capacity",
        "eu-west | platform team | 400",
        "us-east | storage team | 250",
        "Incomprehensibly wide words",
        "administrators reconsidered it",
        "1 The budget is reset monthly.",
        "2 A second note.",
    ]
    hits = make_knowledge().match(r"\| storage team \|", source="capacity.pdf").hits
    assert [h.line for h in hits] == ["us-east | storage team | 250"]


def test_a_code_sample_keeps_its_spaces_and_a_private_bullet_reads_as_one(
    make_knowledge: MakeKnowledge, tmp_path: Path
) -> None:
    # The spaces inside a code line were squeezed to one (`wait(30) # seconds`), and a list's
    # bullet drawn from a symbol font read as a glyph of no meaning (U+F0B7) before each item.
    # Justified text's doubled spaces (in a proportional font) are still one.
    lines = ["\uf0b7 Rotate the keys.", "  \uf0b7 Drain the queue.", "See \uf0b7 here."]
    code = " ".join(
        f"({line}) Tj T*" for line in ["def restart(host):", "    wait(30)   # seconds"]
    )
    justified = "(spread  as  justified  text) Tj T*"  # pypdf's space for each gap, besides
    path = write_pdf_pages(
        tmp_path / "code.pdf",
        [
            f"BT /F2 11 Tf 14 TL 72 760 Td {code} /F1 11 Tf {justified} "
            + " ".join(f"({pdf_escape(line)}) Tj T*" for line in lines)
            + " ET"
        ],
    )
    assert _text(path).splitlines() == [
        "def restart(host):",
        "    wait(30)   # seconds",
        "spread as justified text",
        "\u2022 Rotate the keys.",
        "  \u2022 Drain the queue.",
        "See \uf0b7 here.",  # not before an item's text: as it is
    ]
    hits = make_knowledge().match(r"\)   #", source="code.pdf").hits
    assert [h.line_number for h in hits] == [2]


def test_table_rows_drawn_as_one_text_object_have_their_cells_apart(tmp_path: Path) -> None:
    # TeX and ReportLab draw a row in one text object, moving from cell to cell: the row read
    # as one run of words (`eu-west platform team 400`), which owner went with which region lost.
    rows = [("region", "owner", "capacity"), ("eu-west", "platform team", "400"),
            ("us-east", "storage team", "250")]  # fmt: skip
    body = "BT /F1 11 Tf " + "".join(
        f"1 0 0 1 72 {760 - 14 * at} Tm ({a}) Tj 128 0 Td ({b}) Tj 150 0 Td ({c}) Tj "
        for at, (a, b, c) in enumerate(rows)
    )
    body += (
        "1 0 0 1 72 600 Tm (- Rotate the keys) Tj 0 -14 Td (- Drain the queue) Tj"
        " 0 -14 Td (Short prose, one line) Tj 0 -14 Td (and a second short one.) Tj ET"
    )
    path = write_pdf_pages(tmp_path / "rows.pdf", [body])
    assert _text(path).splitlines() == [
        "region | owner | capacity",
        "eu-west | platform team | 400",
        "us-east | storage team | 250",
        "- Rotate the keys",
        "- Drain the queue",
        "Short prose, one line",
        "and a second short one.",
    ]
