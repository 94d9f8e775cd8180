"""`memory ingest`: conversations of each format stored turn by turn with context; secrets
screened; export and import keep a turn's context."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from octobrain.errors import InvalidInput
from octobrain.memory.conversation import parse_text, read_conversations
from octobrain.memory.corpus_io import LIGHT_COLUMNS, texts_of
from octobrain.models import RelationshipType
from tests.ingest_support import LOCOMO, brain, claude_transcript, stored


def test_locomo_turns_keep_the_turn_shown_and_the_context_indexed(tmp_path: Path) -> None:
    b = brain(tmp_path)
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(LOCOMO))
    report = b.ingest(read_conversations(path))
    assert (report.turns, report.added, report.links) == (5, 5, 3)  # 2 + 1 same-session links
    turns = stored(b)
    fun = turns["Yeah, it was so much fun!"]
    assert fun.title == "Caroline, 1:56 pm on 8 May, 2023"
    assert fun.created_at.year == 2023 and fun.created_at.month == 5
    # The neighbour's words and the session's date are indexed, not shown.
    assert "How was it?" in fun.context and "8 May, 2023" in fun.context
    assert "How was it?" in fun.searchable_text() and "How was it?" not in fun.content
    assert "speaker:caroline" in fun.tags
    # A shared photo's caption stays with its turn; neighbours never cross sessions.
    look = turns["Look at this [shares a photo of a sunrise over a lake]"]
    assert "pottery" not in look.context and "Beautiful sunrise!" in look.context
    # Who and when are embedded too; the neighbours only by words, so the vague turn is found
    # through them while its vector (and so its relevance) stays the turn's own.
    assert "8 May, 2023" in fun.embedded_text() and "How was it?" not in fun.embedded_text()
    hits = b.remember("pottery class fun", limit=3, min_relevance=0.0).hits
    assert fun.id in [h.memory.id for h in hits]
    assert "bm25" in next(h.why for h in hits if h.memory.id == fun.id)
    vector = b.embedder.embed_documents([fun.embedded_text()])[0]
    assert np.allclose(b.store.scan(f"id = '{fun.id}'")[0]["embedding"], vector, atol=1e-6)
    # The mirror's BM25 text is the same searchable text (its rows are never made into memories).
    rows = pa.Table.from_pylist(b.store.scan("true", columns=LIGHT_COLUMNS))
    by_id = dict(zip(rows.column("id").to_pylist(), texts_of(rows), strict=True))
    assert by_id[fun.id] == fun.searchable_text()


def test_claude_code_transcript_keeps_only_what_was_said(tmp_path: Path) -> None:
    b = brain(tmp_path)
    (conv,) = read_conversations(claude_transcript(tmp_path / "s.jsonl"))
    assert conv.key == "5b0e2c1a-0000-4000-8000-000000000001"
    assert [(t.speaker, t.text) for t in conv.turns] == [
        ("user", "Why does the nightly export crash?"),
        ("assistant", "The export reads a closed file handle."),
    ]
    assert b.ingest([conv]).added == 2
    answer = stored(b)["The export reads a closed file handle."]
    assert "nightly export crash" in answer.context
    assert answer.title == "assistant, 02 March 2026"


def test_pasted_markup_is_said_and_injected_text_subagents_and_summaries_are_not(
    tmp_path: Path,
) -> None:
    # A turn starting with `<` was dropped whole, unsaid and uncounted: pasted HTML or PHP is
    # ordinary in a frontend session. Only the elements the client injects are left out, and
    # the entries nobody in the conversation said (a subagent's, a compaction's summary).
    def entry(kind: str, uid: str, text: str, **flags: bool) -> dict[str, Any]:
        return {"type": kind, "uuid": uid, "message": {"role": kind, "content": text}, **flags}

    entries = [
        entry("user", "u1", '<div class="card"> is not centered in the checkout page'),
        entry("assistant", "a1", "<div> elements are block-level; use flexbox on the parent."),
        entry(
            "user",
            "u2",
            "<?php echo $total; ?> prints zero <system-reminder>CLAUDE.md "
            "says: prefer pnpm</system-reminder> after the refund.",
        ),
        entry("user", "u3", "<command-name>/clear</command-name><command-args></command-args>"),
        entry("user", "u4", "Search every caller of drop_database", isSidechain=True),
        entry("user", "u5", "This session is being continued from …", isCompactSummary=True),
    ]
    path = tmp_path / "markup.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in entries) + "\n")
    (conv,) = read_conversations(path)
    assert [t.text for t in conv.turns] == [
        '<div class="card"> is not centered in the checkout page',
        "<div> elements are block-level; use flexbox on the parent.",
        "<?php echo $total; ?> prints zero  after the refund.",
    ]


def test_generic_chat_export_json_and_jsonl_split_sessions_on_silence(tmp_path: Path) -> None:
    records = [
        {
            "speaker": "Ana",
            "text": "Let's pick Postgres for the ledger.",
            "time": "2026-01-05T09:00Z",
        },
        {"speaker": "Bo", "text": "Agreed, with logical replication.", "time": "2026-01-05T09:01Z"},
        {
            "speaker": "Ana",
            "text": "Replication lag hit 3 minutes today.",
            "time": "2026-01-09T15:00Z",
        },
    ]
    as_json = parse_text(json.dumps(records))
    as_jsonl = parse_text("\n".join(json.dumps(r) for r in records))
    assert as_json[0].turns == as_jsonl[0].turns
    assert [t.session for t in as_json[0].turns] == ["1", "1", "2"]
    # A turn's date is the speaker's own day, not UTC's.
    late = parse_text(
        json.dumps([{"speaker": "Ana", "text": "Done.", "time": "2026-05-01T23:30-05:00"}])
    )
    assert late[0].turns[0].session_date == "01 May 2026"
    b = brain(tmp_path)
    report = b.ingest(as_json)
    assert report.links == 1  # the third turn opens a new session: no link to the second


def test_a_turn_longer_than_a_memory_is_kept_whole_in_parts(tmp_path: Path) -> None:
    paragraphs = [
        f"Paragraph {i}: " + "the deploy checklist step says " * 60 + "go." for i in range(14)
    ]
    long = "\n\n".join(paragraphs)  # about 26 kB, more than a memory's 10,000 bytes
    records = [
        {"speaker": "Ana", "text": "How do we deploy?", "id": "q"},
        {"speaker": "Bo", "text": long, "id": "a"},
        {"speaker": "Ana", "text": "Thanks!", "id": "t"},
    ]
    turns = parse_text(json.dumps(records))[0].turns
    parts = [t for t in turns if t.speaker == "Bo"]
    assert [t.key for t in parts] == ["a", "a/part-2", "a/part-3"]
    assert all(len(t.text.encode()) <= 10_000 for t in parts)
    assert [p for t in parts for p in t.text.split("\n\n")] == paragraphs  # cut between them
    b = brain(tmp_path)
    report = b.ingest(parse_text(json.dumps(records)))
    assert (report.added, report.links) == (5, 4)  # the parts chained in order, in the session
    contents = {m.content for m in stored(b).values()}
    assert {t.text for t in parts} <= contents
    # An id of its own ending like a part's was refused nowhere: "a/part-2" and the second part
    # of "a" became one memory id, and forgetting one deleted both.
    records.append({"speaker": "Ana", "text": "Another turn entirely.", "id": "a/part-2"})
    with pytest.raises(InvalidInput, match=r"^turns\[3\]\.id: must not end in '/part-<n>'"):
        parse_text(json.dumps(records))


def test_turns_of_a_session_are_chained_in_order(tmp_path: Path) -> None:
    b = brain(tmp_path)
    b.ingest(parse_text(json.dumps(LOCOMO)))
    turns = stored(b)
    first, second, third = (
        turns[t]
        for t in ("I joined a pottery class.", "Wow! How was it?", "Yeah, it was so much fun!")
    )
    _, edges = b.graph(second.id, depth=1)
    chain = {
        (e.source_id, e.target_id)
        for e in edges
        if e.relationship_type is RelationshipType.SAME_SESSION
    }
    assert chain == {(second.id, first.id), (third.id, second.id)}
    # A hit brings its session neighbour along.
    recall = b.remember("so much fun", limit=1, min_relevance=0.0)
    assert recall.hits[0].memory.id == third.id
    assert second.id in [n.memory.id for n in recall.neighbours]


def test_ingesting_twice_adds_nothing(tmp_path: Path) -> None:
    b = brain(tmp_path)
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(LOCOMO))
    b.ingest(read_conversations(path))
    again = b.ingest(read_conversations(path))
    assert (again.added, again.skipped_existing, again.links) == (0, 5, 0)
    assert b.store.count() == 5 and len(b.store.all_relationships()) == 3
    # A transcript that grew adds only its new turn, linked to the last one stored.
    LONGER = json.loads(json.dumps(LOCOMO))
    LONGER[0]["conversation"]["session_2"].append(
        {"speaker": "Melanie", "dia_id": "D2:3", "text": "I took it at dawn."}
    )
    grown = b.ingest(parse_text(json.dumps(LONGER)))
    assert (grown.added, grown.links) == (1, 1)


def test_secrets_are_screened_like_memorize(tmp_path: Path) -> None:
    records = [{"speaker": "Ana", "text": "the key is AKIAIOSFODNN7EXAMPLE for prod"}]
    with pytest.raises(InvalidInput, match=r"turns\[0\]\.text"):
        brain(tmp_path, secrets="refuse").ingest(parse_text(json.dumps(records)))
    b = brain(tmp_path / "redact", secrets="redact")
    b.ingest(parse_text(json.dumps(records)))
    (memory,) = b.recent()
    assert "AKIAIOSFODNN7EXAMPLE" not in memory.content + memory.context


def test_session_topics_are_the_words_that_set_a_session_apart() -> None:
    from octobrain.memory.ingest import session_topics

    (conv,) = parse_text(json.dumps(LOCOMO))
    topics = session_topics(conv.turns, 3)
    assert topics["2"] == ["sunrise"]  # said twice there, never in session 1
    assert session_topics(conv.turns, 0) == {}


def test_a_secret_in_a_speaker_name_is_screened_too(tmp_path: Path) -> None:
    records = [{"speaker": "AKIAIOSFODNN7EXAMPLE", "text": "hello there, all good"}]
    with pytest.raises(InvalidInput, match=r"turns\[0\]\.speaker"):
        brain(tmp_path, secrets="refuse").ingest(parse_text(json.dumps(records)))


def test_export_and_import_keep_a_short_turn_and_its_context(tmp_path: Path) -> None:
    import io

    from octobrain.memory.export import export_jsonl
    from octobrain.memory.transfer import import_jsonl

    source = brain(tmp_path / "a")
    source.ingest(parse_text(json.dumps(LOCOMO)))
    out = io.StringIO()
    export_jsonl(source, out)
    target = brain(tmp_path / "b")
    report = import_jsonl(target, out.getvalue().splitlines(keepends=True))
    assert report.imported == 5
    wow = stored(target)["Wow! How was it?"]
    assert "I joined a pottery class." in wow.context
