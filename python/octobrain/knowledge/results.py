"""Typed results of the knowledge commands (rendered by `knowledge.render`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from octobrain.store.schema import DAMAGED_TITLE, first_damaged

IndexStatus = Literal["indexed", "reindexed", "repaired", "unchanged", "fresh"]


@dataclass(frozen=True)
class SourceInfo:
    """One indexed source as the listing shows it."""

    id: str
    uri: str
    title: str
    doc_type: str
    scope: str
    session_id: str
    content_hash: str
    chunk_count: int
    size_bytes: int
    indexed_at: datetime
    last_checked: datetime
    # Read or cut otherwise than this octobrain would (an older extractor of its format, other
    # chunk settings): `knowledge index` reads it again. Set by the listing only.
    outdated: bool = False

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> SourceInfo:
        """From a `knowledge_sources` row."""
        return cls(
            row["id"],
            row["uri"],
            row["title"],
            row["doc_type"],
            row["scope"],
            row["session_id"],
            row["content_hash"],
            int(row["chunk_count"]),
            int(row["size_bytes"]),
            row["indexed_at"],
            row["last_checked"],
        )


@dataclass(frozen=True)
class IndexReport:
    """What indexing a source did.

    `indexed`: new; `reindexed`: the content hash changed; `unchanged`: fetched and compared,
    same hash, nothing re-embedded; `repaired`: the same hash, but a stored row of it no longer
    matched its checksum, so it was indexed again; `fresh`: not even fetched (unchanged mtime,
    young URL).
    """

    source: SourceInfo
    status: IndexStatus
    embedded: int  # chunks embedded by this call


@dataclass(frozen=True)
class KnowledgeHit:
    """One search result: a section (parent) or a chunk of one source."""

    uri: str
    title: str
    section_path: tuple[str, ...]
    text: str  # the parent section when it is short enough to show, else the chunk
    relevance: float
    score: float
    session: bool
    scope: str
    why: str
    # A local file's hit whose file changed ("changed") or is gone ("gone") since it was
    # indexed: its text is the indexed one (`stale.mark_stale`).
    stale: str = ""


@dataclass(frozen=True)
class SearchResult:
    """Hits best first, and what auto-indexing the named source did (if one was named)."""

    query: str
    hits: list[KnowledgeHit]
    scope: str
    indexed: IndexReport | None = None
    # Why there are no hits: "nothing_indexed" (nothing this scope and session can search),
    # "min_relevance" (chunks were ranked, none passed it), None when there are hits.
    empty: str | None = None


@dataclass(frozen=True)
class LineHit:
    """One matching line of one source; `line_number` counts from 1 in the extracted text."""

    uri: str
    title: str
    line_number: int
    line: str
    start: int
    end: int
    before: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)
    stale: str = ""  # from the index: "changed" or "gone" since the file was indexed


@dataclass(frozen=True)
class MatchReport:
    """Matching lines in source order; `truncated` when the cap cut the list short."""

    pattern: str
    hits: list[LineHit]
    truncated: bool
    max_matches: int
    sources_searched: int


@dataclass(frozen=True)
class StoredNote:
    """A session note written by `store`."""

    key: str
    uri: str
    chunks: int
    session_id: str


@dataclass(frozen=True)
class KnowledgeStats:
    """Counts over the sources visible from a scope."""

    sources: int
    chunks: int
    notes: int
    size_bytes: int
    by_type: dict[str, int]
    oldest: datetime | None
    newest: datetime | None
    scope: str
    damaged: int = 0  # sources that no longer match their checksum (counted under DAMAGED_TITLE)
    damaged_ids: list[str] = field(default_factory=list)  # the first of them (`first_damaged`)

    @classmethod
    def from_rows(cls, rows: list[dict[str, Any]], damaged: set[str], scope: str) -> KnowledgeStats:
        """Over the `knowledge_sources` rows `rows` (without their texts), those whose ids are
        in `damaged` no longer matching their checksum: counted, their type as
        `DAMAGED_TITLE` and their index times left out, never what they read as."""
        by_type: dict[str, int] = {}
        for r in rows:
            kind = DAMAGED_TITLE if r["id"] in damaged else str(r["doc_type"])
            by_type[kind] = by_type.get(kind, 0) + 1
        stamps = [r["indexed_at"] for r in rows if r["id"] not in damaged]
        return cls(
            sources=sum(1 for r in rows if not r["session_id"]),
            chunks=sum(int(r["chunk_count"]) for r in rows),
            notes=sum(1 for r in rows if r["session_id"]),
            size_bytes=sum(int(r["size_bytes"]) for r in rows),
            by_type=by_type,
            oldest=min(stamps) if stamps else None,
            newest=max(stamps) if stamps else None,
            scope=scope,
            damaged=sum(1 for r in rows if r["id"] in damaged),
            damaged_ids=first_damaged(str(r["id"]) for r in rows if r["id"] in damaged),
        )
