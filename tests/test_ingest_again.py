"""`memory ingest` into a store that already holds the conversation: two at once, after a kill,
after a forget, a store made before the context column."""

from __future__ import annotations

import json
from datetime import UTC
from pathlib import Path
from typing import Any

import lancedb
import pyarrow as pa
import pytest
from click.testing import CliRunner
from mcp import Client

from octobrain.config import Config, EmbeddingConfig
from octobrain.errors import StorageError
from octobrain.memory.brain import Brain
from octobrain.memory.conversation import parse_text
from octobrain.memory.transfer import reembed
from octobrain.store.doctor import diagnose
from octobrain.store.location import StoreLocation
from octobrain.store.schema import memories_schema
from tests.ingest_support import LOCOMO, SCOPE, brain, stored
from tests.server_support import PROJECT_A, call, hash_pool, run, server_for


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


def test_two_ingests_at_once_link_no_turn_to_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: a session's first turn was linked to the turn said before it by an earlier call,
    # looked for after the stored turns were read. Another ingest of the same export storing
    # the conversation between the two made the turn its own previous turn: a link from each
    # session's first turn to itself (60 of 11,460 links, two ingests of a 20-channel Slack
    # export at once).
    from octobrain.memory.earlier_turns import Settler

    records = [
        {"speaker": "Ann", "text": f"day {d} turn {i}", "time": f"2024-03-0{d}T10:0{i}:00Z"}
        for d in (1, 2)
        for i in range(3)
    ]
    first, other = brain(tmp_path), brain(tmp_path)
    held = Settler._conversation_held
    raced: list[int] = []

    def held_once_the_other_stored_it(self: Settler) -> bool:
        if not raced:  # (the other's own look goes through)
            raced.append(-1)
            raced[0] = other.ingest(parse_text(json.dumps(records))).added
        return held(self)

    monkeypatch.setattr(Settler, "_conversation_held", held_once_the_other_stored_it)
    report = first.ingest(parse_text(json.dumps(records)))
    assert raced == [6] and (report.added, report.skipped_existing) == (0, 6)
    links = first.store.all_relationships()
    assert [r for r in links if r.source_id == r.target_id] == []
    assert len(links) == 4  # (two sessions of three turns: a day's silence between them)
