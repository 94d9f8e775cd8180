"""Chunking: properties for every accepted size/overlap, heading paths, sentence cuts."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from octobrain.errors import InvalidInput
from octobrain.knowledge.chunk import chunk_text
from octobrain.knowledge.extract import first_title
from octobrain.spans import split_spans

TEXT = st.text(alphabet=st.sampled_from([*"ab .!?\n\t", "é", "€", "𝄞", "字"]), max_size=600)


@st.composite
def sizes(draw: st.DrawFn) -> tuple[int, int]:
    size = draw(st.integers(1, 120))
    return size, draw(st.integers(0, size - 1))


@settings(max_examples=300, deadline=None)
@given(TEXT, sizes())
def test_split_spans_covers_everything_in_bounded_overlapping_windows(
    text: str, sz: tuple[int, int]
) -> None:
    size, overlap = sz
    data = text.encode()
    spans = split_spans(data, size, overlap)
    if not data:
        assert spans == []
        return
    assert spans[0][0] == 0 and spans[-1][1] == len(data)
    for (s1, e1), (s2, e2) in itertools.pairwise(spans):
        assert s1 < s2 <= e1 < e2  # progress, and no gap between windows
        assert e1 - s2 <= overlap
    for start, end in spans:
        assert end - start <= size + 3  # one wide character may overhang
        data[start:end].decode()  # never splits a UTF-8 character


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 3), st.text(alphabet="xyz", min_size=1, max_size=5), TEXT),
        max_size=6,
    ),
    sizes(),
    st.integers(1, 4),
)
def test_chunks_point_at_their_text_and_lie_inside_their_parent(
    sections: list[tuple[int, str, str]], sz: tuple[int, int], parent_factor: int
) -> None:
    size, overlap = sz
    text = "\n".join(f"{'#' * lvl} {name}\n{body}" for lvl, name, body in sections)
    chunks = chunk_text(
        text, "Doc", chunk_size=size, overlap=overlap, parent_size=size * parent_factor
    )
    data = text.encode()
    for c in chunks:
        assert c.body and data[c.start : c.end].decode() == c.body
        assert len(c.body.encode()) <= max(size + 3, 1)
        if c.parent:
            assert c.body in c.parent
            assert len(c.parent.encode()) <= size * parent_factor + 3
        assert c.content.startswith("Doc")
    assert [c.index for c in chunks] == list(range(len(chunks)))


def test_heading_paths_nest_and_skip_fenced_code() -> None:
    text = (
        "# Guide\nWhat the tool is and who it is for.\n## Install\nRun the installer as root.\n"
        "### Linux\nUse apt, then check the service.\n```\n# not a heading\n```\n"
        "## Usage\nCall it with a config file.\n"
    )
    chunks = chunk_text(text, "Guide", chunk_size=200, overlap=20, parent_size=800)
    assert [c.section_path for c in chunks] == [
        ("Guide",),
        ("Guide", "Install"),
        ("Guide", "Install", "Linux"),
        ("Guide", "Usage"),
    ]
    assert "# not a heading" in chunks[2].body
    # The title is not repeated when the first heading is the title.
    assert chunks[2].header == "Guide > Install > Linux"
    assert chunks[2].content.startswith("Guide > Install > Linux\n\nUse apt,")


def test_a_heading_with_nothing_under_it_is_its_text_unless_one_nested_in_it_follows() -> None:
    body = "Some text long enough to be a chunk of its own.\n"
    checklist = f"# Checklist\n\n## Rotate keys monthly\n{body}# Notes\n"
    chunks = chunk_text(checklist, "Ops", chunk_size=200, overlap=20, parent_size=800)
    # "Checklist" is named by the header of the item nested under it, so it is no chunk of its
    # own; the last heading, with nothing nested, is its own text.
    assert [(c.header, c.body) for c in chunks] == [
        ("Ops > Checklist > Rotate keys monthly", body.strip()),
        ("Ops > Notes", "# Notes"),
    ]
    data = checklist.encode()
    assert all(data[c.start : c.end].decode() == c.body for c in chunks)
    only = chunk_text("# Rotate keys monthly", "Rotate keys monthly")
    assert [(c.header, c.body) for c in only] == [("Rotate keys monthly", "# Rotate keys monthly")]
    # A heading longer than a chunk is cut like any text.
    long_heading = chunk_text("# " + "word " * 30, "Doc", chunk_size=40, overlap=5, parent_size=80)
    assert len(long_heading) > 1 and all(len(c.body.encode()) <= 40 for c in long_heading)
    assert chunk_text("\n  \n", "Doc") == []


def test_closing_hashes_go_and_a_heading_line_of_any_shape_costs_one_pass() -> None:
    body = "A sentence that makes a section of its own.\n"
    text = f"# Setup ##\n{body}## Learning C#\n{body}### Spaced   #  \n{body}"
    chunks = chunk_text(text, "Doc", chunk_size=200, overlap=20, parent_size=800)
    assert [c.section_path for c in chunks] == [
        ("Setup",),
        ("Setup", "Learning C#"),
        ("Setup", "Learning C#", "Spaced"),
    ]
    assert first_title("Intro line\n## Setup ##\n") == "Setup"
    # A note of 32 kB, "# a", blanks, "x": the heading pattern took cubic time on it (26 s at
    # 2.5 kB over MCP, every other call of the server held up meanwhile), the title pattern
    # quadratic (9 s). The same shape is checked again as the first line of a longer note.
    line = "# a" + " " * 32_000 + "x"
    for note in (line, line + "\nThe body.\n"):
        started = time.process_time()
        chunk_text(note, "Note")
        assert first_title(note) == "a" + " " * 99
        assert time.process_time() - started < 1.0


def test_long_sections_get_parents_and_cut_at_sentences() -> None:
    text = "# Notes\n" + "".join(
        f"Fox number {i} jumps over the lazy dog near the river bank. " for i in range(200)
    )
    chunks = chunk_text(text, "Notes", chunk_size=1200, overlap=300, parent_size=4800)
    assert len(chunks) > 4
    assert all(c.parent for c in chunks)
    assert len({c.parent for c in chunks}) >= 3  # several parents, each ≤ 4800 bytes
    assert all(c.body.endswith(".") for c in chunks[:-1])  # cut after a sentence
    assert all(len(c.body.encode()) <= 1200 for c in chunks)
    short = chunk_text("# A\nOne short section.", "A")
    assert len(short) == 1 and short[0].parent == ""


@pytest.mark.parametrize(
    ("size", "overlap", "parent", "field"),
    [(0, 0, 10, "chunk_size"), (10, 10, 10, "chunk_overlap"), (10, 2, 5, "parent_size")],
)
def test_bad_sizes_name_the_field(size: int, overlap: int, parent: int, field: str) -> None:
    with pytest.raises(InvalidInput, match=f"^{field}: "):
        chunk_text("text", "T", chunk_size=size, overlap=overlap, parent_size=parent)


def _words(text: str) -> int:
    """A toy token count: words, plus two special tokens."""
    return len(text.split()) + 2


@settings(max_examples=150, deadline=None)
@given(TEXT, sizes(), st.integers(4, 40))
def test_token_budget_keeps_every_chunk_in_the_window_and_covers_the_text(
    text: str, sz: tuple[int, int], max_tokens: int
) -> None:
    size, overlap = sz
    chunks = chunk_text(
        text,
        "Doc",
        chunk_size=size,
        overlap=overlap,
        parent_size=size * 4,
        max_tokens=max_tokens,
        count_tokens=_words,
    )
    data = text.encode()
    covered = bytearray(len(data))
    for c in chunks:
        assert data[c.start : c.end].decode() == c.body
        assert len(c.body.encode()) <= size + 3
        # Over budget only when even the shortest window would not fit: a sixteenth of the
        # size, or the overlap and one character when a wide character overhangs a tiny window.
        shortest = max(size // 16 + 3, overlap + 4)
        assert _words(c.content) <= max_tokens or len(c.body.encode()) <= shortest
        covered[c.start : c.end] = b"\x01" * (c.end - c.start)
    assert all(covered[i] or chr(data[i]).isspace() for i in range(len(data)) if data[i] < 128)


def test_bundled_model_window_cuts_dense_text_that_bytes_alone_would_leave_too_long() -> None:
    """1,200 bytes of token-dense text plus a title run past MiniLM's 256 tokens; with the
    model's window every chunk is read whole by the model, and no text is lost."""
    from octobrain.embed.tokens import input_window
    from octobrain.modelspec import BUNDLED_MODEL_ID

    window = input_window(BUNDLED_MODEL_ID)
    assert window is not None and window[0] == 256
    max_tokens, count = window
    text = " ".join(f"IL-{i} TNF-α/NF-κB p{i}.{i % 7} mg/kg" for i in range(120))
    title = "Cytokine signalling in CD4+ T-cells"
    by_bytes = chunk_text(text, title)
    assert max(count(c.content) for c in by_bytes) > max_tokens  # the model would truncate
    fitted = chunk_text(text, title, max_tokens=max_tokens, count_tokens=count)
    assert all(count(c.content) <= max_tokens for c in fitted)
    assert len(fitted) > len(by_bytes)
    assert fitted[0].start == 0 and fitted[-1].end == len(text.encode())
    assert input_window("hash:64") is None  # no known window: byte sizes alone


def _covers(text: str, chunks: list) -> bool:
    """Every non-blank byte of `text` lies in a chunk, and every chunk is its slice."""
    data = text.encode()
    covered = bytearray(len(data))
    for c in chunks:
        assert data[c.start : c.end].decode() == c.body
        covered[c.start : c.end] = b"\x01" * (c.end - c.start)
    return all(covered[i] or data[i : i + 1].isspace() for i in range(len(data)))


def test_small_sections_pack_so_headings_cannot_multiply_the_chunks() -> None:
    # 32 kB of "# a" / "b": one chunk per section made 5,400 chunks to embed.
    note = "# a\nb\n" * 5_400
    chunks = chunk_text(note, "Note")
    assert len(chunks) <= 2 * len(note.encode()) // 1200 + 1
    data = note.encode()
    assert all(data[c.start : c.end].decode() == c.body for c in chunks)
    # Every section is in one chunk; the heading they all share is in the header.
    assert sum(c.body.count("b") for c in chunks) == 5_400
    assert all(c.header == "Note > a" for c in chunks)
    # A checklist of headings is one chunk under the heading its items share; the items keep
    # their heading lines, and a later top-level heading takes the shared path to the title.
    checklist = "# Checklist\n\n## Rotate keys monthly\n## Back up the DB weekly ##\n"
    (one,) = chunk_text(checklist, "Ops")
    assert (one.header, one.body) == (
        "Ops > Checklist",
        "## Rotate keys monthly\n## Back up the DB weekly ##",
    )
    (both,) = chunk_text(checklist + "# Notes\n", "Ops")
    assert both.header == "Ops" and both.body == (checklist + "# Notes").strip()
    # A section with a sentence of its own keeps its chunk and its path; those whose text is
    # shorter than their heading path are packed together.
    doc = (
        "# Backups\nBackups run nightly to cold storage.\n"
        "# Paging\nThe on-call rota changes on Mondays.\n"
        "# Escalation policy for the storage cluster\nCall Ana.\n"
        "# Phone of the on-call engineer\n+1 555 0100\n"
    )
    chunks = chunk_text(doc, "Ops")
    assert [c.header for c in chunks] == ["Ops > Backups", "Ops > Paging", "Ops"]
    assert chunks[2].body.startswith("# Escalation") and chunks[2].body.endswith("0100")
    # A run is packed up to a chunk's size, no further.
    runs = chunk_text("# a\nb\n" * 600, "Note", chunk_size=120, overlap=30, parent_size=480)
    assert len(runs) == 30 and all(len(c.body.encode()) <= 120 for c in runs)


def test_token_dense_text_costs_windows_in_proportion_to_its_tokens_not_its_bytes() -> None:
    """A window the token budget cuts short shares at most half of itself. It kept the whole
    overlap, so every later window began one character after the one before: 2 kB of
    punctuation made 1,800 chunks to embed (145 s over MCP)."""
    from octobrain.embed.tokens import input_window
    from octobrain.modelspec import BUNDLED_MODEL_ID

    window = input_window(BUNDLED_MODEL_ID)
    assert window is not None
    max_tokens, count = window
    note = ".,;:!?-" * 300  # about a token per byte
    chunks = chunk_text(note, "Note", max_tokens=max_tokens, count_tokens=count)
    assert all(count(c.content) <= max_tokens for c in chunks)
    assert len(chunks) <= 4 * len(note) // max_tokens
    assert _covers(note, chunks)
    # A header of long headings is cut to half the window, so the text keeps the other half:
    # it took all of it, and 8 kB under a 3 kB heading made 1,110 chunks.
    doc = "# " + "word " * 600 + "\n" + "Some plain sentence here. " * 300
    chunks = chunk_text(doc, "Doc", max_tokens=max_tokens, count_tokens=count)
    assert all(count(c.content) <= max_tokens for c in chunks)
    assert all(c.header.endswith("…") and count(c.header) <= max_tokens // 2 for c in chunks)
    assert len(chunks) <= 4 * len(doc) // max_tokens


@settings(max_examples=200, deadline=None)
@given(TEXT, st.integers(8, 120), st.integers(2, 30))
def test_windows_cut_short_by_tokens_share_at_most_half_of_themselves_and_move_on(
    text: str, size: int, max_tokens: int
) -> None:
    data = text.encode()
    overlap = size // 4
    spans = split_spans(data, size, overlap, lambda s, e: e - s <= max_tokens)
    for (s1, e1), (s2, _) in itertools.pairwise(spans):
        assert e1 - s1 >= size // 16  # only the last window may be shorter
        assert e1 - s2 <= min(overlap, (e1 - s1) // 2) + 3
        assert s2 - s1 >= (e1 - s1) // 3 - 4  # a step moves by a third of a window or more


def test_a_document_over_the_chunk_cap_is_refused_before_it_is_all_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A 50 MB file of `# h` lines was cut whole (13 million sections, 4.4 GB, 55 s) and only
    # then counted against `knowledge.max_source_chunks`: the cutting now stops at the cap.
    from octobrain.knowledge import chunk

    read: list[int] = []
    sections = chunk._sections

    def counted(data: bytes, setext: bool = False) -> Iterator[Any]:
        for section in sections(data, setext):
            read.append(1)
            yield section

    monkeypatch.setattr(chunk, "_sections", counted)
    text = "# h\n" * 200_000
    with pytest.raises(chunk.TooManyChunks, match="more than 100 chunks"):
        chunk_text(text, "Big", chunk_size=200, overlap=20, parent_size=800, max_chunks=100)
    assert 0 < len(read) < 200_000 // 10, len(read)
    read.clear()
    whole = chunk_text(text[:4_000], "Big", chunk_size=200, overlap=20, parent_size=800)
    assert (
        chunk_text(
            text[:4_000], "Big", chunk_size=200, overlap=20, parent_size=800, max_chunks=len(whole)
        )
        == whole
    )  # at the cap: accepted, the same chunks


def test_one_section_over_the_chunk_cap_is_refused_at_the_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The cap was checked between sections only: one section of 45 MB (a text file on one
    # line, or of lines without a heading) was cut into all its 37,000 chunks, each with its
    # parent's text, before it was refused (+165 MB, 1.15 s; now +70 MB, 0.88 s).
    from octobrain.knowledge import chunk

    made: list[int] = []
    made_chunk = chunk.Chunk

    def counted(*args: Any) -> Any:
        made.append(1)
        return made_chunk(*args)

    monkeypatch.setattr(chunk, "Chunk", counted)
    text = "word " * 200_000  # one line, one section
    with pytest.raises(chunk.TooManyChunks, match="more than 100 chunks"):
        chunk_text(text, "Big", chunk_size=200, overlap=20, parent_size=800, max_chunks=100)
    assert len(made) == 100, len(made)
    made.clear()
    whole = chunk_text(text[:20_000], "Big", chunk_size=200, overlap=20, parent_size=800)
    capped = chunk_text(
        text[:20_000], "Big", chunk_size=200, overlap=20, parent_size=800, max_chunks=len(whole)
    )
    assert capped == whole and len(whole) > 100  # at the cap: accepted, the same chunks


SETEXT_README = """---
title: Operations
tags: [ops]
---

Operations Guide
================

What the service does and who runs it, in a few sentences.

Install
-------

Run the installer as root, then check that the service listens.

---

After a thematic break, still under Install: the config lives in /etc.

- a list item
- another item
---

Rolling
deploys
---
The pipeline deploys; never by hand from a laptop, whatever the hour.

```
not a heading
-------------
```
"""


def test_setext_headings_make_section_paths_in_markdown() -> None:
    # A README written with underlined headings had no section paths, and its title was the
    # first `#` heading further down (or the front matter's `---`).
    chunks = chunk_text(
        SETEXT_README, "Operations Guide", chunk_size=200, overlap=20, parent_size=800, setext=True
    )
    assert [c.section_path for c in chunks] == [
        (),  # the front matter: its `---` lines close no heading
        ("Operations Guide",),
        ("Operations Guide", "Install"),
        ("Operations Guide", "Rolling deploys"),
    ]
    install = chunks[2].body
    assert "After a thematic break" in install and "- another item\n---" in install
    assert "not a heading\n-------------" in chunks[3].body
    assert first_title(SETEXT_README, markdown=True) == "Operations Guide"
    assert first_title("---\ntitle: x\n---\n\nNo heading here.\n", markdown=True) == (
        "No heading here."
    )
    # Outside markdown (a log, a PDF's text), an underline is text, as before.
    plain = chunk_text(SETEXT_README, "T", chunk_size=200, overlap=20, parent_size=800)
    assert {c.section_path for c in plain} == {()}
