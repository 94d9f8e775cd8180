"""A session's `knowledge store` notes are capped in number and in bytes together
(`knowledge.max_session_notes`, `knowledge.max_session_note_bytes`), and a project's notes of
every session in number (`knowledge.max_scope_notes`): past any a note is refused naming the
setting and the way out, and deleting notes makes room again."""

from __future__ import annotations

import pytest

from octobrain.config import KnowledgeConfig
from octobrain.errors import InvalidInput
from octobrain.knowledge import Knowledge, run_command

from .conftest import MakeKnowledge


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
