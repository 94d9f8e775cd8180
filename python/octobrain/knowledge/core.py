"""What every part of `Knowledge` stands on: its scope, session, config, embedder and store
(opened on first use), the rows this scope and session see, where local files may be read from,
and how a document's rows are made and written (its extractor's version and the chunk
settings)."""

from __future__ import annotations

import shlex
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from octobrain.config import Config
from octobrain.embed.base import Embedder
from octobrain.embed.factory import facade_parts
from octobrain.embed.tokens import TokenCounter, input_window
from octobrain.files import check_path
from octobrain.knowledge.extract import Document, extracted_by
from octobrain.knowledge.generation import ChunkCap, Progress, embed_rows, new_rows
from octobrain.knowledge.index import ChunkIndex
from octobrain.knowledge.sources import (
    STORED_PREFIX,
    Fetched,
    SourceRef,
    confine,
    parse_source,
)
from octobrain.knowledge.store import KnowledgeStore
from octobrain.safe_text import check_label
from octobrain.scope import validate_scope
from octobrain.store.closing import Closable
from octobrain.store.location import StoreLocation, local_path
from octobrain.store.sql import sql_str, visible_scopes
from octobrain.times import utcnow


class KnowledgeBase(Closable):
    """External documents and session notes of one scope (and one session): state and the
    steps every part shares."""

    def __init__(
        self,
        scope: str,
        *,
        config: Config | None = None,
        embedder: Embedder | None = None,
        uri: str | Path | None = None,
        session_id: str = "",
        cwd: Path | None = None,
        local_roots: tuple[Path, ...] | None = None,
        tables: tuple[KnowledgeStore, ChunkIndex] | None = None,
    ) -> None:
        """`tables`: the store's knowledge tables and their mirror, open already and shared
        with other facades of the same store and model (a server's sessions)."""
        self.scope = validate_scope(scope)
        self.config, self.embedder, self.uri = facade_parts(config, embedder, uri)
        self.session_id = check_label("session_id", session_id)
        self.cwd = None if cwd is None else check_path("cwd", cwd)
        # Where local files may be read from (None: anywhere, as for the person at the CLI).
        self.local_roots = local_roots
        self._store: KnowledgeStore | None = None if tables is None else tables[0]
        self._index: ChunkIndex | None = None if tables is None else tables[1]
        # URLs fetched before the call (the MCP server's; None: fetch inline): see prefetch.py.
        self.prefetched: dict[str, Fetched] | None = None
        self.stop: threading.Event | None = None  # set: embedding stops (`generation.Stopped`)
        self.progress: Progress | None = None  # told the chunks embedded, when none is given
        # The generation of each source (by uri) whose write began last: `switched` tells,
        # after an interruption, whether it stands.
        self._begun: dict[str, str] = {}

    @property
    def kstore(self) -> KnowledgeStore:
        self._check_open()
        if self._store is None:
            location = StoreLocation.from_config(self.config, self.uri)
            self._store = KnowledgeStore(location, self.embedder.model_id, self.embedder.dim)
        return self._store

    @property
    def index_mirror(self) -> ChunkIndex:
        self._check_open()
        if self._index is None:
            self._index = ChunkIndex(self.kstore)
        return self._index

    def _chunker(self, doc_type: str) -> str:
        """How a source of `doc_type` is read and cut: its extractor's version and the chunk
        settings (a source indexed otherwise is indexed again, its bytes unchanged)."""
        k = self.config.knowledge
        window = self._window
        fit = f"/fit{window[0]}" if window is not None else ""
        cut = f"v2:{k.chunk_size}/{k.chunk_overlap}/{k.parent_size}{fit}"
        return cut + extracted_by(doc_type)

    @property
    def _window(self) -> tuple[int, TokenCounter] | None:
        """The embedder's input window, when chunks are cut to fit it (`chunk_fit_model`)."""
        if not self.config.knowledge.chunk_fit_model:
            return None
        return input_window(self.embedder.model_id)

    def _new_rows(
        self, document: Document, scope: str, session_id: str, digest: str, mtime: float, size: int
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The rows of a new generation of `document` under this instance's settings."""
        k, window, chunker = self.config.knowledge, self._window, self._chunker(document.doc_type)
        cap = self._chunk_cap(document.uri)
        return new_rows(document, k, window, cap, chunker, scope, session_id, digest, mtime, size)

    def _chunk_cap(self, uri: str) -> ChunkCap:
        """The most chunks one call may make of the source `uri`. A session confined to local
        roots is an MCP client's: its call embeds holding the server's knowledge lock (about
        50 ms of CPU a chunk with the bundled model, every other client's knowledge call
        waiting), so at most `mcp_max_source_chunks`, and a longer source is indexed at the
        command line instead, where the person waits for their own, up to `max_source_chunks`."""
        k = self.config.knowledge
        cli = ChunkCap(k.max_source_chunks, "knowledge.max_source_chunks")
        if self.local_roots is None or k.max_source_chunks <= k.mcp_max_source_chunks:
            return cli
        setting = "most one MCP call embeds (knowledge.mcp_max_source_chunks)"
        if uri.startswith(STORED_PREFIX):
            instead = "nothing was stored (keep it as shorter notes, or raise the setting)"
            return ChunkCap(k.mcp_max_source_chunks, setting, "content", instead)
        where = "--global" if self.scope == "" else f"--scope {shlex.quote(self.scope)}"
        instead = (
            "nothing was indexed. Index it at the command line (up to "
            f"{cli.limit:,} chunks, knowledge.max_source_chunks): `octobrain knowledge {where} "
            f"index {shlex.quote(uri)}`; a search naming it then embeds nothing while it is "
            "unchanged"
        )
        return ChunkCap(k.mcp_max_source_chunks, setting, "source", instead)

    def _session_cutoff(self, now: datetime) -> datetime:
        return now - timedelta(hours=self.config.knowledge.session_ttl_hours)

    def _visible_where(self, now: datetime) -> str:
        scopes = ", ".join(sql_str(s) for s in visible_scopes(self.scope))
        where = f"scope IN ({scopes}) AND (session_id = ''"
        if self.session_id:
            cutoff = self._session_cutoff(now).isoformat()
            where += (
                f" OR (session_id = {sql_str(self.session_id)}"
                f" AND indexed_at >= timestamp {sql_str(cutoff)})"
            )
        return where + ")"

    def _visible_rows(
        self, uri: str | None = None, *, with_text: bool = False
    ) -> list[dict[str, Any]]:
        where = self._visible_where(utcnow())
        if uri is not None:
            where += f" AND uri = {sql_str(uri)}"
        rows = self.kstore.scan_sources(where, with_text=with_text)
        # Own scope before global, then session rows before persistent ones.
        rows.sort(key=lambda r: (r["scope"] != self.scope, r["session_id"] == "", r["uri"]))
        return rows

    def _let_go(self) -> None:  # (LanceDB's handles go with them, unless a server shares them)
        self._store = self._index = None

    def _ref(self, source: str) -> SourceRef:
        self._check_open()
        return self._confined(parse_source(source, cwd=self.cwd))

    def _confined(self, ref: SourceRef) -> SourceRef:
        """`ref` if this session may read it (`confine`): inside its roots, and none of
        octobrain's own files, this store's among them."""
        return confine(ref, self.local_roots, local_path(self.uri))

    def _write(
        self,
        document: Document,
        scope: str,
        session_id: str,
        digest: str,
        mtime: float,
        size: int,
        progress: Progress | None,
        check: Callable[[], None] | None = None,
    ) -> tuple[dict[str, Any], int]:
        source_row, chunk_rows = self._new_rows(document, scope, session_id, digest, mtime, size)
        embed_rows(self.embedder, chunk_rows, progress or self.progress, self.stop)
        self._begun[source_row["uri"]] = source_row["generation"]
        self.kstore.replace_source(source_row, chunk_rows, check)
        return source_row, len(chunk_rows)

    def switched(self, source: str) -> bool:
        """Whether the last write this instance began of `source` switched it to its new
        chunks: an index interrupted after that commit (cleaning up, reporting) stands."""
        uri = self._ref(source).uri
        generation = self._begun.get(uri)
        return generation is not None and any(
            row["generation"] == generation for row in self._visible_rows(uri)
        )
