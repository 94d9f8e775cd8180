"""`Knowledge`'s housekeeping: session notes kept and deleted under a key, and the indexed
sources deleted, listed and counted."""

from __future__ import annotations

import dataclasses
from functools import partial

from octobrain.errors import InvalidInput, as_json
from octobrain.field_checks import check_limit
from octobrain.knowledge.core import KnowledgeBase
from octobrain.knowledge.extract import document_from_text
from octobrain.knowledge.generation import content_hash
from octobrain.knowledge.note_room import check_room
from octobrain.knowledge.reopen import reopening
from octobrain.knowledge.results import KnowledgeStats, SourceInfo, StoredNote
from octobrain.knowledge.sources import check_key
from octobrain.models import NOTE_BYTES
from octobrain.safe_text import is_unicode
from octobrain.secrets import screen
from octobrain.times import utcnow


class Housekeeping(KnowledgeBase):
    """Session notes, and the sources this scope sees: deleted, listed and counted."""

    # ---- session notes --------------------------------------------------------------------

    def _require_session(self) -> str:
        if not self.session_id:
            raise InvalidInput(
                "session_id",
                "session notes need a session, and this client has none (an HTTP client "
                "outside an MCP session): name one in experimental.session.session_id",
            )
        return self.session_id

    @reopening
    def store(self, key: str, content: str) -> StoredNote:
        """Keep `content` as `stored://<key>`, visible to this session only, until deleted or
        `session_ttl_hours` pass. A key already used in this session must be deleted first."""
        session = self._require_session()
        key = check_key(key)
        if not isinstance(content, str) or not content.replace("\x00", "").strip():
            raise InvalidInput("content", "must not be empty")  # (NULs are dropped from notes)
        if not is_unicode(content):
            raise InvalidInput("content", "must be valid Unicode (lone surrogates are not allowed)")
        size = len(content.encode())
        if size > NOTE_BYTES:
            raise InvalidInput(
                "content",
                f"must be at most {NOTE_BYTES} bytes of UTF-8, got {size}; a longer text is a "
                "document: save it to a file and index that",
            )
        # A note is read back into later calls like a memory: the same secrets policy.
        content = screen("content", content, self.config.memory.secrets)
        self.kstore.purge_sessions(self._session_cutoff(utcnow()))
        uri, size = f"stored://{key}", len(content.encode())
        room = partial(
            check_room, self.kstore, self.scope, session, uri, size, self.config.knowledge
        )
        room()  # before embedding, and again under the lock of the commit (`replace_source`)
        document = document_from_text(uri, content)
        digest = content_hash(document.text)
        _, chunks = self._write(document, self.scope, session, digest, 0.0, size, None, room)
        return StoredNote(key, uri, chunks, session)

    @reopening
    def delete(self, key: str) -> str:
        """Delete this session's note `key`; returns its uri. A missing key is an error."""
        session = self._require_session()
        uri = f"stored://{check_key(key)}"
        ids = [r["id"] for r in self._visible_rows(uri) if r["session_id"] == session]
        if not ids or not self.kstore.delete_sources(ids):
            raise InvalidInput("key", f"no stored note {as_json(key)} in this session")
        return uri

    # ---- housekeeping ---------------------------------------------------------------------

    @reopening
    def delete_source(self, source: str) -> SourceInfo:
        """Remove an indexed source (the one this scope sees: its own before global)."""
        ref = self._ref(source)
        rows = [r for r in self._visible_rows(ref.uri) if r["session_id"] == ""]
        if not rows or not self.kstore.delete_sources([rows[0]["id"]]):
            raise InvalidInput("source", f"{ref.uri} is not indexed in this scope")
        return SourceInfo.from_row(rows[0])

    @reopening
    def list_sources(self, limit: int = 20) -> list[SourceInfo]:
        """Visible sources, most recently checked first (`RowDamaged` when one of them no
        longer matches its checksum: never a changed title listed)."""
        limit = check_limit(limit, maximum=100_000)
        rows = sorted(self._visible_rows(), key=lambda r: r["last_checked"], reverse=True)
        self.kstore.check_sources([r["id"] for r in rows[:limit]])
        return [
            dataclasses.replace(
                SourceInfo.from_row(r),
                outdated=not r["session_id"] and r["chunker"] != self._chunker(r["doc_type"]),
            )
            for r in rows[:limit]
        ]

    @reopening
    def stats(self) -> KnowledgeStats:
        """Counts over the visible sources (one that no longer matches its checksum counted
        as damaged, not by what it reads as)."""
        rows = self._visible_rows()
        damaged = self.kstore.damaged_sources(self._visible_where(utcnow()))
        return KnowledgeStats.from_rows(rows, damaged, self.scope)
