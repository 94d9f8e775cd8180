"""How much one session's notes may hold: each `knowledge store` call is capped (`NOTE_BYTES`),
so without a cap a session could store without bound; `knowledge.max_session_notes` notes and
`knowledge.max_session_note_bytes` bytes of their text together, checked before a note is
embedded. A note past either is refused naming the setting and the way out (delete notes).
All sessions of a project keep at most `knowledge.max_scope_notes` notes together: a client
naming a new session for each batch would otherwise get a fresh allowance each time."""

from __future__ import annotations

from typing import TYPE_CHECKING

from octobrain.errors import InvalidInput, as_json
from octobrain.knowledge.sources import STORED_PREFIX
from octobrain.store.sql import sql_str, visible_scopes

if TYPE_CHECKING:
    from octobrain.config.schema import KnowledgeConfig
    from octobrain.knowledge.store import KnowledgeStore


def check_room(
    kstore: KnowledgeStore, scope: str, session: str, uri: str, size: int, config: KnowledgeConfig
) -> None:
    """`InvalidInput` when `session` already keeps a note `uri` that `scope` sees, or a note
    of `size` bytes would take `session`'s notes past either cap (one light read of its
    source rows: sizes, no texts), or `scope`'s notes of every session past
    `max_scope_notes` (a count). Expired notes are purged before, so they do not count.

    Called before the note is embedded (a refusal costs no embedding) and again under the
    write lock of its commit (`KnowledgeStore.replace_source`), where N stores at once are
    checked one after another: before, each passed the one check, and a cap was passed by
    N-1 notes, a key stored twice (the second replacing the first)."""
    rows = kstore.scan_sources(f"session_id = {sql_str(session)}")
    if any(row["uri"] == uri and row["scope"] in visible_scopes(scope) for row in rows):
        key = uri.removeprefix(STORED_PREFIX)
        raise InvalidInput("key", f"{as_json(key)} already exists in this session; delete it first")
    held = sum(int(row["size_bytes"]) for row in rows)
    delete = (
        "delete notes this session no longer needs (the knowledge command `delete` with their "
        "key), or raise the setting"
    )
    if len(rows) >= config.max_session_notes:
        raise InvalidInput(
            "key",
            f"this session already keeps {len(rows):,} note{'s' * (len(rows) != 1)}, the most "
            f"knowledge.max_session_notes ({config.max_session_notes:,}) allows; {delete}",
        )
    if held + size > config.max_session_note_bytes:
        raise InvalidInput(
            "content",
            f"this session's notes hold {held:,} bytes; with these {size:,} they would pass "
            f"knowledge.max_session_note_bytes ({config.max_session_note_bytes:,}); {delete}",
        )
    kept = int(kstore.sources.count_rows(f"scope = {sql_str(scope)} AND session_id != ''"))
    if kept >= config.max_scope_notes:
        raise InvalidInput(
            "key",
            f"this project's sessions already keep {kept:,} note{'s' * (kept != 1)} together, "
            f"the most knowledge.max_scope_notes ({config.max_scope_notes:,}) allows; notes "
            f"expire after knowledge.session_ttl_hours ({config.session_ttl_hours:g}), a "
            "session deletes its own with the knowledge command `delete`, or raise the setting",
        )
