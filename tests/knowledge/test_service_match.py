"""The `Knowledge` facade on real LanceDB, `match`: absolute line numbers, a named file grepped as
it is now, stale lines marked, bounded in time and output, bad arguments named."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from octobrain.errors import InvalidInput
from octobrain.knowledge import Knowledge
from octobrain.knowledge.pages import LINE_CHARS
from octobrain.knowledge.render import render_match, render_search

from .conftest import CountingEmbedder, MakeKnowledge


def test_match_has_absolute_line_numbers_each_line_once_and_a_cap(
    make_knowledge: MakeKnowledge, tmp_path: Path
) -> None:
    lines = [f"line {i}: filler words to make the document long enough" for i in range(1, 301)]
    lines[249] = "line 250: the MAGIC marker sits here"
    (tmp_path / "big.txt").write_text("\n".join(lines))
    k = make_knowledge(chunk_size=200, chunk_overlap=100, parent_size=800)
    k.index("big.txt")
    found = k.match("MAGIC", source="big.txt", context=1)
    assert [(h.line_number, h.line) for h in found.hits] == [(250, lines[249])]
    assert found.hits[0].before == [lines[248]] and not found.truncated
    capped = k.match(r"^line \d+:", max_matches=7)
    assert len(capped.hits) == 7 and capped.truncated
    assert [h.line_number for h in capped.hits] == list(range(1, 8))
    assert len(k.match("filler").hits) == 100  # the default cap (knowledge.max_matches)


def test_a_match_naming_a_file_greps_its_text_as_it_reads_now_and_embeds_nothing(
    make_knowledge: MakeKnowledge, embedder: CountingEmbedder, tmp_path: Path
) -> None:
    # Before: a match naming a source not indexed yet indexed it first, embedding every chunk
    # (up to knowledge.max_source_chunks, minutes of CPU with the bundled model) for a grep.
    path = tmp_path / "notes.md"
    path.write_text("# Notes\n\nfirst line\nthe NEEDLE is here\n")
    k = make_knowledge()
    found = k.match("NEEDLE", source="notes.md")
    assert [(h.line_number, h.line, h.uri) for h in found.hits] == [
        (4, "the NEEDLE is here", path.resolve().as_uri())
    ]
    assert (embedder.calls, k.list_sources(), found.sources_searched) == (0, [], 1)
    k.index("notes.md")
    path.write_text("# Notes\n\nthe NEEDLE moved up\n")  # changed since it was indexed
    calls = embedder.calls
    assert [(h.line_number, h.line) for h in k.match("NEEDLE", source="notes.md").hits] == [
        (3, "the NEEDLE moved up")
    ]
    assert embedder.calls == calls
    with pytest.raises(InvalidInput, match="^source: "):
        k.match("NEEDLE", source="missing.md")


def _kept_edited_deleted(make_knowledge: MakeKnowledge, tmp_path: Path) -> Knowledge:
    """Three files indexed, each with "the rollback runbook"; then one edited, one deleted."""
    for name in ("kept", "edited", "deleted"):
        (tmp_path / f"{name}.md").write_text(f"# {name}\n\nthe rollback runbook of {name}\n")
    k = make_knowledge()
    for name in ("kept", "edited", "deleted"):
        k.index(f"{name}.md")
    edited = tmp_path / "edited.md"
    edited.write_text("# edited\n\nsomething else now\n")
    os.utime(edited, (edited.stat().st_atime, edited.stat().st_mtime + 10))
    (tmp_path / "deleted.md").unlink()
    return k


def test_a_match_over_the_index_marks_the_lines_of_a_file_changed_or_gone(
    make_knowledge: MakeKnowledge, tmp_path: Path
) -> None:
    # Before: `knowledge match` without a source showed the indexed lines of a file edited or
    # deleted since as if current, while `search` marked the same hits stale.
    k = _kept_edited_deleted(make_knowledge, tmp_path)
    found = k.match("rollback runbook")
    stale = {Path(h.uri).name: h.stale for h in found.hits}
    assert stale == {"kept.md": "", "edited.md": "changed", "deleted.md": "gone"}
    reply = render_match(found)
    assert reply.count("Stale: the file changed since it was indexed") == 1
    assert reply.count("Stale: the file is gone since it was indexed") == 1
    # Named as the source, the file is read as it is now: nothing stale, no such line.
    assert k.match("something else", source="edited.md").hits[0].stale == ""


def test_a_search_over_every_source_marks_a_hit_whose_file_changed_or_is_gone(
    make_knowledge: MakeKnowledge, tmp_path: Path
) -> None:
    # Before: a file edited or deleted after it was indexed was still cited as its old text,
    # with nothing to tell it from a current one.
    k = _kept_edited_deleted(make_knowledge, tmp_path)
    result = k.search("rollback runbook", limit=10)
    stale = {Path(h.uri).name: h.stale for h in result.hits}
    assert stale == {"kept.md": "", "edited.md": "changed", "deleted.md": "gone"}
    reply = render_search(result)
    assert reply.count("Stale: the file changed since it was indexed") == 1
    assert reply.count("Stale: the file is gone since it was indexed") == 1
    again = k.search("something else now", source="edited.md")  # indexed again: current
    assert again.indexed is not None and again.indexed.status == "reindexed"
    assert [h.stale for h in again.hits] == [""]


def test_match_shows_a_long_line_as_a_window_around_its_match(
    make_knowledge: MakeKnowledge, tmp_path: Path
) -> None:
    minified = "var a=1;" * 100_000 + "NEEDLE()" + ";b=2" * 100_000
    (tmp_path / "bundle.txt").write_text(f"{minified}\n{minified}\n")
    k = make_knowledge()
    k.index("bundle.txt")
    found = k.match("NEEDLE", context=1)
    assert [h.line_number for h in found.hits] == [1, 2]
    for hit in found.hits:
        assert len(hit.line) <= LINE_CHARS + 2 and hit.line.startswith("…")
        assert hit.line.endswith("…") and hit.line[hit.start : hit.end] == "NEEDLE"
    assert found.hits[0].after == [minified[:LINE_CHARS] + "…"]
    assert len(render_match(found).encode()) < 4 * LINE_CHARS * 4


def test_match_is_linear_on_a_pathological_pattern(
    make_knowledge: MakeKnowledge, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("a" * 50_000 + "!\n" + "aaaa\n")
    k = make_knowledge()
    k.index("a.txt")
    found = k.match(r"^(a+)+$")  # exponential for a backtracking engine on line 1
    assert [h.line_number for h in found.hits] == [2]


def test_a_match_past_its_time_limit_is_a_clear_error(
    make_knowledge: MakeKnowledge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pattern within the size limit, `[ab]*a[ab]{30000}z`, costs its program at every byte:
    # 31–36 s over ten 32 kB notes, 188 s over one 1 MB file, the knowledge lock held.
    from octobrain.knowledge import grep

    (tmp_path / "a.txt").write_text("ab\n" * 2000)
    k = make_knowledge()
    k.index("a.txt")
    assert len(k.match("ab", max_matches=5).hits) == 5
    monkeypatch.setattr(grep, "MATCH_SECONDS", 0.0)
    with pytest.raises(InvalidInput, match=r"^pattern: took more than 0 s, stopped in text 1"):
        k.match("ab")


def test_a_match_read_a_source_at_a_time_caps_and_times_over_all_of_them(
    make_knowledge: MakeKnowledge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The texts are read in batches (of one here): the cap, "more lines matched" and the
    # time limit's "text N of M" still count over every source, as one pass over all did.
    from octobrain.knowledge import grep

    monkeypatch.setattr(grep, "MATCH_BATCH", 1)
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.txt").write_text(f"{name} hit one\n{name} miss\n{name} hit two\n")
    k = make_knowledge()
    for name in ("a", "b", "c"):
        k.index(f"{name}.txt")
    found = k.match("hit", max_matches=6)
    assert [(h.uri[-5:], h.line_number) for h in found.hits] == [
        ("a.txt", 1), ("a.txt", 3), ("b.txt", 1), ("b.txt", 3), ("c.txt", 1), ("c.txt", 3)
    ]  # fmt: skip
    assert not found.truncated and found.sources_searched == 3
    for cap in (2, 3, 5):  # the cap reached at a batch's end, inside one, inside the last
        found = k.match("hit", max_matches=cap)
        assert len(found.hits) == cap and found.truncated, cap
    found = k.match("b hit two|c miss", max_matches=1)
    assert [h.line for h in found.hits] == ["b hit two"] and found.truncated
    assert not k.match("c hit two", max_matches=1).truncated
    with pytest.raises(InvalidInput, match=r"^pattern: invalid regular expression"):
        k.match("(")
    monkeypatch.setattr(grep, "MATCH_SECONDS", 0.0)
    with pytest.raises(InvalidInput, match=r"^pattern: took more than 0 s, stopped in text 1 of 3"):
        k.match("hit")


def test_bad_match_arguments_name_the_field(make_knowledge: MakeKnowledge) -> None:
    k = make_knowledge()
    for kwargs, field in [
        ({"pattern": "("}, "pattern"),
        ({"pattern": ""}, "pattern"),
        ({"pattern": "x", "max_matches": 0}, "max_matches"),
        ({"pattern": "x", "context": 11}, "context"),
    ]:
        with pytest.raises(InvalidInput, match=f"^{field}: "):
            k.match(**kwargs)  # type: ignore[arg-type]


def test_a_match_without_hits_quotes_a_long_pattern_cut() -> None:
    # An 80,000-alternation pattern with no hit was answered with itself: 789 kB.
    from octobrain.knowledge.results import MatchReport

    pattern = "|".join(f"word{i}" for i in range(80_000))
    reply = render_match(MatchReport(pattern, [], False, 50, 3))
    assert reply.startswith("No line matches /word0|word1|") and reply.endswith("in 3 sources.")
    assert "characters cut" in reply and len(reply) < 400, len(reply)
    assert render_match(MatchReport("a\nb", [], False, 50, 1)).count("\n") == 0
