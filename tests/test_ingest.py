"""`memory ingest` and the MCP `ingest` tool: conversations stored turn by turn with context."""

from __future__ import annotations

import gzip
import json
import os
import re
import threading
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import anyio
import lancedb
import numpy as np
import pyarrow as pa
import pytest
from click.testing import CliRunner, Result
from mcp import Client

from octobrain.config import Config, EmbeddingConfig, MemoryConfig
from octobrain.errors import InvalidInput, StorageError
from octobrain.memory.brain import Brain
from octobrain.memory.conversation import parse_chat, parse_text, read_conversations
from octobrain.memory.corpus_io import LIGHT_COLUMNS, texts_of
from octobrain.memory.transfer import reembed
from octobrain.models import RelationshipType
from octobrain.store.doctor import diagnose
from octobrain.store.location import StoreLocation
from octobrain.store.schema import memories_schema
from octobrain.times import utcnow
from tests.server_support import PROJECT_A, call, hash_pool, run, server_for
from tests.traced import traced

SCOPE = "github.com/acme/chat"
MINUTE = timedelta(minutes=1)

LOCOMO = [
    {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Caroline",
            "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Caroline", "dia_id": "D1:1", "text": "I joined a pottery class."},
                {"speaker": "Melanie", "dia_id": "D1:2", "text": "Wow! How was it?"},
                {"speaker": "Caroline", "dia_id": "D1:3", "text": "Yeah, it was so much fun!"},
            ],
            "session_2_date_time": "10:00 am on 20 June, 2023",
            "session_2": [
                {
                    "speaker": "Melanie",
                    "dia_id": "D2:1",
                    "text": "Look at this",
                    "blip_caption": "a photo of a sunrise over a lake",
                },
                {"speaker": "Caroline", "dia_id": "D2:2", "text": "Beautiful sunrise!"},
            ],
        },
        "qa": [],
    }
]


def claude_transcript(path: Path) -> Path:
    sid = "5b0e2c1a-0000-4000-8000-000000000001"
    entries: list[dict[str, Any]] = [
        {"type": "summary", "summary": "x"},
        {
            "type": "user",
            "sessionId": sid,
            "uuid": "u1",
            "timestamp": "2026-03-02T10:00:00Z",
            "message": {"role": "user", "content": "Why does the nightly export crash?"},
        },
        {
            "type": "assistant",
            "sessionId": sid,
            "uuid": "a1",
            "timestamp": "2026-03-02T10:00:05Z",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "The export reads a closed file handle."},
                    {"type": "tool_use", "name": "Read", "input": {"file_path": "x.py"}},
                ],
            },
        },
        {
            "type": "user",
            "sessionId": sid,
            "uuid": "u2",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "content": "file contents"}],
            },
        },
        {
            "type": "user",
            "sessionId": sid,
            "uuid": "u3",
            "message": {"role": "user", "content": "<command-name>/clear</command-name>"},
        },
    ]
    path.write_text("\n".join(json.dumps(e) for e in entries) + "\n")
    return path


def brain(tmp_path: Path, **memory: Any) -> Brain:
    config = Config(embedding=EmbeddingConfig(model="hash:256"), memory=MemoryConfig(**memory))
    return Brain(SCOPE, config=config, uri=tmp_path / "db")


def stored(b: Brain) -> dict[str, Any]:
    """Ingested turns by the text that was said."""
    return {m.content: m for m in b.recent(limit=1000)}


# ---- formats ----------------------------------------------------------------------------------


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


def test_a_sleep_pass_keeps_every_turn_of_a_conversation(tmp_path: Path) -> None:
    """Turns are a record of what was said: the same reply to five questions is five turns,
    each in its place, never merged into one summary like near-duplicate memories are."""
    now = datetime.now(UTC)
    records = []
    for i in range(5):
        asked = f"Can you look at the failure number {i} in the deploy job?"
        records.append(
            {"speaker": "Ana", "text": asked, "time": (now + 2 * i * MINUTE).isoformat()}
        )
        reply = "Thanks, sounds good to me!"
        records.append(
            {"speaker": "Bo", "text": reply, "time": (now + (2 * i + 1) * MINUTE).isoformat()}
        )
    b = brain(tmp_path)
    b.ingest(parse_text(json.dumps(records)))
    twins = [
        f"Token refresh runs every five minutes on the {m} gateway." for m in ("", "api", "edge")
    ]
    for text in twins:  # three near-duplicate memories beside them still merge
        b.memorize(title="Token refresh", content=text)
    report = b.sleep_consolidate(threshold=0.85, min_size=3)
    merged = [m.content for c in report.consolidations for m in c.members]
    assert merged and "Thanks, sounds good to me!" not in merged
    replies = [h for h in b.recent(limit=100) if h.content == "Thanks, sounds good to me!"]
    assert len(replies) == 5


def test_a_sleep_pass_over_many_turns_names_none_of_them_in_a_query(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass never merges turns, so the turns a store holds add nothing to its queries: the
    `achieves` edges were looked up by naming every recent row, and a store of 200,000 turns
    made that one query 33 s of CPU and 9 GB. The notes beside the turns still merge."""
    b = brain(tmp_path)
    b.ingest(parse_text(json.dumps([{"speaker": "Ana", "text": f"turn {i}"} for i in range(600)])))
    for where in ("", "api", "edge"):
        b.memorize(title="Token refresh", content=f"Token refresh runs every five minutes {where}.")
    import octobrain.memory.sleep as sleep_module

    named: list[int] = []

    def counting_sql_in(column: str, values: Any) -> str:
        named.append(len(values))
        return sql_in(column, values)

    from octobrain.store.sql import sql_in

    monkeypatch.setattr(sleep_module, "sql_in", counting_sql_in)
    monkeypatch.setattr(b.store, "relationships_of", _counting(b.store.relationships_of, named))
    report = b.sleep_consolidate(threshold=0.85, min_size=3)
    assert [len(c.members) for c in report.consolidations] == [3]
    assert max(named, default=0) < 600


def _counting(method: Any, named: list[int]) -> Any:
    def counted(ids: Any) -> Any:
        named.append(len(ids))
        return method(ids)

    return counted


def test_a_sleep_pass_reads_the_words_and_vectors_of_no_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pass's recent rows and its statement pool (the conflict check's) read every working
    row of the scope whole, turns included, with their words and vectors, before dropping the
    turns: a store of 200,000 turns and one note read them all. Only the tags are read of a
    turn now."""
    from octobrain.store.memories import MemoryStore
    from octobrain.store.pinned import Pinned

    b = brain(tmp_path)
    b.ingest(parse_text(json.dumps([{"speaker": "Ana", "text": f"turn {i}"} for i in range(600)])))
    for where in ("", "api", "edge"):
        b.memorize(title="Token refresh", content=f"Token refresh runs every five minutes {where}.")
    wide: list[int] = []  # rows of each read that held words or vectors

    def counting(read: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            table = read(*args, **kwargs)
            if {"content", "embedding"} & set(table.column_names):
                wide.append(table.num_rows)
            return table

        return counted

    for cls, name in ((MemoryStore, "scan_arrow"), (Pinned, "scan_arrow"), (Pinned, "take")):
        monkeypatch.setattr(cls, name, counting(getattr(cls, name)))
    report = b.sleep_consolidate(threshold=0.85, min_size=3, dry_run=True)
    assert [len(c.members) for c in report.consolidations] == [3]
    assert wide and max(wide) == 3, wide


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


def test_an_ingest_holds_a_group_of_turns_at_once_and_an_unchanged_file_is_read_cheaply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every turn's memory was built before the first was written: 200,000 tiny turns took
    1 GB (a 64 MiB file, ten times as many). Ingested again unchanged, each batch of 256 read
    the store four times and took the write lock: 63 s of CPU for 200,000 turns."""
    import octobrain.memory.ingest as ingest_module

    alive = _count_alive(monkeypatch, ingest_module, "Memory")
    b = brain(tmp_path)
    group = 1024  # turns built, checked and written at once (`ingest.BATCH`)
    turns = 3 * group + 100
    records = [{"speaker": "Ann", "text": f"turn {i}"} for i in range(turns)]
    first = b.ingest(parse_text(json.dumps(records)))
    assert (first.added, first.links) == (turns, turns - 1)
    # (the group being written, and the next one as it is built)
    assert 0 < alive["most"] <= 2 * group, alive
    locks, reads = [], []
    taken = b.store.write_lock
    monkeypatch.setattr(b.store, "write_lock", lambda: locks.append(1) or taken())
    monkeypatch.setattr(b.store, "values_of", _counting_all(b.store.values_of, reads))
    monkeypatch.setattr(b.store, "held", _counting_all(b.store.held, reads))
    again = b.ingest(parse_text(json.dumps(records)))
    assert (again.added, again.skipped_existing, again.links) == (0, turns, 0)
    assert locks == [] and len(reads) == 4  # one read of the turns per batch of 1,024


def test_a_files_turns_are_read_again_batch_by_batch_not_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every turn of a file was parsed into one list held through the whole ingest: about 270
    bytes a turn, 0.5 GB for a 64 MiB file of tiny turns. Now a chat export's or transcript's
    turns are checked once, then read from the text again as the batches are written: the
    same memories, and a killed ingest's acknowledged batches kept, the rest added by a re-run."""
    import octobrain.memory.conversation as conversation_module
    from octobrain.memory.conversation import Conversation
    from octobrain.memory.ingest import turn_memories

    alive = _count_alive(monkeypatch, conversation_module, "Turn")
    turns = 3 * 1024 + 100  # four batches (`ingest.BATCH`)
    records = [{"speaker": ["Ann", "Bo"][i % 2], "text": f"turn {i}"} for i in range(turns)]
    text = "\n".join(json.dumps(r) for r in records)
    (conv,) = parse_text(text)
    b = brain(tmp_path)
    written: list[int] = []

    def killed_after_two(n: int) -> None:
        written.append(n)
        if len(written) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        b.ingest([conv], progress=killed_after_two)
    assert 0 < alive["most"] <= 8, alive  # a turn, its neighbours: not the file's 3,172
    assert b.store.count() == 2048 and len(b.store.all_relationships()) == 2047
    rest = b.ingest(parse_text(text))
    assert (rest.added, rest.skipped_existing, rest.links) == (turns - 2048, 2048, turns - 2048)
    assert b.store.count() == turns and len(b.store.all_relationships()) == turns - 1

    def shown(c: Conversation) -> list[tuple[Any, ...]]:
        made = turn_memories(b, c, scope=SCOPE)
        return [(m.id, m.title, m.content, m.context, m.tags) for m in made]

    held = Conversation(conv.key, list(conv.turns), conv.blank)
    assert shown(conv) == shown(held) and len(held.turns) == turns


def _count_alive(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> dict[str, int]:
    """How many instances of `module.<name>` are alive (`now`) and were at most at once
    (`most`), counted by a subclass put in its place."""
    alive = {"now": 0, "most": 0}

    class Counted(getattr(module, name)):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            alive["now"] += 1
            alive["most"] = max(alive["most"], alive["now"])

        def __del__(self) -> None:
            alive["now"] -= 1

    monkeypatch.setattr(module, name, Counted)
    return alive


def _counting_all(method: Any, calls: list[int]) -> Any:
    def counted(*args: Any) -> Any:
        calls.append(1)
        return method(*args)

    return counted


def test_two_ingests_of_one_file_at_once_store_each_turn_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A batch's turns are looked up, then embedded without the lock, then written under it:
    # another process that stores them all meanwhile must leave this one nothing to add.
    records = [{"speaker": "Ann", "text": f"turn {i}"} for i in range(1500)]
    first, other = brain(tmp_path), brain(tmp_path)
    plain = first.embedder.embed_documents
    raced: list[int] = []

    def embed_while_the_other_ingests(texts: list[str]) -> Any:
        if not raced:  # (the two may share one embedder: the other's embedding goes through)
            raced.append(-1)
            raced[0] = other.ingest(parse_text(json.dumps(records))).added
        return plain(texts)

    monkeypatch.setattr(first.embedder, "embed_documents", embed_while_the_other_ingests)
    report = first.ingest(parse_text(json.dumps(records)))
    assert raced == [1500] and (report.added, report.skipped_existing) == (0, 1500)
    assert first.store.count() == 1500 and len(first.store.all_relationships()) == 1499


def test_an_ingest_killed_between_its_commits_is_mended_by_the_next(tmp_path: Path) -> None:
    # A batch's turns and their links are two commits: a kill between them leaves the turns
    # stored without links. Running the ingest again (what its error tells) links them.
    b = brain(tmp_path)
    turns = [
        {"speaker": "Ann", "text": f"Turn {i} about topic zq{i}.", "session": "1"}
        for i in range(300)
    ]
    b.ingest(parse_text(json.dumps(turns)))  # two batches: 256 turns, then 44
    assert len(b.store.all_relationships()) == 299
    b.store.delete_relationships("relationship_type = 'same_session'")  # the kill's state
    again = b.ingest(parse_text(json.dumps(turns)))
    assert (again.added, again.skipped_existing, again.links) == (0, 300, 299)
    assert len(b.store.all_relationships()) == 299
    assert b.ingest(parse_text(json.dumps(turns))).links == 0  # and nothing twice


def test_secrets_are_screened_like_memorize(tmp_path: Path) -> None:
    records = [{"speaker": "Ana", "text": "the key is AKIAIOSFODNN7EXAMPLE for prod"}]
    with pytest.raises(InvalidInput, match=r"turns\[0\]\.text"):
        brain(tmp_path, secrets="refuse").ingest(parse_text(json.dumps(records)))
    b = brain(tmp_path / "redact", secrets="redact")
    b.ingest(parse_text(json.dumps(records)))
    (memory,) = b.recent()
    assert "AKIAIOSFODNN7EXAMPLE" not in memory.content + memory.context


@pytest.mark.parametrize(
    ("text", "fmt", "rule"),
    [
        ("", "auto", "file: is empty"),
        ('{"a": 1}', "auto", "file: is not a known conversation format"),
        ('[{"speaker": "", "text": "hi"}]', "chat", r"turns\[0\]\.speaker: must be a non-empty"),
        ('[{"speaker": "A", "text": 3}]', "chat", r"turns\[0\]\.text: must be a string"),
        (
            '[{"speaker": "A", "text": "x", "time": "noon"}]',
            "chat",
            r"turns\[0\]\.time: must be ISO",
        ),
        # A time UTC has no day for would be stored, then break every read that shows it.
        (
            '[{"speaker": "A", "text": "x", "time": "9999-12-31T23:59:59-05:00"}]',
            "chat",
            r"turns\[0\]\.time: must fall within years 1–9999 in UTC",
        ),
        (
            '[{"speaker": "A", "text": "x", "time": "0001-01-01T00:00:00+14:00"}]',
            "chat",
            r"turns\[0\]\.time: must fall within years 1–9999 in UTC",
        ),
        (
            '[{"speaker": "A", "text": "x", "time": 1e20}]',
            "chat",
            r"turns\[0\]\.time: must be Unix",
        ),
        ('[{"speaker": "A", "text": "x", "time": NaN}]', "chat", r"turns\[0\]\.time: must be Unix"),
        (
            '[{"speaker": "A", "text": "x", "time": 1' + "0" * 400 + "}]",
            "chat",
            r"turns\[0\]\.time: must be Unix",
        ),
        ("[1, 2]", "locomo", r"file\[0\]\.conversation: must be an object"),
        # A session dated 9999 headed every briefing's recent memories until then.
        (
            '{"conversation": {"session_1_date_time": "1:00 pm on 1 January, 9999",'
            ' "session_1": [{"speaker": "A", "text": "hi"}]}}',
            "auto",
            r"^file\[0\]\.conversation\.session_1_date_time: must not be more than a day ahead",
        ),
        ("{\n{", "auto", "file: line 1 is not JSON"),
        # An array that is not JSON to its end is read as JSONL, as before it was read whole.
        ('[{"speaker": "A", "text": "x"}] [', "auto", r"file: is not JSON \(Extra data: line 1, "),
        (
            '[{"speaker": "A", "text": "x"},\n{"text": 1 2}]',
            "auto",
            r"JSON \(.*: line 2, column 12\)",
        ),
        ("[]", "yaml", "format_in: must be one of"),
        # Parsers' own errors, once tracebacks: nesting past the interpreter's recursion, an
        # integer longer than it converts, a NUL taken into the session's tag.
        ("[" * 100_000 + "]" * 100_000, "auto", "file: is nested too deeply"),
        ('{"a": 1}\n' + '{"a":' * 100_000 + "1" + "}" * 100_000, "auto", "file: line 2 is nested"),
        ('[{"speaker": "A", "text": "x", "id": ' + "9" * 5000 + "}]", "chat", "file: holds a num"),
        (
            '{"type": "user", "sessionId": "s\\u0000", "message": {"content": "hello"}}',
            "claude",
            "sessionId: must be 1–100 characters, without NUL",
        ),
        # One id for two different turns: stored, they were two rows of one memory id.
        (
            '[{"speaker": "A", "text": "one", "id": "x"},'
            ' {"speaker": "A", "text": "two", "id": "x"}]',
            "chat",
            r'^turns\[1\]\.id: duplicate of turns\[0\]\.id \("x"\), which is a different turn',
        ),
        (  # a JSONL file: a record is named by its line
            '{"speaker": "A", "text": "one", "id": 7}\n\n{"speaker": "B", "text": "ok"}\n'
            '{"speaker": "A", "text": "two", "id": 7}',
            "chat",
            r'^line 4\.id: duplicate of line 1\.id \("7"\), which is a different turn',
        ),
        (
            '\n{"type": "user", "uuid": "u1", "message": {"content": "hello"}}\n'
            '{"type": "assistant", "uuid": "u1", "message": {"content": "hi there"}}',
            "claude",
            r'^line 3\.uuid: duplicate of line 2\.uuid \("u1"\)',
        ),
        (
            '[{"conversation": {"session_1": [{"speaker": "A", "text": "one", "dia_id": "D1:2"},'
            ' {"speaker": "B", "text": "two"}]}}]',
            "locomo",
            r"^file\[0\]\.conversation\.session_1\[1\]: duplicate of "
            r'file\[0\]\.conversation\.session_1\[0\]\.dia_id \("D1:2"\)',
        ),
        (  # (the chat record was skipped as something Claude Code keeps beside the talk)
            '{"type": "user", "uuid": "u1", "sessionId": "s", "message": {"content": "hello"}}\n'
            '{"speaker": "bob", "text": "a chat line", "time": "2026-01-01T10:01:00Z"}',
            "auto",
            r"^line 2: is a chat record \(\{speaker, text\}\) in a Claude Code transcript",
        ),
        (  # (both read as session 1: one of them was read twice, the other lost)
            '[{"conversation": {"session_1": [{"speaker": "A", "text": "one"}],'
            ' "session_01": [{"speaker": "A", "text": "zero one"}]}}]',
            "locomo",
            r"^file\[0\]\.conversation\.session_1: names session 1 again \(as session_01",
        ),
    ],
)
def test_bad_transcripts_name_the_field(text: str, fmt: str, rule: str) -> None:
    with pytest.raises(InvalidInput, match=rule):
        parse_text(text, fmt)


LONE = "\\ud800"  # a lone surrogate as JSON writes it (a JS string cut inside an emoji)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"speaker": "A", "text": "x%s"}\n{"speaker": "B", "text": "y"}', "line 1.text"),
        ('{"speaker": "A%s", "text": "x"}\n{"speaker": "B", "text": "y"}', "line 1.speaker"),
        ('[{"speaker": "A", "text": "x", "session": "s%s"}]', "turns[0].session"),
        ('[{"speaker": "A", "text": "x", "id": "i%s"}]', "turns[0].id"),
        (
            '[{"sample_id": "s", "conversation": {"session_1": [{"speaker": "A", "text": "x", '
            '"blip_caption": "a photo%s"}]}}]',
            "file[0].conversation.session_1[0].blip_caption",
        ),
        (
            '[{"sample_id": "s%s", '
            '"conversation": {"session_1": [{"speaker": "A", "text": "x"}]}}]',
            "file[0].sample_id",
        ),
    ],
)
def test_text_that_is_no_unicode_is_refused_naming_the_field(text: str, where: str) -> None:
    # Before: a traceback (UnicodeEncodeError: surrogates not allowed), exit 1; over MCP
    # "internal error".
    with pytest.raises(InvalidInput) as refused:
        parse_text(text % LONE)
    assert str(refused.value) == (
        f"{where}: must be valid Unicode (lone surrogates are not allowed)"
    )


def test_a_transcript_half_an_emoji_and_a_file_name_that_is_no_utf8_are_stored(
    tmp_path: Path,
) -> None:
    # A Claude Code transcript is the client's own: a half emoji in it is said as U+FFFD, as
    # a stray NUL is dropped; a file name's bytes that are not UTF-8 name the conversation so.
    line = {"type": "user", "uuid": "u1", "message": {"content": "ok \ud83d"}}
    path = tmp_path / os.fsdecode(b"caf\xe9.jsonl")
    path.write_text(json.dumps(line) + "\n")
    (conversation,) = read_conversations(path)
    assert (conversation.key, conversation.turns[0].text) == ("caf\ufffd", "ok \ufffd")
    assert brain(tmp_path).ingest([conversation]).added == 1
    with pytest.raises(InvalidInput, match=r"^conversation: must be valid Unicode"):
        read_conversations(path, name="x\udcff")


def test_mcp_ingest_of_text_that_is_no_unicode_is_a_field_error(tmp_path: Path) -> None:
    server = server_for(hash_pool(tmp_path / "db"), tmp_path, PROJECT_A)

    async def body() -> None:
        async with Client(server) as client:
            for args, where in (
                (
                    {"conversation": "c", "turns": [{"speaker": "a", "text": "x\ud800"}]},
                    "turns[0].text",
                ),
                (
                    {"conversation": "c\udc80", "turns": [{"speaker": "a", "text": "x"}]},
                    "conversation",
                ),
            ):
                error, reply = await call(client, "ingest", **args)
                assert error and reply.startswith(f"{where}: must be valid Unicode"), reply

    run(body)


def test_a_turn_time_given_empty_is_not_known_as_the_schema_says() -> None:
    # Kept as absent on purpose (a time is data, not a filter: nothing is widened by it), so
    # the ingest tool's schema says so.
    from octobrain.server.schemas import INGEST

    conversation = parse_chat([{"speaker": "A", "text": "hi", "time": ""}])
    assert conversation.turns[0].time is None
    turn = INGEST.properties["turns"]["items"]["properties"]
    assert '"" or left out when not known' in turn["time"]["description"]


def test_a_turn_given_twice_is_one_turn() -> None:
    # Two copies of a transcript joined: the repeated turns are the same turns.
    turns = [{"speaker": "A", "text": "one", "id": "x"}, {"speaker": "B", "text": "two", "id": "y"}]
    (conversation,) = parse_text(json.dumps(turns + turns), "chat")
    assert [(t.key, t.text) for t in conversation.turns] == [("x", "one"), ("y", "two")]


def test_a_locomo_session_date_is_read_as_written_or_refused() -> None:
    # A date neither form reads was dropped without a word (the turns dated at the ingest, so
    # a question bounded by time never found them); a list or a dict was written out as text.
    def sample(date: object, sample_id: object = "s1") -> str:
        turns = [{"speaker": "Ann", "text": "I adopted a beagle.", "dia_id": "D1:1"}]
        session = {"session_1": turns, "session_1_date_time": date}
        return json.dumps([{"sample_id": sample_id, "conversation": session}])

    (iso,) = parse_text(sample("2023-05-08T13:56:00Z"), "locomo")
    assert iso.turns[0].time == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    (broken,) = parse_text(sample("20230508\n135600Z"), "locomo")  # (one line, as a title is)
    assert broken.turns[0].session_date == "20230508 135600Z"
    for date, rule in [
        ("next Tuesday", r"must be a date as LoCoMo writes it \('1:56 pm on 8 May, 2023'\) or "
                         r'ISO-8601, got "next Tuesday"'),
        (["8:00 pm on 9 May, 2023"], r"must be a string, got array"),
        # Python reads any character between an ISO date and its time, and the date as written
        # is in the turns' titles: a UnicodeEncodeError traceback; a NUL stored in a title.
        ("20230508\ud800135600Z", r"must be valid Unicode"),
        ("20230508\x00135600Z", r"must not contain NUL characters"),
    ]:  # fmt: skip
        with pytest.raises(InvalidInput, match=r"^file\[0\]\.conversation\.session_1_date_time: "
                           + rule):  # fmt: skip
            parse_text(sample(date), "locomo")
    with pytest.raises(InvalidInput, match=r"^file\[0\]\.sample_id: must be a string or an int"):
        parse_text(sample("2023-05-08T13:56:00Z", {"a": 1}), "locomo")


def test_a_broken_json_document_is_placed_where_it_broke() -> None:
    # A pretty-printed export broken on line 3 was read again as JSONL and blamed "line 1".
    broken = '[\n  {"speaker": "a", "text": "b"},\n  {"speaker": "a" "text": "b"}\n]'
    with pytest.raises(InvalidInput, match=r"^file: is not JSON \(Expecting ',' delimiter: "
                       r"line 3, column 19\)$"):  # fmt: skip
        parse_text(broken)
    with pytest.raises(InvalidInput, match=r"^file: line 2 is not JSON .*expected JSON or JSONL$"):
        parse_text('{"speaker": "a", "text": "b"}\n{"speaker" 2}\n')  # JSONL keeps its lines


# ---- CLI ------------------------------------------------------------------------------------


def cli(*args: str) -> Result:
    from octobrain.cli.main import main

    return CliRunner().invoke(main, list(args))


@pytest.fixture
def cli_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's store under `tmp_path/data`, with the hash embedder and no config file."""
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("OCTOBRAIN_EMBEDDING_MODEL", "hash:64")
    monkeypatch.delenv("OCTOBRAIN_CONFIG_PATH", raising=False)


@pytest.mark.usefixtures("cli_env")
def test_cli_ingest_reports_and_errors_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(LOCOMO))
    first = cli("memory", "--scope", SCOPE, "ingest", str(path), "--format", "json")
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["added"] == 5
    second = cli("memory", "--scope", SCOPE, "ingest", str(path))
    assert "0 added, 5 already present" in second.stdout
    bad = tmp_path / "bad.json"
    bad.write_text('[{"speaker": "A", "text": "x", "time": "noon"}]')
    failed = cli("memory", "--scope", SCOPE, "ingest", str(bad), "--format-in", "chat")
    assert failed.exit_code == 2
    assert failed.stderr.strip().startswith("error: turns[0].time: must be ISO-8601")
    assert "Traceback" not in failed.output
    twice = tmp_path / "twice.json"
    twice.write_text(json.dumps([{"speaker": "A", "text": t, "id": "x"} for t in ("a", "b")]))
    dup = cli("memory", "--scope", SCOPE, "ingest", str(twice))
    assert (dup.exit_code, dup.stdout) == (2, "")
    assert dup.stderr == (
        'error: turns[1].id: duplicate of turns[0].id ("x"), which is a different turn; '
        "a turn id must name one turn\n"
    )
    chat = tmp_path / "chat.jsonl"
    chat.write_text(json.dumps({"speaker": "A", "text": "hi", "time": "2026-01-01T10:00Z"}))
    wrong = cli("memory", "--scope", SCOPE, "ingest", str(chat), "--format-in", "claude")
    assert wrong.exit_code == 0 and "ingested 0 turns" in wrong.stdout
    assert wrong.stderr.startswith(
        f"warning: {chat}: no turns found in it as claude; --format-in claude|chat|locomo|"
        "claude-ai|chatgpt|whatsapp|whatsapp-dmy|whatsapp-mdy forces a format\n"
    )
    # A device never ends and a FIFO waits for a writer: refused at once, not read.
    fifo = tmp_path / "turns.fifo"
    os.mkfifo(fifo)
    for special in ("/dev/zero", str(fifo)):
        refused = cli("memory", "--scope", SCOPE, "ingest", special)
        assert refused.exit_code == 2
        assert refused.stderr == f"error: file: {special} is not a regular file\n"


@pytest.mark.usefixtures("cli_env")
def test_cli_ingest_names_the_conversation_and_refuses_text_that_is_not_utf8(
    tmp_path: Path,
) -> None:
    # Two exports both called result.json were one conversation, "result": the second's turns
    # chained into the first's sessions. The line names the conversation, --conversation
    # gives another; a Latin-1 file was stored with U+FFFD in place of each accent.
    said = {
        "family": ("Ann", "Dinner is at the lobster place.", "2024-06-01T18:00Z"),
        "work": ("Carl", "The quarterly audit starts Monday.", "2024-06-01T18:10Z"),
    }
    chats = {k: [{"speaker": s, "text": t, "time": w}] for k, (s, t, w) in said.items()}
    for name, records in chats.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "result.json").write_text(json.dumps(records))
    family = cli("memory", "--scope", SCOPE, "ingest", str(tmp_path / "family" / "result.json"))
    assert "ingested 1 turn of conversation 'result' into" in family.stdout, family.output
    work_file = str(tmp_path / "work" / "result.json")
    work = cli("memory", "--scope", SCOPE, "ingest", work_file, "--conversation", " work ")
    assert "ingested 1 turn of conversation 'work' into" in work.stdout, work.output
    b = Brain(SCOPE, config=Config(embedding=EmbeddingConfig(model="hash:64")))
    audit = stored(b)["The quarterly audit starts Monday."]
    assert "conversation:work" in audit.tags and "lobster" not in audit.context
    again = cli("memory", "--scope", SCOPE, "ingest", work_file, "--conversation", "work")
    assert "0 added, 1 already present" in again.stdout
    two = tmp_path / "two.json"
    two.write_text(json.dumps([LOCOMO[0], {**LOCOMO[0], "sample_id": "other"}]))
    refused = cli("memory", "--scope", SCOPE, "ingest", str(two), "--conversation", "x")
    assert refused.stderr == f"error: conversation: names one conversation; {two} holds 2\n"
    blank = cli("memory", "--scope", SCOPE, "ingest", work_file, "--conversation", "  ")
    assert blank.stderr.startswith("error: conversation: must be a string of 1–")
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"speaker": "A", "text": "ok"}\n{"speaker": "Zo\xeb", "text": "caf\xe9"}\n')
    refused = cli("memory", "--scope", SCOPE, "ingest", str(latin))
    assert refused.exit_code == 2 and refused.stderr == (
        "error: file: is not UTF-8 text (line 2, column 16); save it as UTF-8\n"
    )


@pytest.mark.usefixtures("cli_env")
def test_cli_ingest_reads_a_gzip_file_within_the_file_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: LoCoMo's own file is kept as .json.gz (and `bench locomo` reads it so), but
    # `memory ingest` of it said "file: is not UTF-8 text (line 1, column 2); save it as UTF-8".
    packed = tmp_path / "talk.jsonl.gz"
    lines = [{"speaker": "A", "text": f"turn {i}", "time": f"2024-06-01T18:0{i}Z"} for i in (1, 2)]
    # (two members, as `cat a.gz b.gz` makes: both read)
    packed.write_bytes(b"".join(gzip.compress(json.dumps(r).encode() + b"\n") for r in lines))
    done = cli("memory", "--scope", SCOPE, "ingest", str(packed))
    assert done.exit_code == 0, done.output
    assert "ingested 2 turns of conversation 'talk' into" in done.stdout  # not 'talk.jsonl'
    locomo = tmp_path / "locomo.json.gz"
    locomo.write_bytes(gzip.compress(json.dumps(LOCOMO).encode()))
    assert "5 added" in cli("memory", "--scope", SCOPE, "ingest", str(locomo)).stdout
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(locomo.read_bytes()[:-20])
    refused = cli("memory", "--scope", SCOPE, "ingest", str(cut))
    assert refused.exit_code == 2 and refused.stderr.startswith(
        "error: file: is gzip-compressed but cannot be inflated (it ends before its data does)"
    ), refused.output
    # Inflated, it is bound as a file is: read no further than the bound, then refused.
    monkeypatch.setattr("octobrain.memory.conversation.MAX_FILE_BYTES", 1 << 20)
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b" " * (8 << 20)))
    assert bomb.stat().st_size < 10_000
    refused = cli("memory", "--scope", SCOPE, "ingest", str(bomb))
    assert refused.exit_code == 2
    assert refused.stderr == "error: file: must be at most 1 MiB once inflated\n"


# ---- an old store -------------------------------------------------------------------------


def test_a_store_made_before_the_context_column_gains_it_on_first_write(tmp_path: Path) -> None:
    b = brain(tmp_path)
    old = memories_schema(b.embedder.model_id, b.embedder.dim)
    old = pa.schema([f for f in old if f.name != "context"], metadata=old.metadata)
    db = lancedb.connect(tmp_path / "db")
    row = {
        "id": "00000000-0000-4000-8000-000000000001",
        "scope": SCOPE,
        "role": "",
        "memory_type": "decision",
        "title": "Ledger database",
        "content": "We use Postgres.",
        "tags": [],
        "related_files": [],
        "importance": 0.5,
        "pre_consolidation_importance": None,
        "source": "user_confirmed",
        "state": "working",
        "access_count": 0,
        "git_commit": "",
        "embedding": b.embedder.embed_documents(["Ledger database We use Postgres."])[0],
    }
    from datetime import datetime

    now = datetime.now(UTC)
    row |= {"created_at": now, "updated_at": now, "last_accessed": now}
    db.create_table("memories", data=pa.Table.from_pylist([row], schema=old), schema=old)
    hits = b.remember("ledger database postgres").hits
    assert [h.memory.title for h in hits] == ["Ledger database"]
    assert hits[0].memory.context == ""
    b.ingest(parse_text(json.dumps(LOCOMO)))  # the first write adds the column
    table = lancedb.connect(tmp_path / "db").open_table("memories")
    assert "context" in table.schema.names
    assert table.schema.metadata[b"octobrain.embedding_model"] == b.embedder.model_id.encode()
    assert b.store.count() == 6
    assert "pottery" in b.remember("pottery class").hits[0].memory.content


# ---- MCP ------------------------------------------------------------------------------------


def test_a_forgotten_turn_is_not_brought_back_by_ingesting_its_conversation_again(
    tmp_path: Path,
) -> None:
    # A turn forgotten for holding a password came back with the next ingest of its
    # transcript (the tool asks clients to send the whole transcript each time).
    server = server_for(hash_pool(tmp_path / "db"), tmp_path, PROJECT_A)
    turns = [
        {"speaker": "user", "text": "Let's set up the staging database today."},
        {"speaker": "user", "text": "The staging password is hunter2-orange-kettle."},
        {"speaker": "assistant", "text": "Staging database is ready on port 5433."},
    ]

    async def body() -> None:
        async with Client(server) as client:
            error, reply = await call(client, "ingest", conversation="setup", turns=turns)
            assert not error and "3 turns added" in reply, reply
            error, reply = await call(client, "remember", query="staging password kettle")
            lines = reply.splitlines()
            at = next(i for i, line in enumerate(lines) if "hunter2" in line)
            said = next(line for line in reversed(lines[:at]) if line.startswith("ID: "))
            error, reply = await call(client, "forget", memory_id=said[4:], confirm=True)
            assert not error, reply
            error, reply = await call(client, "ingest", conversation="setup", turns=turns)
            assert not error and "0 turns added, 2 already present, 1 forgotten" in reply, reply
            error, reply = await call(client, "remember", query="staging password kettle")
            assert "hunter2" not in reply, reply

    run(body)
    brain = Brain(PROJECT_A, config=Config(embedding=EmbeddingConfig(model="hash:64")),
                  uri=tmp_path / "db")  # fmt: skip
    edges = brain.store.all_relationships()
    assert brain.store.held([e.target_id for e in edges] + [e.source_id for e in edges]) == {
        e for edge in edges for e in (edge.source_id, edge.target_id)
    }, "an edge to the forgotten turn"
    report = diagnose(StoreLocation(tmp_path / "db"))  # the record is a table doctor reads
    assert report.ok and "forgotten_turns" in [t.name for t in report.tables], report
    # The record lost: the next ingest names the table instead of storing the turn again.
    (tmp_path / "db" / "forgotten_turns.lance").rename(tmp_path / "aside.lance")
    server = server_for(hash_pool(tmp_path / "db"), tmp_path, PROJECT_A)

    async def again() -> None:
        async with Client(server) as client:
            error, reply = await call(client, "ingest", conversation="setup", turns=turns)
            assert error and "forgotten_turns" in reply and "added" not in reply, reply

    run(again)
    # Its repair: started over empty, by name (the old one was a dead end: "move the table's
    # directory aside" of a directory that is gone, refused again at every ingest).
    from octobrain.cli.main import main

    env = {"OCTOBRAIN_DATA_DIR": str(tmp_path), "OCTOBRAIN_EMBEDDING_MODEL": "hash:64"}
    shown = CliRunner().invoke(main, ["doctor"], env=env)
    assert shown.exit_code == 1 and "`octobrain doctor --recreate forgotten_turns`" in shown.output
    healthy = CliRunner().invoke(main, ["doctor", "--recreate", "knowledge"], env=env)
    assert healthy.exit_code == 2 and "nothing to start over" in healthy.output
    fixed = CliRunner().invoke(main, ["doctor", "--recreate", "forgotten_turns"], env=env)
    assert fixed.exit_code == 0 and "ok: nothing is wrong" in fixed.output, fixed.output
    server = server_for(hash_pool(tmp_path / "db"), tmp_path, PROJECT_A)

    async def after() -> None:
        async with Client(server) as client:
            error, reply = await call(client, "ingest", conversation="setup", turns=turns)
            assert not error and "1 turn added" in reply, reply  # as the repair said

    run(after)


def test_the_forgotten_record_lost_with_the_manifest_is_named_not_read_as_empty(
    tmp_path: Path,
) -> None:
    records = [
        {"speaker": "Ana", "text": "The staging password is hunter2-orange-kettle."},
        {"speaker": "Bo", "text": "Staging database is ready on port 5433."},
    ]
    b = brain(tmp_path)
    assert b.ingest(parse_text(json.dumps(records))).added == 2
    secret = stored(b)["The staging password is hunter2-orange-kettle."]
    assert b.forget([secret.id], confirm=True).deleted == 1
    assert b.ingest(parse_text(json.dumps(records))).added == 0
    assert reembed(b) == 1  # rewrites the memories table: what shows the record existed stays
    # The record and the store's manifest both lost (the manifest alone is re-made from the
    # tables that open; with it, the record's absence proved nothing).
    (tmp_path / "db" / "forgotten_turns.lance").rename(tmp_path / "aside.lance")
    (tmp_path / "db" / "_octobrain").rename(tmp_path / "aside_octobrain")
    again = brain(tmp_path)
    # Before: "1 turn added", the forgotten password stored again.
    with pytest.raises(StorageError, match=r"forgotten_turns.*memories records that it was made"):
        again.ingest(parse_text(json.dumps(records)))
    assert "hunter2" not in " ".join(stored(again))
    report = diagnose(StoreLocation(tmp_path / "db"))
    assert not report.ok and "forgotten_turns" in [t.name for t in report.tables], report


def test_mcp_ingest_stores_turns_once_and_names_bad_fields(tmp_path: Path) -> None:
    server = server_for(hash_pool(tmp_path / "db"), tmp_path, PROJECT_A)
    turns = [
        {"speaker": "user", "text": "Which queue do we use for billing events?"},
        {"speaker": "assistant", "text": "Billing events go through the SQS FIFO queue."},
    ]

    async def body() -> None:
        async with Client(server) as client:
            error, reply = await call(client, "ingest", conversation="chat-1", turns=turns)
            assert not error and "2 turns added, 0 already present, 1 link" in reply, reply
            error, reply = await call(client, "ingest", conversation="chat-1", turns=turns)
            assert not error and "0 turns added, 2 already present" in reply, reply
            blank = [*turns, {"speaker": "user", "text": "  "}, {"speaker": "user", "text": ""}]
            error, reply = await call(client, "ingest", conversation="chat-1", turns=blank)
            assert not error and "2 with blank text skipped" in reply, reply
            error, reply = await call(client, "remember", query="billing queue")
            assert "SQS FIFO" in reply
            # An id a later call gives to another turn was taken for the stored one, unsaid.
            said = [{"speaker": "user", "text": "First version of the turn.", "id": "T1"}]
            other = [{"speaker": "user", "text": "A completely different turn.", "id": "T1"}]
            error, reply = await call(client, "ingest", conversation="chat-2", turns=said)
            assert not error and "1 turn added" in reply, reply
            error, reply = await call(client, "ingest", conversation="chat-2", turns=other)
            assert not error and "0 turns added, 0 already present, 1 not stored" in reply, reply
            assert "their id names a stored turn with other words" in reply, reply
            error, reply = await call(
                client, "ingest", conversation="chat-1", turns=[{"speaker": "u", "text": 5}]
            )
            assert error and reply.startswith("turns[0].text"), reply
            error, reply = await call(
                client,
                "ingest",
                conversation="c",
                turns=[{"speaker": "u", "text": "x" * 10_000}] * 101,
            )
            assert error and reply.startswith("turns: must hold at most"), reply
            for turn, rule in (
                ({"text": "x" * 10_001}, "turns[0].text: must be at most 10000 bytes"),
                ({"text": "a\x00b"}, "turns[0].text: must not contain NUL"),
                ({"speaker": "u\x00"}, "turns[0].speaker: must not contain NUL"),
                ({"id": "i" * 101}, "turns[0].id: must be 1–100 characters"),
                ({"session": {"a": 1}}, "turns[0].session: must be a string or an integer"),
                ({"time": "9999-12-31T23:59:59-05:00"}, "turns[0].time: must fall within"),
                # Dated 9999, a turn headed every later briefing's recent memories until then.
                ({"time": "9999-12-31T23:59:59Z"}, "turns[0].time: must not be more than a day"),
                ({"time": (utcnow() + timedelta(days=2)).timestamp()}, "turns[0].time: must not"),
            ):
                error, reply = await call(
                    client,
                    "ingest",
                    conversation="c",
                    turns=[{"speaker": "u", "text": "hi", **turn}],
                )
                assert error and reply.startswith(rule), reply

    run(body)


def test_mcp_ingest_embeds_without_holding_up_other_calls(tmp_path: Path) -> None:
    # A long conversation's embedding takes seconds; other sessions' calls on the same pool
    # (HTTP clients, the service's CLI commands and hooks) answer meanwhile, and the ingest
    # still stores every turn once.
    pool = hash_pool(tmp_path / "db")
    server = server_for(pool, tmp_path, PROJECT_A)
    entered, release = threading.Event(), threading.Event()
    turns = [{"speaker": "u", "text": f"slow turn {i} about the deploy window"} for i in range(3)]

    async def body() -> None:
        async with Client(server) as other, Client(server) as ingesting:
            error, reply = await call(
                other, "memorize", title="Deploy day", content="Deploys go out on Tuesdays."
            )
            assert not error, reply
            embedder = pool.shared_root().embedder
            plain = embedder.embed_documents

            def held(texts: Any) -> Any:
                if any("slow turn" in t for t in texts):
                    entered.set()
                    assert release.wait(30)
                return plain(texts)

            embedder.embed_documents = held  # type: ignore[method-assign]
            replies: list[str] = []

            async def ingest() -> None:
                error, reply = await call(ingesting, "ingest", conversation="c", turns=turns)
                assert not error, reply
                replies.append(reply)

            async with anyio.create_task_group() as tg:
                tg.start_soon(ingest)
                assert await anyio.to_thread.run_sync(entered.wait, 30)
                with anyio.fail_after(10):  # the ingest is embedding: the pool is free
                    error, reply = await call(other, "remember", query="when do deploys go out")
                assert not error and "Tuesdays" in reply, reply
                release.set()
            assert "3 turns added, 0 already present, 2 links" in replies[0], replies

    try:
        run(body)
    finally:
        release.set()


def test_concurrent_mcp_ingests_embed_one_at_a_time_and_never_under_the_pool_lock(
    tmp_path: Path,
) -> None:
    # Nothing bounded how many ingests embedded at once (40 HTTP clients: 8.6 GB, a `remember`
    # waiting up to 146 s for a thread); and turns forgotten between an ingest's plan and its
    # write were embedded at the write, under the pool lock (another client waited 14 s): they
    # are now not stored again at all.
    pool = hash_pool(tmp_path / "db")
    server = server_for(pool, tmp_path, PROJECT_A)
    entered, release = threading.Event(), threading.Event()
    running = {"now": 0, "most": 0, "locked": 0}
    count = threading.Lock()
    inside = threading.local()  # whether this thread runs inside the pool lock

    def turns(name: str, n: int) -> list[dict[str, str]]:
        return [{"speaker": "u", "text": f"{name} turn {i} on the release train"} for i in range(n)]

    async def body() -> None:
        async with Client(server) as first:
            assert not (await call(first, "ingest", conversation="old", turns=turns("old", 2)))[0]
        embedder = pool.shared_root().embedder
        plain = embedder.embed_documents
        in_pool = pool.call

        def call_noting(*args: Any, **kwargs: Any) -> Any:
            inside.pool = True
            try:
                return in_pool(*args, **kwargs)
            finally:
                inside.pool = False

        pool.call = call_noting  # type: ignore[method-assign]

        def held(texts: Any) -> Any:
            if not any(" turn " in t for t in texts):
                return plain(texts)  # the question of a `remember`
            with count:
                running["now"] += 1
                running["most"] = max(running["most"], running["now"])
                running["locked"] += getattr(inside, "pool", False)
            entered.set()
            assert release.wait(30)
            with count:
                running["now"] -= 1
            return plain(texts)

        embedder.embed_documents = held  # type: ignore[method-assign]
        async with (
            Client(server) as other,
            Client(server) as a,
            Client(server) as b,
            Client(server) as c,
        ):
            replies: list[str] = []

            async def ingest(client: Client, name: str, sent: list[dict[str, str]]) -> None:
                error, reply = await call(client, "ingest", conversation=name, turns=sent)
                assert not error, reply
                replies.append(reply)

            async with anyio.create_task_group() as tg:
                tg.start_soon(ingest, a, "old", turns("old", 4))  # 2 stored, 2 new
                assert await anyio.to_thread.run_sync(entered.wait, 30)
                tg.start_soon(ingest, b, "second", turns("second", 3))
                tg.start_soon(ingest, c, "third", turns("third", 3))
                await anyio.sleep(0.5)
                with anyio.fail_after(10):  # three ingests in flight: the pool still answers
                    error, reply = await call(other, "remember", query="old turn 0")
                assert not error, reply
                stored = [m for m in pool.shared_root().recent(50) if m.content.startswith("old")]
                ids = [
                    m.id
                    for m in stored
                    if m.content
                    in ("old turn 0 on the release train", "old turn 1 on the release train")
                ]
                assert len(ids) == 2
                for mid in ids:
                    error, reply = await call(other, "forget", memory_id=mid, confirm=True)
                    assert not error, reply
                release.set()
            assert sorted(r.split(":")[1].split(",")[0] for r in replies) == [
                " 2 turns added",  # the two forgotten meanwhile stay forgotten
                " 3 turns added",
                " 3 turns added",
            ], replies
            assert any("2 forgotten earlier" in r for r in replies), replies
        assert running["most"] == 1 and running["locked"] == 0, running

    try:
        run(body)
    finally:
        release.set()


def test_question_dates_are_read_as_calendar_periods() -> None:
    from octobrain.memory.query import Period, named_periods

    day = Period(2023, 6, 3)
    for text in (
        "What did Maria start, as mentioned on 3 June, 2023?",
        "What happened on June 3rd 2023?",
        "the 3rd of June 2023",
        "any news from 2023-06-03",
    ):
        assert named_periods([text]) == [day], text  # the day only, not also its month
    assert named_periods(["What did Joanna finish in January 2022?"]) == [Period(2022, 1)]
    assert named_periods(["Where did Joanna go in May?"]) == [Period(None, 5)]
    assert named_periods(["What happened during 2021?"]) == [Period(2021)]
    # "may" the verb, a day that no month has and a bare number are not dates
    assert named_periods(["What may Joanna do on June 45 at 2022 o'clock?"]) == []
    assert named_periods(["in May", "between May 1 and May 3 2023"]) == [
        Period(None, 5),
        Period(None, 5, 1),
        Period(2023, 5, 3),
    ]
    moment = datetime(2023, 6, 3, 23, 30, tzinfo=timezone(timedelta(hours=-2)))
    assert Period(2023, 6, 4).holds(moment) and not day.holds(moment)  # compared in UTC


def test_a_question_naming_a_date_prefers_what_was_said_then(tmp_path: Path) -> None:
    records = [
        {
            "speaker": "Ana",
            "text": "We adopted a kitten at the shelter.",
            "time": "2023-06-03T10:00:00Z",
        },
        {
            "speaker": "Ana",
            "text": "We adopted a kitten at the shelter.",
            "time": "2023-09-20T10:00:00Z",
        },
    ]
    b = brain(tmp_path)
    b.ingest(parse_text(json.dumps(records)))
    for question, day in (
        ("What did Ana adopt on 3 June, 2023?", 3),
        ("What did Ana adopt in September 2023?", 20),
    ):
        top, second = b.remember(question, min_relevance=0.0).hits
        assert top.memory.created_at.day == day, question
        assert "from the date the question names" in top.why
        assert "from the date the question names" not in second.why
    hits = b.remember("What did Ana adopt at the shelter?", min_relevance=0.0).hits
    assert all("the date the question names" not in h.why for h in hits)


def test_a_question_naming_a_person_prefers_that_persons_turns(tmp_path: Path) -> None:
    records = [
        {"speaker": "Ana", "text": "I adopted a cat from the shelter last week."},
        {"speaker": "Bo", "text": "I adopted a cat from the shelter last week too!"},
    ]
    b = brain(tmp_path)
    b.ingest(parse_text(json.dumps(records)))
    for name, other in (("Ana", "bo"), ("Bo", "ana")):
        (top, second) = b.remember(f"Which cat did {name} adopt?", min_relevance=0.0).hits
        assert f"speaker:{name.lower()}" in top.memory.tags
        assert "said by the person the question names" in top.why
        assert f"speaker:{other}" in second.memory.tags
        assert "said by someone else than the person the question names" in second.why
        # Still returned, but it answers the question asked about another person at half
        # the relevance its words and meaning matched: the best relevance is the named one's.
        found = re.search(r"relevance (\d\.\d+) matched", second.why)
        assert found is not None, second.why
        matched = float(found[1])
        assert second.relevance == pytest.approx(matched / 2, abs=0.01)
        assert second.relevance < top.relevance / 1.5
    unnamed = b.remember("Who adopted a cat from the shelter?", min_relevance=0.0).hits
    assert all("the person the question names" not in h.why for h in unnamed)
    assert abs(unnamed[0].relevance - unnamed[1].relevance) < 0.2  # the same words, either said


def test_bench_locomo_scores_evidence_turns_and_sessions(tmp_path: Path) -> None:
    from octobrain.bench.locomo import first_sessions, locomo_table, run_locomo, session_recall

    assert session_recall(["D2:1", "D2:2", "D1:3"], ["D1:3", "D3:1"], k=2) == 0.5
    assert first_sessions(["D2:1", "D2:2", "D1:3", "D4:1"], k=2) == {"2", "1"}
    sample = json.loads(json.dumps(LOCOMO))
    sample[0]["qa"] = [
        {"question": "Which class did Caroline join?", "evidence": ["D1:1"], "category": 4},
        {"question": "What did Melanie photograph?", "evidence": ["D2:1; D2:2"], "category": 1},
        {"question": "Which car did Caroline buy?", "evidence": [], "category": 5},
    ]
    (tmp_path / "locomo10.json").write_text(json.dumps(sample))
    report = run_locomo(tmp_path, model="hash:256", cache_dir=tmp_path / "cache").as_dict()
    assert (report["turns"], report["questions"]) == (5, 2)
    assert report["categories"]["single-hop"]["recall_at_5"] == 1.0
    assert report["overall"]["session_recall_at_5"] == 1.0
    assert report["overall"]["session_all_at_5"] == report["overall"]["session_any_at_5"] == 1.0
    adversarial = report["adversarial"]
    assert adversarial["questions"] == 1.0 and adversarial["threshold"] == 0.3
    assert 0.0 <= adversarial["auc"] <= 1.0 and "auc_half_A" in adversarial
    table = locomo_table(report)
    assert "| **all** | 2 |" in table and "Adversarial questions (1):" in table
    assert "at the default threshold (relevance ≥ 0.3)" in table and "AUC" in table
    assert "| session Recall@5 | all@5 | any@5 |" in table
    assert "| 1.000 | 1.000 | 1.000 |" in table.split("| **all** |", 1)[1].splitlines()[0]


def test_auc_is_the_chance_an_answerable_question_outscores_an_adversarial_one() -> None:
    from octobrain.bench.locomo import auc

    assert auc([0.9, 0.8], [0.1, 0.8]) == 0.875  # one tie of four pairs counts half
    assert auc([0.2], [0.5, 0.6]) == 0.0 and auc([], [0.5]) == 0.0


def test_bench_locomo_without_the_data_names_the_option(tmp_path: Path) -> None:
    result = cli("bench", "locomo", "--data", str(tmp_path))
    assert result.exit_code == 2
    assert "--data" in result.output and "locomo-dev.json.gz" in result.output
    assert "Traceback" not in result.output


def test_bench_locomo_reads_a_held_out_file_by_any_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from octobrain.bench.locomo_data import load_locomo

    held_out = tmp_path / "locomo-test"
    held_out.mkdir()
    (held_out / "README.md").write_text("the other half")
    (held_out / "queries.jsonl.gz").write_bytes(b"")  # the BEIR layout beside it is not read
    sample = json.loads(json.dumps(LOCOMO))
    sample[0]["qa"] = [{"question": "Which class?", "evidence": ["D1:1"], "category": 4}]
    with gzip.open(held_out / "locomo-test.json.gz", "wt", encoding="utf-8") as handle:
        handle.write(json.dumps(sample))
    conversations, questions = load_locomo(held_out)
    assert [len(c.turns) for c in conversations] == [5]
    assert [q.text for q in questions] == ["Which class?"]
    assert load_locomo(held_out / "locomo-test.json.gz")[1] == questions  # the file itself

    (held_out / "locomo-extra.json").write_text(json.dumps(LOCOMO))
    monkeypatch.setenv("OCTOBRAIN_LOCOMO", str(held_out))  # as --data
    result = cli("bench", "locomo")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "locomo-extra.json, locomo-test.json.gz" in result.output and "name one" in result.output


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


def test_a_jsonl_file_is_read_a_line_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every line's object was read before the first turn was made: with the list of lines and
    the turns beside them, 200,000 tiny turns took the parse to 225 MB (a 64 MiB file, ten
    times as many). Now an object lives from its line to its turn (20 are read ahead to tell
    the format)."""
    import octobrain.memory.conversation as conversation_module

    alive = {"now": 0, "most": 0}

    class Record(dict):  # type: ignore[type-arg]
        def __del__(self) -> None:
            alive["now"] -= 1

    read_json = conversation_module.read_json

    def counted(text: str | bytes) -> Any:
        value = read_json(text)
        if isinstance(value, dict):
            alive["now"] += 1
            alive["most"] = max(alive["most"], alive["now"])
            return Record(value)
        return value

    monkeypatch.setattr(conversation_module, "read_json", counted)
    lines = [json.dumps({"speaker": "Ann", "text": f"turn {i}"}) for i in range(3000)]
    (conv,) = parse_text("\n".join(lines))
    assert len(conv.turns) == 3000 and conv.turns[-1].text == "turn 2999"
    assert alive["most"] <= 22, alive  # the 20 read ahead, the line being read, the last one


def test_a_json_array_file_is_read_a_record_at_a_time() -> None:
    """A JSON document (a chat export's array, LoCoMo's list of samples) was read whole with
    `json.loads` before its first turn was made: every record's objects beside the turns (a
    64 MiB array is about ten times that as objects). Now each value of the array is read as
    its turns are made, so reading an array peaks no higher than reading the same records as
    JSONL, and the turns are the same."""
    common = """
        import json
        from octobrain.memory.conversation import parse_text

        def work(text):
            return [[t.text for t in c.turns] for c in parse_text(text)]
    """
    records = "[{'speaker': 'Ann', 'text': f'turn {i}'} for i in range(20_000)]"
    as_lines = traced(
        common, f"def prepare():\n    return ['\\n'.join(json.dumps(r) for r in {records})]"
    )
    as_array = traced(common, f"def prepare():\n    return [json.dumps({records})]")
    assert as_array["result"] == as_lines["result"] and len(as_array["result"][0]) == 20_000
    assert as_array["peak"] < 1.15 * as_lines["peak"], (as_array, as_lines)  # whole: 1.6 times
    samples = traced(
        common,
        """
        def prepare():
            session = lambda k: [
                {"speaker": "A", "text": f"turn {k}.{i}", "dia_id": f"D1:{i}"} for i in range(1000)
            ]
            samples = [
                {"sample_id": f"s{k}", "conversation": {"session_1": session(k)}}
                for k in range(20)
            ]
            return [json.dumps(samples)]

        def work(text):  # the turns made are what is held after
            global found
            found = parse_text(text)
            return [len(c.turns) for c in found]
        """,
    )
    assert samples["result"] == [1000] * 20
    assert samples["peak"] < 1.5 * samples["held"], samples  # whole: 1.8 times the turns made


@pytest.mark.parametrize("end", ["\r", "\r\n", "\n"])
def test_a_jsonl_file_with_any_line_end_is_read_and_named_by_line(end: str) -> None:
    # Saved with old Mac line ends (a lone CR), a transcript read as one line: "line 1 is not
    # JSON". U+2028 inside a string stays part of its line.
    said = "first point\u2028second point"
    records = [
        {"type": "user", "uuid": "u1", "message": {"content": said}},
        {"type": "assistant", "uuid": "u2", "message": {"content": "noted"}},
    ]
    text = end + end.join(json.dumps(r, ensure_ascii=False) for r in records) + end
    [conversation] = parse_text(text)
    assert [t.text for t in conversation.turns] == [said, "noted"]
    with pytest.raises(InvalidInput, match=r"^file: line 5 is not JSON"):
        parse_text(text + end + "{oops" + end)


def test_a_jsonl_turn_holding_a_unicode_line_separator_is_read_whole() -> None:
    # JSON.stringify (a Claude Code transcript) and `ensure_ascii=False` leave U+2028, U+2029
    # and U+0085 raw inside a string: the file was cut there, refused as "line 1 is not JSON".
    said = "pasted from a PDF:\u2028first point\u2029second point\x85third"
    records = [
        {"type": "user", "uuid": "u1", "message": {"content": said}},
        {"type": "assistant", "uuid": "u2", "message": {"content": "noted"}},
    ]
    text = "\r\n".join(json.dumps(r, ensure_ascii=False) for r in records)
    [conversation] = parse_text(text, "claude")
    assert [t.text for t in conversation.turns] == [said, "noted"]
    bad = text + '\n{"type": "user", "uuid": "u1", "message": {"content": "other"}}'
    with pytest.raises(InvalidInput, match=r"^line 3\.uuid: duplicate of line 1\.uuid"):
        parse_text(bad, "claude")
