"""`Corpus`: an in-process mirror of the memories table for search and ranking.

It holds every row's model (no text re-reads per query), the stored embeddings (exact cosine for
any candidate, HyDE centroids, and an exact in-process vector leg), per-row filter columns as
numpy arrays, and the Rust BM25 index over row positions (whose postings also answer lexical
coverage: no per-row term set is kept in Python). It follows the store's version: when anyone
commits, the next query reads four narrow columns of every row, re-reads only the rows whose
`updated_at` changed, drops deleted ones, and patches access counts in place — other processes'
writes become visible without a rebuild.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from octobrain.bm25 import BM25Index
from octobrain.hybrid import exact_nearest
from octobrain.models import Memory, Relationship, State, micros
from octobrain.store import MemoryStore
from octobrain.store.memories import Pinned, sql_in
from octobrain.store.schema import row_to_memory

LIGHT_COLUMNS = [
    "id",
    "scope",
    "role",
    "memory_type",
    "title",
    "content",
    "tags",
    "related_files",
    "importance",
    "pre_consolidation_importance",
    "source",
    "state",
    "created_at",
    "updated_at",
    "last_accessed",
    "access_count",
    "git_commit",
    "context",
]
_PROBE = ["id", "updated_at", "last_accessed", "access_count"]
_SEARCHABLE = (State.WORKING.value, State.CONSOLIDATED.value)


class Corpus:
    """Positions ↔ memories, BM25 over their text (its postings give term statistics),
    embeddings and filters."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        """Empty the mirror; the next refresh loads the store afresh."""
        self._version = -1
        self.index = BM25Index()
        self.memories: list[Memory | None] = []
        self._edit_key: list[int] = []  # updated_at (µs) when indexed; -1 once removed
        self.embeddings = np.zeros((0, self._store.dim), dtype=np.float32)
        self.pos_of: dict[str, int] = {}
        # Filter columns by position (a removed row has state "").
        self._scope = np.zeros(0, dtype=object)
        self._state = np.zeros(0, dtype=object)
        self._type = np.zeros(0, dtype=object)
        self._created = np.zeros(0, dtype=np.int64)
        # Tag / file → live positions, so a filter is a few set lookups, not a scan of rows.
        self._by_tag: dict[str, set[int]] = {}
        self._by_file: dict[str, set[int]] = {}
        self._edges_version = -1
        self._edges: dict[str, list[Relationship]] = {}

    # ---- keeping up with the store ----------------------------------------------------------

    def refresh(self) -> None:
        """Catch up with the store's latest committed version (a no-op when unchanged)."""
        with self._lock:
            try:
                rows_version, edges_version = _latest_versions(self._store)
                self._refresh_edges(edges_version)
                self._refresh_rows(rows_version)
            except BaseException:
                self._reset()  # a half-applied catch-up must never outlive its error
                raise

    def _refresh_rows(self, version: int) -> None:
        if version == self._version:
            return
        # Every read below sees `version`, however many commits other processes make meanwhile.
        pinned = self._store.pinned(version)
        probe = pinned.scan_arrow("true", columns=_PROBE)
        ids: list[str] = probe.column("id").to_pylist()
        edited = probe.column("updated_at").cast("int64").to_numpy()
        seen = probe.column("last_accessed").to_pylist()
        counts = probe.column("access_count").to_pylist()
        present = set(ids)
        gone = [pos for mid, pos in self.pos_of.items() if mid not in present]
        changed = [
            mid
            for mid, key in zip(ids, edited, strict=True)
            if mid not in self.pos_of or self._edit_key[self.pos_of[mid]] != int(key)
        ]
        # An access bump changes the version but no edit stamp: then nothing is read again.
        rows = _rows(pinned, changed, len(ids)) if changed else None
        self._remove(gone + [self.pos_of[mid] for mid in changed if mid in self.pos_of])
        if rows is not None:
            self._add(rows.drop_columns(["embedding"]).to_pylist(), _vectors(rows, self._store.dim))
        for mid, last, count in zip(ids, seen, counts, strict=True):
            memory = self.memory(self.pos_of[mid])
            if memory.access_count != count or memory.last_accessed != last:
                memory.access_count, memory.last_accessed = int(count), last
        if len(self.memories) > 1000 and len(self.pos_of) < len(self.memories) // 2:
            self._rebuild()
        self._version = version

    def _refresh_edges(self, version: int) -> None:
        if version == self._edges_version:
            return
        edges: dict[str, list[Relationship]] = {}
        for rel in self._store.all_relationships():
            edges.setdefault(rel.source_id, []).append(rel)
            if rel.target_id != rel.source_id:
                edges.setdefault(rel.target_id, []).append(rel)
        self._edges, self._edges_version = edges, version

    def due_for_access(self, ids: Sequence[str], now: datetime, window: timedelta) -> list[str]:
        """The ids whose access should count now: never accessed, or not within `window`."""
        due = []
        for mid in ids:
            pos = self.pos_of.get(mid)
            if pos is not None:
                memory = self.memory(pos)
                if memory.access_count == 0 or memory.last_accessed < now - window:
                    due.append(mid)
        return due

    def note_own_access(self, ids: Sequence[str], now: datetime, version: int) -> None:
        """Apply an access bump this process just committed as `version` without re-reading,
        when nobody else committed in between (otherwise the next refresh reads the store)."""
        with self._lock:
            if version != self._version + 1:
                return
            for mid in ids:
                pos = self.pos_of.get(mid)
                if pos is not None:  # another scope's memory, counted in the same commit
                    memory = self.memory(pos)
                    memory.access_count += 1
                    memory.last_accessed = now
            self._version = version

    def edges(self, ids: Sequence[str]) -> list[Relationship]:
        """Edges touching any of `ids` (each once), from the mirror of `relationships`."""
        seen: dict[str, Relationship] = {}
        for mid in ids:
            for rel in self._edges.get(mid, ()):
                seen.setdefault(rel.id, rel)
        return list(seen.values())

    def _remove(self, positions: Sequence[int]) -> None:
        if not positions:
            return
        self.index.remove(list(positions))
        for pos in positions:
            memory = self.memories[pos]
            assert memory is not None
            del self.pos_of[memory.id]
            self._unlist(memory, pos)
            self.memories[pos] = None
            self._edit_key[pos] = -1
            self._state[pos] = ""

    def _add(self, rows: Sequence[dict[str, Any]], block: npt.NDArray[np.float32]) -> None:
        if not rows:
            return
        memories = [row_to_memory(row) for row in rows]
        texts = [m.searchable_text() for m in memories]
        positions = self.index.add(texts)
        self.embeddings = np.concatenate([self.embeddings, block])
        self._scope = np.concatenate(
            [self._scope, np.array([m.scope for m in memories], dtype=object)]
        )
        self._state = np.concatenate(
            [self._state, np.array([m.state.value for m in memories], dtype=object)]
        )
        self._type = np.concatenate(
            [self._type, np.array([m.memory_type.value for m in memories], dtype=object)]
        )
        self._created = np.concatenate(
            [self._created, np.array([micros(m.created_at) for m in memories], dtype=np.int64)]
        )
        for memory, pos in zip(memories, positions, strict=True):
            self.memories.append(memory)
            self._edit_key.append(micros(memory.updated_at))
            self.pos_of[memory.id] = int(pos)
            self._list(memory, int(pos))

    def _rebuild(self) -> None:
        """Drop tombstones: re-index the live rows at fresh, dense positions."""
        live = sorted(self.pos_of.values())
        memories = [self.memory(p) for p in live]
        self.index = BM25Index.build([m.searchable_text() for m in memories])
        self.memories = list(memories)
        self._edit_key = [self._edit_key[p] for p in live]
        self.embeddings = self.embeddings[live]
        self._scope, self._state = self._scope[live], self._state[live]
        self._type, self._created = self._type[live], self._created[live]
        self.pos_of = {m.id: i for i, m in enumerate(memories)}
        self._by_tag, self._by_file = {}, {}
        for i, memory in enumerate(memories):
            self._list(memory, i)

    def _list(self, memory: Memory, pos: int) -> None:
        for index, keys in ((self._by_tag, memory.tags), (self._by_file, memory.related_files)):
            for key in keys:
                index.setdefault(key, set()).add(pos)

    def _unlist(self, memory: Memory, pos: int) -> None:
        for index, keys in ((self._by_tag, memory.tags), (self._by_file, memory.related_files)):
            for key in keys:
                held = index.get(key)  # None when a row repeats a key: already dropped
                if held is not None:
                    held.discard(pos)
                    if not held:
                        del index[key]

    # ---- queries --------------------------------------------------------------------------

    def allowed(
        self,
        scopes: Sequence[str],
        *,
        memory_types: Sequence[str] = (),
        tags: Sequence[str] = (),
        related_files: Sequence[str] = (),
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        include_archived: bool = False,
    ) -> npt.NDArray[np.bool_]:
        """A mask over positions of the live, searchable rows a query may return."""
        states = (*_SEARCHABLE, State.ARCHIVED.value) if include_archived else _SEARCHABLE
        mask = np.isin(self._scope, list(scopes)) & np.isin(self._state, states)
        if memory_types:
            mask &= np.isin(self._type, list(memory_types))
        if created_after is not None:
            mask &= self._created >= micros(created_after)
        if created_before is not None:
            mask &= self._created < micros(created_before)
        for wanted, index in ((set(tags), self._by_tag), (set(related_files), self._by_file)):
            if wanted:  # any of the wanted values
                hit = np.zeros(len(mask), dtype=bool)
                for key in wanted:
                    held = index.get(key, ())
                    hit[np.fromiter(held, dtype=np.int64, count=len(held))] = True
                mask &= hit
        return mask

    def nearest(
        self, vector: npt.NDArray[np.float32], allowed: npt.NDArray[np.bool_], k: int
    ) -> list[int]:
        """Exact top-`k` positions by cosine among `allowed`."""
        return exact_nearest(self.embeddings, vector, allowed, k)

    def coverage(self, query: str, positions: Sequence[int]) -> npt.NDArray[np.float64]:
        """The idf-weighted share of the query's distinct terms each row contains, in [0, 1]."""
        return self.index.coverage(query, positions)

    def memory(self, pos: int) -> Memory:
        """The memory at a live position."""
        memory = self.memories[pos]
        assert memory is not None
        return memory

    def __len__(self) -> int:
        return len(self.pos_of)


def _latest_versions(store: MemoryStore) -> tuple[int, int]:
    """The latest committed versions of `memories` and `relationships`, probed together.

    Each probe re-reads the table's newest manifest (so another process's acknowledged write is
    seen by the next query); through lancedb's sync API every probe is a separate hand-off to
    its background event loop, which on a busy 2-core machine cost as much as the I/O. Both
    probes go in one hand-off and run concurrently; without lancedb's async handle (another
    lancedb) they run one after the other.
    """
    from lancedb.background_loop import LOOP

    inner: list[Any] = [getattr(t, "_table", None) for t in (store.memories, store.relationships)]
    if not all(hasattr(t, "version") for t in inner):
        return store.version(), store.relationships_version()

    async def both() -> tuple[int, int]:
        import asyncio

        first, second = await asyncio.gather(inner[0].version(), inner[1].version())
        return int(first), int(second)

    versions: tuple[int, int] = LOOP.run(both())  # type: ignore[no-untyped-call]
    return versions


def _rows(pinned: Pinned, ids: list[str], total: int) -> pa.Table:
    """The mirrored columns and the embedding of `ids`, read at the pinned version."""
    columns = [*LIGHT_COLUMNS, "embedding"]
    if len(ids) > total // 2:  # mostly new (a first load): one full scan beats an IN list
        table = pinned.scan_arrow("true", columns=columns)
        return table.filter(pc.is_in(table.column("id"), value_set=pa.array(ids, pa.string())))
    return pinned.scan_arrow(sql_in("id", ids), columns=columns)


def _vectors(rows: pa.Table, dim: int) -> npt.NDArray[np.float32]:
    """The `embedding` column as one float32 matrix, without a Python list per row."""
    column = rows.column("embedding").combine_chunks()
    flat = column.flatten().to_numpy(zero_copy_only=False)
    return np.asarray(flat, dtype=np.float32).reshape(len(rows), dim)
