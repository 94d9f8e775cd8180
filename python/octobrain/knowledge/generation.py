"""A source's new generation: its source row and its chunk rows, cut from the extracted text
and embedded, ready for `KnowledgeStore.replace_source` or `add_sources`."""

from __future__ import annotations

import hashlib
import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from octobrain.config import KnowledgeConfig
from octobrain.embed.base import Embedder, in_batches
from octobrain.embed.tokens import TokenCounter
from octobrain.errors import InvalidInput, Stopped
from octobrain.knowledge.chunk import TooManyChunks, chunk_text
from octobrain.knowledge.extract import DocType, Document
from octobrain.knowledge.store import source_id
from octobrain.times import utcnow

log = logging.getLogger(__name__)
Progress = Callable[[int, int], None]


class ChunkCapExceeded(InvalidInput):
    """A document that makes more chunks than its `ChunkCap` (nothing indexed)."""


@dataclass(frozen=True)
class ChunkCap:
    """The most chunks one call may make of a source (each is embedded in the call), the
    setting that says so, and what a refusal names: its field and what to do instead."""

    limit: int
    setting: str
    field: str = "source"
    instead: str = "nothing was indexed (index a part of it, or raise the setting)"


def cut_settings(k: KnowledgeConfig, cap: ChunkCap) -> tuple[Any, ...]:
    """The settings that decide how a document is cut into chunks, and the cap on their
    number (and so a refusal for it)."""
    return (k.chunk_size, k.chunk_overlap, k.parent_size, cap)


def content_hash(text: str) -> str:
    """SHA-256 of the extracted text: what decides whether a source changed."""
    return hashlib.sha256(text.encode()).hexdigest()


def embed_rows(
    embedder: Embedder,
    chunk_rows: list[dict[str, Any]],
    progress: Progress | None,
    stop: threading.Event | None = None,
) -> None:
    """Set the `embedding` of each of `chunk_rows` (`in_batches`), reporting the
    chunks done to `progress`; `Stopped` before the next batch once `stop` is set (the rows
    are not written until every one is embedded, so nothing of them is)."""
    texts = [r["content"] for r in chunk_rows]
    if texts:
        log.info("embedding %d chunks (the first of %s)", len(texts), chunk_rows[0]["uri"])
    try:
        for start, part in in_batches(embedder, texts, "chunks", stop):
            for row, vec in zip(chunk_rows[start : start + len(part)], part, strict=True):
                row["embedding"] = vec
            if progress is not None:
                progress(start + len(part), len(texts))
    except Stopped as stopped:
        log.info("embedding of %s %s", chunk_rows[0]["uri"], stopped)
        raise


def new_rows(
    document: Document,
    k: KnowledgeConfig,
    window: tuple[int, TokenCounter] | None,
    cap: ChunkCap,
    chunker: str,
    scope: str,
    session_id: str,
    digest: str,
    mtime: float,
    size: int,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The source row and its chunk rows (without embeddings) for a new generation of
    `document`, cut by the `k` settings (to fit `window`, when given) and named `chunker`;
    `ChunkCapExceeded` past `cap`, before any is embedded."""
    try:  # bounds one call's work: the cutting stops at the cap, the embedding never starts
        chunks = chunk_text(
            document.text,
            document.title,
            chunk_size=k.chunk_size,
            overlap=k.chunk_overlap,
            parent_size=k.parent_size,
            max_tokens=window[0] if window is not None else 0,
            count_tokens=window[1] if window is not None else None,
            max_chunks=cap.limit,
            setext=document.doc_type is DocType.MARKDOWN,
        )
    except TooManyChunks as exc:
        raise ChunkCapExceeded(
            cap.field,
            f"{document.uri} makes more than {exc.limit:,} chunks, the {cap.setting}; "
            + cap.instead,
        ) from None
    now = utcnow()
    sid = source_id(document.uri, scope, session_id)
    generation = uuid.uuid4().hex
    source_row = {
        "id": sid,
        "uri": document.uri,
        "scope": scope,
        "session_id": session_id,
        "title": document.title,
        "doc_type": document.doc_type.value,
        "content_hash": digest,
        "chunker": chunker,
        "text": document.text,
        "generation": generation,
        "chunk_count": len(chunks),
        "size_bytes": size,
        "mtime": float(mtime),
        "indexed_at": now,
        "last_checked": now,
    }
    chunk_rows = [
        {
            "id": uuid.uuid4().hex,
            "source_id": sid,
            "generation": generation,
            "uri": document.uri,
            "scope": scope,
            "session_id": session_id,
            "title": document.title,
            "chunk_index": c.index,
            "section_path": list(c.section_path),
            "content": c.content,
            "parent_content": c.parent,
            "byte_start": c.start,
            "byte_end": c.end,
            "indexed_at": now,
        }
        for c in chunks
    ]
    return source_row, chunk_rows
