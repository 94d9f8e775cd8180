"""A session's `knowledge store` notes are capped in number and in bytes together
(`knowledge.max_session_notes`, `knowledge.max_session_note_bytes`), and a project's notes of
every session in number (`knowledge.max_scope_notes`): past any a note is refused naming the
setting and the way out, and deleting notes makes room again."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from octobrain.config import KnowledgeConfig
from octobrain.errors import InvalidInput
from octobrain.knowledge import Knowledge, run_command

from .conftest import SCOPE, CountingEmbedder, MakeKnowledge, config


def _store(k: Knowledge, key: str, content: str) -> str:
    """The MCP `knowledge` tool's `store` command."""
    return run_command(k, {"command": "store", "key": key, "content": content})


def test_a_session_keeps_at_most_max_session_notes(make_knowledge: MakeKnowledge) -> None:
    mine = make_knowledge(max_session_notes=3)
    other = make_knowledge(session_id="s2", max_session_notes=3)
    for i in range(3):
        _store(mine, f"n{i}", f"Note {i} about the release train.")
    with pytest.raises(InvalidInput) as refused:
        _store(mine, "n3", "One note too many.")
    message = str(refused.value)
    assert message.startswith("key: this session already keeps 3 notes"), message
    assert "knowledge.max_session_notes (3)" in message and "delete" in message, message
    assert mine.kstore.count_chunks("session_id = 's1'") == 3  # nothing embedded or written
    _store(other, "n0", "Another session has room of its own.")
    run_command(mine, {"command": "delete", "key": "n0"})
    assert _store(mine, "n3", "Room again after a delete.").startswith("Stored 'n3'")


def test_a_session_s_notes_hold_at_most_max_session_note_bytes(
    make_knowledge: MakeKnowledge,
) -> None:
    mine = make_knowledge(max_session_note_bytes=100)
    _store(mine, "a", "x" * 60)
    with pytest.raises(InvalidInput) as refused:
        _store(mine, "b", "y" * 41)
    message = str(refused.value)
    assert message.startswith("content: this session's notes hold 60 bytes; with these 41"), message
    assert "knowledge.max_session_note_bytes (100)" in message, message
    assert _store(mine, "b", "y" * 40).startswith("Stored 'b'")  # 100 exactly is within it


def test_a_project_s_sessions_keep_at_most_max_scope_notes_together(
    make_knowledge: MakeKnowledge,
) -> None:
    # Before: the caps were a session's alone, so a client naming a new session for each
    # batch of notes got a fresh allowance each time, and the project's notes had no bound.
    sessions = [make_knowledge(session_id=f"batch{i}", max_scope_notes=4) for i in range(3)]
    for i in range(4):
        _store(sessions[i % 2], f"n{i}", f"Note {i} about the release train.")
    with pytest.raises(InvalidInput) as refused:
        _store(sessions[2], "n4", "A new session, no new room.")
    message = str(refused.value)
    assert message.startswith("key: this project's sessions already keep 4 notes together, "), (
        message
    )
    assert "knowledge.max_scope_notes (4)" in message, message
    assert "knowledge.session_ttl_hours (120)" in message and "`delete`" in message, message
    assert sessions[2].kstore.count_chunks("session_id = 'batch2'") == 0  # nothing written
    elsewhere = make_knowledge(
        scope="github.com/acme/other", session_id="batch2", max_scope_notes=4
    )
    assert _store(elsewhere, "n0", "Another project has room of its own.").startswith("Stored")
    run_command(sessions[0], {"command": "delete", "key": "n0"})
    assert _store(sessions[2], "n4", "Room again after a delete.").startswith("Stored 'n4'")


def test_the_caps_default_to_a_thousand_notes_and_32_mib() -> None:
    k = KnowledgeConfig()
    assert (k.max_session_notes, k.max_session_note_bytes) == (1_000, 32 * 1024 * 1024)
    assert k.max_scope_notes == 10_000


class _MeetingEmbedder(CountingEmbedder):
    """Embeds only when `parties` calls embed at once: each store has passed the check made
    before embedding when any of them commits (as stores from several agents' processes at
    once do while a slow model embeds)."""

    def __init__(self, parties: int) -> None:
        super().__init__()
        self.meeting = threading.Barrier(parties, timeout=60)

    def embed_documents(self, texts: Sequence[str]) -> Any:
        self.meeting.wait()
        return super().embed_documents(texts)


def _at_once(stores: list[Callable[[], object]]) -> tuple[int, list[str]]:
    """Run `stores` in threads of their own at once: (how many stored, the refusals)."""
    done: list[object] = []
    refused: list[str] = []

    def run(store: Callable[[], object]) -> None:
        try:
            done.append(store())
        except InvalidInput as exc:
            refused.append(str(exc))

    threads = [threading.Thread(target=run, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return len(done), refused


@pytest.mark.parametrize(
    ("cap", "sessions", "key", "rule"),
    [
        ({"max_session_notes": 2}, ["s1"] * 4, "n{i}", "knowledge.max_session_notes (2)"),
        ({"max_session_note_bytes": 110}, ["s1"] * 4, "n{i}", "max_session_note_bytes (110)"),
        ({"max_scope_notes": 2}, ["a", "b", "c", "d"], "n{i}", "knowledge.max_scope_notes (2)"),
        ({}, ["s1"] * 4, "plan", '"plan" already exists in this session'),
    ],
)
def test_notes_stored_at_once_keep_within_the_caps(
    tmp_path: Path, cap: dict[str, int], sessions: list[str], key: str, rule: str
) -> None:
    # The caps (and the key already used) were checked before embedding, outside the write
    # lock: four stores at once each passed, and a cap of 2 notes kept 4 (a key: the last
    # of four stores kept, the others replaced without a word).
    embedder = _MeetingEmbedder(len(sessions))
    facades = [
        Knowledge(
            SCOPE,
            config=config(**cap),
            embedder=embedder,  # type: ignore[arg-type]
            uri=tmp_path / "db",
            session_id=session,
        )
        for session in sessions
    ]
    stores = [
        partial(k.store, key.format(i=i), f"Note {i}: rotate the staging keys. " + "x" * 20)
        for i, k in enumerate(facades)
    ]
    kept, refused = _at_once(stores)
    fits = 1 if key == "plan" else 2
    assert (kept, len(refused)) == (fits, len(sessions) - fits), refused
    assert all(rule in message for message in refused), refused
    notes = facades[0].kstore.scan_sources("session_id != ''")
    assert len(notes) == fits
    assert facades[0].kstore.count_chunks() == fits  # nothing of a refused note written
