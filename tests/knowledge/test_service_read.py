"""The `Knowledge` facade on real LanceDB, `read`: text without indexing, pages that hold every
line once within the bound, a bad `from_line` named, a file extracted once while unchanged."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from octobrain.errors import InvalidInput
from octobrain.knowledge import Knowledge, run_command
from octobrain.knowledge.render import RULE
from tests.knowledge.service_support import GUIDE, count_file_reads, write_guide

from .conftest import MakeKnowledge


def test_read_returns_text_without_indexing(make_knowledge: MakeKnowledge, tmp_path: Path) -> None:
    k = make_knowledge()
    doc = k.read(str(write_guide(tmp_path)))
    assert doc.title == "Service guide" and "blue-green pipeline" in doc.text
    assert k.stats().sources == 0
    assert "Type: markdown" in run_command(k, {"command": "read", "source": "guide.md"})


def _pages(k: Knowledge, source: str, from_line: int = 1) -> list[str]:
    """Every reply of `read` from `from_line` on, following each reply's next page."""
    replies, from_byte = [], 0
    while True:
        asked = {"command": "read", "source": source, "from_line": from_line}
        reply = run_command(k, asked | ({"from_byte": from_byte} if from_byte else {}))
        replies.append(reply)
        found = re.search(r"Next page: from_line (\d+)(?:, from_byte (\d+))?\.$", reply)
        if found is None:
            return replies
        from_line, from_byte = int(found.group(1)), int(found.group(2) or 0)


def _body(reply: str) -> str:
    """A paged reply's text: between the header's rule and the closing rule."""
    return reply.split(f"\n{RULE}\n")[1]


def test_read_pages_hold_every_line_once_within_the_bound_and_start_where_match_points(
    make_knowledge: MakeKnowledge, tmp_path: Path
) -> None:
    lines = [f"Ligne {i}: {'é' * (i % 37)} café crème, naïve résumé" for i in range(1, 2001)]
    lines[1499] = "Ligne 1500: the MAGIC marker"
    (tmp_path / "long.txt").write_bytes("\r\n".join(lines).encode() + b"\r\n")
    k = make_knowledge(read_page_bytes=4096)
    replies = _pages(k, "long.txt")
    bodies = [_body(r) for r in replies]
    assert len(replies) > 20 and "\n".join(bodies) == "\n".join(lines)
    assert all(len(b.encode()) <= 4096 for b in bodies)
    assert all("\nType: text\n" in r for r in replies)
    assert replies[-1].endswith("End of the text.")
    assert re.search(r"Lines 1–\d+ of 2,000 \(\d[\d,]* of [\d,]+ bytes\)", replies[0])
    k.index("long.txt")
    (hit,) = k.match("MAGIC").hits
    reply = run_command(k, {"command": "read", "source": "long.txt", "from_line": hit.line_number})
    assert _body(reply).startswith("Ligne 1500: the MAGIC marker\nLigne 1501:")


def test_a_text_that_fits_reads_whole_without_a_footer_and_a_long_line_is_cut_to_a_page(
    make_knowledge: MakeKnowledge, tmp_path: Path
) -> None:
    k = make_knowledge(read_page_bytes=1024)
    write_guide(tmp_path)
    assert run_command(k, {"command": "read", "source": "guide.md"}).endswith(
        GUIDE.rstrip("\n").split("\n")[-1]
    )
    (tmp_path / "min.txt").write_text("first\n" + "x" * 5000 + "\nlast\n")
    replies = _pages(k, "min.txt", from_line=2)
    # The line longer than a page is read on from where the page cut it (before: the next
    # page was line 3, and the rest of line 2 could not be read).
    assert [_body(r) for r in replies] == ["x" * 1024] * 4 + ["x" * 904 + "\nlast"]
    assert replies[0].endswith(
        "Line 2 of 3 (its first 1,024 bytes of 5,000: a page holds at most 1,024). "
        "Next page: from_line 2, from_byte 1024."
    )
    assert "Line 2 of 3 (its bytes 1,025–2,048 of 5,000: a page" in replies[1]
    assert replies[-1].endswith(
        "Lines 2–3 of 3 (line 2 from byte 4,097; 909 of 5,011 bytes). End of the text."
    )
    # A page never starts inside a character: one asked there starts at the next.
    (tmp_path / "wide.txt").write_text("é" * 600 + "\n")
    reply = run_command(k, {"command": "read", "source": "wide.txt", "from_byte": 1023})
    assert _body(reply) == "é" * 88 and "from byte 1,025;" in reply
    for value, rule in ((-1, "must be an integer ≥ 0"), (1200, "is past the end of line 1")):
        with pytest.raises(InvalidInput, match=f"^from_byte: {rule}"):
            run_command(k, {"command": "read", "source": "wide.txt", "from_byte": value})


def test_bad_from_line_names_the_field_before_anything_is_read(
    make_knowledge: MakeKnowledge, tmp_path: Path
) -> None:
    k = make_knowledge()
    write_guide(tmp_path)
    for value, rule in [
        (0, "must be an integer ≥ 1, got 0"),
        ("2", 'must be an integer ≥ 1, got "2"'),
        (True, "must be an integer ≥ 1, got true"),
        (12, "is past the end: the text has 11 lines"),
    ]:
        with pytest.raises(InvalidInput, match=f"^from_line: {re.escape(rule)}$"):
            run_command(k, {"command": "read", "source": "guide.md", "from_line": value})
    with pytest.raises(InvalidInput, match="^from_line: "):  # the argument first, the file after
        run_command(k, {"command": "read", "source": "no-such.md", "from_line": -1})


def test_reading_a_file_page_by_page_extracts_it_once_while_it_is_unchanged(
    make_knowledge: MakeKnowledge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `knowledge read` is paged a call a page; each call read and extracted the whole file
    # again (a 45 MB text file: 0.55-0.95 s of CPU a page).
    book = tmp_path / "book.md"
    book.write_text("# Book\n\n" + "A line of the book.\n" * 500)
    reads = count_file_reads(monkeypatch)
    k = make_knowledge()
    first = k.read("book.md")
    assert [k.read("book.md") for _ in range(3)] == [first] * 3
    assert len(reads) == 1
    book.write_text("# Book\n\nRewritten.\n")  # changed: read again, the new text
    assert k.read("book.md").text.strip().endswith("Rewritten.")
    assert len(reads) == 2
    with pytest.raises(InvalidInput, match="over the 10-byte cap"):  # other limits: read again
        make_knowledge(max_source_bytes=10).read("book.md")
