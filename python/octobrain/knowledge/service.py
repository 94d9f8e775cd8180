"""`Knowledge`: the facade the CLI, the MCP server and tests use for external documents.

Bound to a scope (reads see that scope plus global) and optionally to a session (whose notes
only it sees). Validates input (errors name the field and the rule), fetches, extracts, chunks,
embeds, and keeps the index cache: a source is re-fetched when its file's mtime or size
changed, its URL is older than `outdating_days`, or it was read or cut otherwise than now (its
format's `extractor_versions.EXTRACTOR_VERSIONS`, the chunk settings), and re-embedded only when
its content hash or that reading changed.

One class in three files: reading, indexing, search and match here, session notes and
housekeeping (`knowledge.housekeeping`), over the shared state of `knowledge.core`.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from octobrain.errors import InvalidInput, as_json
from octobrain.field_checks import check_limit
from octobrain.knowledge.by_file import ByFile
from octobrain.knowledge.by_url import ByUrl
from octobrain.knowledge.extract import DocType, Document, document_from_text, extract, normalise
from octobrain.knowledge.fetch import fetch_url
from octobrain.knowledge.generation import (
    ChunkCapExceeded,
    Progress,
    content_hash,
    cut_settings,
    embed_rows,
)
from octobrain.knowledge.grep import MAX_CONTEXT, MAX_MATCH_CAP, match_sources
from octobrain.knowledge.housekeeping import Housekeeping
from octobrain.knowledge.prefetch import FetchFirst
from octobrain.knowledge.reopen import reopening
from octobrain.knowledge.results import (
    IndexReport,
    IndexStatus,
    MatchReport,
    SearchResult,
    SourceInfo,
)
from octobrain.knowledge.search import search_chunks
from octobrain.knowledge.source_room import check_source_room
from octobrain.knowledge.sources import (
    Fetched,
    SourceKind,
    SourceRef,
    file_version,
    indexed_version,
    read_file,
    refuse_own,
)
from octobrain.knowledge.stale import mark_stale, mark_stale_lines
from octobrain.models import QUERY_BYTES
from octobrain.safe_text import check_text
from octobrain.secrets import find_secrets
from octobrain.store.failures import failures_named
from octobrain.store.schema import SOURCES, check_knowledge
from octobrain.store.sql import visible_scopes
from octobrain.times import utcnow

# Local files refused for their chunk count: naming one again, unchanged, is refused after a
# `stat` instead of reading, extracting and cutting it again (a 45 MB file of one line: 1.35 s
# of CPU every call).
_REFUSED: ByFile[str] = ByFile(kept=256, budget=1 << 20)
# The text extracted from local files: `knowledge read` pages through a long one a call a page
# (each page re-extracted the whole file: 0.55-0.95 s of CPU a page at 45 MB). Counted in the
# bytes the text takes, not its characters: one character past U+FFFF makes Python hold every
# character of the text in 4 bytes.
_EXTRACTED: ByFile[Document] = ByFile(kept=8, budget=64 << 20)
# And from URLs, for 5 minutes after the fetch: paging through a URL fetched it again a page.
_FETCHED: ByUrl[Document] = ByUrl(kept=8, budget=32 << 20, seconds=300)


@failures_named
class Knowledge(Housekeeping):
    """External documents and session notes, seen from one scope (and one session). The store
    opens on first use; `close()` (or the end of a `with Knowledge(...) as knowledge:` block)
    lets go of it, and later calls are refused (`InvalidInput`: is closed)."""

    # ---- fetching -------------------------------------------------------------------------

    def _fetch(self, ref: SourceRef) -> Fetched:
        k = self.config.knowledge
        if ref.kind is SourceKind.URL:
            fetch = partial(
                fetch_url,
                ref,
                max_bytes=k.max_source_bytes,
                timeout=k.fetch_timeout_secs,
                max_redirects=k.max_redirects,
                allow_private=k.allow_private_hosts,
            )
            if self.prefetched is None:
                return fetch()
            if ref.uri not in self.prefetched:
                raise FetchFirst(ref, fetch)
            return self.prefetched[ref.uri]
        fetched = read_file(ref, k.max_source_bytes)
        if self.local_roots is not None:
            refuse_own(fetched)
        return fetched

    @reopening
    def read(self, source: str) -> Document:
        """The full extracted text of one source, without indexing it."""
        ref = self._ref(source)
        if ref.kind is SourceKind.STORED:
            rows = self._visible_rows(ref.uri, with_text=True)
            if not rows:
                raise InvalidInput("source", f"no stored note {as_json(ref.key)} in this session")
            check_knowledge(rows[0], SOURCES)  # never a changed text shown as the note's
            return document_from_text(ref.uri, rows[0]["text"])
        k = self.config.knowledge
        # (Kept apart for a confined session: a file read by the CLI may be one it may not.)
        confined = self.local_roots is not None
        limit = (k.max_source_bytes, k.max_redirects, k.allow_private_hosts, confined)
        # The same file, unchanged, or the same URL fetched a moment ago: the text as before.
        known = _EXTRACTED.get(ref, limit) or _FETCHED.get(ref, limit)
        if known is not None:
            return known
        fetched = self._fetch(ref)
        document = extract(fetched, limit[0])
        for kept in (_EXTRACTED, _FETCHED):
            kept.add(fetched, limit, document, sys.getsizeof(document.text))
        return document

    # ---- indexing -------------------------------------------------------------------------

    @reopening
    def index(
        self,
        source: str,
        *,
        global_: bool = False,
        force: bool = False,
        progress: Progress | None = None,
    ) -> IndexReport:
        """Fetch, compare the content hash and (re-)index when it changed (or `force`).

        A new source goes to this scope (global with `global_`); an indexed one keeps its scope.
        """
        ref = self._ref(source)
        if ref.kind is SourceKind.STORED:
            raise InvalidInput("source", "stored:// notes are written with `store`, not indexed")
        return self._ensure(ref, global_=global_, force=force, lazy=False, progress=progress)

    def _ensure(
        self,
        ref: SourceRef,
        *,
        global_: bool = False,
        force: bool = False,
        lazy: bool,
        progress: Progress | None = None,
    ) -> IndexReport:
        self._begun.pop(ref.uri, None)  # (`switched`: of this call's write only)
        rows = [r for r in self._visible_rows(ref.uri) if r["session_id"] == ""]
        existing = rows[0] if rows else None
        scope = existing["scope"] if existing is not None else ("" if global_ else self.scope)
        # A new source needs room, before it is fetched, and again under the commit's lock.
        room = partial(check_source_room, self.kstore, scope, ref.uri, self.config.knowledge)
        if existing is None:
            self._screen_address(ref)
            room()
        now = utcnow()
        if existing is not None and lazy and not force and self._fresh(ref, existing, now):
            return IndexReport(SourceInfo.from_row(existing), "fresh", 0)
        cut = cut_settings(self.config.knowledge, self._chunk_cap(ref.uri))
        known = _REFUSED.get(ref, cut)
        if known is not None:  # the same file, unchanged: refused again without reading it
            raise InvalidInput("source", known)
        fetched = self._fetch(ref)
        document = extract(fetched, self.config.knowledge.max_source_bytes)
        digest = content_hash(document.text)
        unchanged = (
            existing is not None
            and not force
            and existing["content_hash"] == digest
            and existing["chunker"] == self._chunker(document.doc_type)
            # Before headings alone made chunks, a note of only headings indexed as none.
            and (existing["chunk_count"] > 0 or not document.text.strip())
        )
        # What is stored no longer matching its checksum is not what was indexed: indexed again.
        if existing is not None and unchanged and not self.kstore.damaged(existing):
            self.kstore.touch(existing["id"], now, fetched.mtime, len(fetched.data))
            return IndexReport(SourceInfo.from_row(existing), "unchanged", 0)
        status: IndexStatus = (
            "indexed" if existing is None else "repaired" if unchanged else "reindexed"
        )
        size = len(fetched.data)
        try:
            row, embedded = self._write(
                document, scope, "", digest, fetched.mtime, size, progress, room
            )
        except ChunkCapExceeded as exc:
            _REFUSED.add(fetched, cut, exc.rule, len(exc.rule))
            raise
        return IndexReport(SourceInfo.from_row(row), status, embedded)

    def _screen_address(self, ref: SourceRef) -> None:
        """A new URL holding a credential (`https://user:pass@…`, `?access_token=ghp_…`) is
        refused unless `memory.secrets` allows them: a source's address is stored and printed
        in every listing and search hit, to every later session. (Not redacted: the address
        is what is fetched again.) One already indexed is still read, refreshed and deleted."""
        policy = self.config.memory.secrets
        if ref.kind is SourceKind.URL and policy != "allow" and (found := find_secrets(ref.uri)):
            kinds = ", ".join(dict.fromkeys(f.kind for f in found))
            raise InvalidInput(
                "source",
                f"the URL holds a credential ({kinds}); a source's address is stored and shown "
                "in every listing and search result. Index a URL without it, or set "
                'memory.secrets = "allow" in the config',
            )

    def _fresh(self, ref: SourceRef, row: dict[str, Any], now: datetime) -> bool:
        if row["chunker"] != self._chunker(row["doc_type"]):  # read or cut another way since
            return False
        if ref.kind is SourceKind.FILE:
            return file_version(ref) == indexed_version(row)
        age: timedelta = now - row["last_checked"]
        return age <= timedelta(days=self.config.knowledge.outdating_days)

    @reopening
    def index_texts(
        self,
        documents: Sequence[tuple[str, str, str]],
        *,
        global_: bool = False,
        progress: Progress | None = None,
    ) -> int:
        """Bulk import of (uri, title, text) documents already in hand (e.g. a benchmark corpus
        or an export): chunked and embedded like any source, then written in two commits.
        Returns the number of chunks written."""
        scope = "" if global_ else self.scope
        sources: list[dict[str, Any]] = []
        chunks: list[dict[str, Any]] = []
        for uri, title, text in documents:
            document = Document(
                check_text("uri", uri, QUERY_BYTES), title, DocType.TEXT, normalise(text)
            )
            data = document.text.encode("utf-8")
            source_row, chunk_rows = self._new_rows(
                document, scope, "", content_hash(document.text), 0.0, len(data)
            )
            sources.append(source_row)
            chunks.extend(chunk_rows)
        embed_rows(self.embedder, chunks, progress, self.stop)
        self.kstore.add_sources(sources, chunks)
        return len(chunks)

    # ---- search and match -----------------------------------------------------------------

    @reopening
    def search(
        self,
        query: str,
        *,
        source: str | None = None,
        limit: int | None = None,
        min_relevance: float | None = None,
    ) -> SearchResult:
        """Hybrid search over indexed chunks; a named `source` is indexed (or refreshed) first
        and the search is limited to it. Only results at least `min_relevance` relevant."""
        query = check_text("query", query, QUERY_BYTES)
        k = self.config.knowledge
        limit = check_limit(k.max_results if limit is None else limit, maximum=1000)
        floor = k.min_relevance if min_relevance is None else float(min_relevance)
        if not 0.0 <= floor <= 1.0:
            raise InvalidInput("min_relevance", "must be between 0 and 1")
        report, source_ids = self._restrict(source)
        mirror = self.index_mirror
        qvec = self.embedder.embed_query(query)
        with mirror.lock:
            mirror.refresh()
            now = utcnow()
            scopes, cutoff = visible_scopes(self.scope), self._session_cutoff(now)
            seen = mirror.allowed(scopes, self.session_id, cutoff)  # (no other project's words)
            allowed = seen if source_ids is None else seen & mirror.of_sources(source_ids)
            hits = search_chunks(
                mirror,
                query,
                qvec,
                allowed,
                self.config,
                limit=limit,
                min_relevance=floor,
                seen=seen,
            )
            sources = mirror.sources  # (a refresh replaces it whole, never changes it)
        hits = mark_stale(sources.values(), hits, self._confined)
        empty = None if hits else "min_relevance" if allowed.any() else "nothing_indexed"
        return SearchResult(query, hits, self.scope, report, empty)

    def _restrict(self, source: str | None) -> tuple[IndexReport | None, set[str] | None]:
        if source is None:
            return None, None
        ref = self._named(source)
        report = None
        if ref.kind is not SourceKind.STORED:
            report = self._ensure(ref, lazy=True)
        ids = {r["id"] for r in self._visible_rows(ref.uri)}
        if not ids:
            raise InvalidInput("source", f"no stored note {as_json(ref.key)} in this session")
        return report, ids

    def _named(self, source: str) -> SourceRef:
        """The source a search or match is limited to."""
        if not str(source).strip():  # meant some source: not taken for every one
            raise InvalidInput(
                "source",
                "must name a file or an http(s) URL (leave it out for every source), "
                f"got {as_json(source)}",
            )
        return self._ref(source)

    @reopening
    def match(
        self,
        pattern: str,
        *,
        source: str | None = None,
        ignore_case: bool = False,
        max_matches: int | None = None,
        context: int = 0,
    ) -> MatchReport:
        """Lines of indexed sources (or of one named source) matching a regex, at most
        `max_matches` of them; line numbers count from 1 in each source's extracted text. A
        line longer than `pages.LINE_CHARS` characters shows as a window of that many around
        its match (context lines: their start), so a reply stays bounded."""
        if not isinstance(pattern, str) or not pattern:
            raise InvalidInput("pattern", "must be a non-empty regular expression")
        cap = self.config.knowledge.max_matches if max_matches is None else max_matches
        cap = check_limit(cap, field_name="max_matches", maximum=MAX_MATCH_CAP)
        if isinstance(context, bool) or not isinstance(context, int) or not 0 <= context <= 10:
            raise InvalidInput("context", f"must be an integer in [0, {MAX_CONTEXT}]")
        grep = partial(match_sources, pattern=pattern, ignore_case=ignore_case, cap=cap)
        if source is not None and self._named(source).kind is not SourceKind.STORED:
            # The file or URL as it reads now, as `read` pages it, never indexed for a grep:
            # indexing embedded the whole source first (up to max_source_chunks chunks, minutes
            # of CPU) for a call that needs no vector.
            document = self.read(source)
            named = {"uri": document.uri, "title": document.title}
            return grep(self.kstore, [named], context=context, texts_of=lambda _: [document.text])
        _, source_ids = self._restrict(source)  # (texts are read a batch at a time)
        rows = [r for r in self._visible_rows() if source_ids is None or r["id"] in source_ids]
        report = grep(self.kstore, rows, context=context)
        if not report.hits:
            return report
        return dataclasses.replace(report, hits=mark_stale_lines(rows, report.hits, self._confined))
