"""`Corpus`: an in-process mirror of the memories table for keyword search and ranking.

It holds every row's model (no text re-reads per query), the stored embedding (for calibrated
cosine of keyword-only candidates and for HyDE), the analysed terms (for lexical coverage) and
the Rust BM25 index over positions. It follows the store's version: when anyone commits, the
next query re-reads the light columns, removes changed or deleted rows from the index and adds
new ones, so other processes' writes are visible without rebuilding from scratch.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Sequence
from datetime import datetime

import numpy as np
import numpy.typing as npt

from octobrain.bm25 import BM25Index
from octobrain.models import Memory, State
from octobrain.store import MemoryStore
from octobrain.store.memories import sql_in
from octobrain.store.schema import row_to_memory
from octobrain.text import analyze

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
]


class Corpus:
    """Positions ↔ memories, BM25 over their text, embeddings and term statistics."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._version = -1
        self.index = BM25Index()
        self.memories: list[Memory | None] = []
        self._edit_key: list[datetime | None] = []
        self._terms: list[frozenset[str]] = []
        self.embeddings = np.zeros((0, store.dim), dtype=np.float32)
        self.pos_of: dict[str, int] = {}
        self._df: Counter[str] = Counter()

    def refresh(self) -> None:
        """Catch up with the store's latest committed version (a no-op when unchanged)."""
        with self._lock:
            version = self._store.version()
            if version == self._version:
                return
            rows = self._store.scan("true", columns=LIGHT_COLUMNS)
            latest = {row["id"]: row for row in rows}
            stale = [
                pos
                for mid, pos in self.pos_of.items()
                if mid not in latest or latest[mid]["updated_at"] != self._edit_key[pos]
            ]
            self._remove(stale)
            fresh = [row for mid, row in latest.items() if mid not in self.pos_of]
            self._add(fresh)
            for mid, pos in self.pos_of.items():  # access counts, states, importance move freely
                self.memories[pos] = row_to_memory(latest[mid])
            if len(self.memories) > 1000 and len(self.pos_of) < len(self.memories) // 2:
                self._rebuild()
            self._version = version

    def _remove(self, positions: Sequence[int]) -> None:
        if not positions:
            return
        self.index.remove(list(positions))
        for pos in positions:
            memory = self.memories[pos]
            assert memory is not None
            del self.pos_of[memory.id]
            self._df.subtract(self._terms[pos])
            self.memories[pos] = None
            self._edit_key[pos] = None
            self._terms[pos] = frozenset()
        self._df = +self._df  # drop zero counts

    def _add(self, rows: Sequence[dict[str, object]]) -> None:
        if not rows:
            return
        memories = [row_to_memory(row) for row in rows]
        texts = [m.searchable_text() for m in memories]
        positions = self.index.add(texts)
        vectors = self._store.embeddings([m.id for m in memories])
        block = np.stack([vectors[m.id] for m in memories]).astype(np.float32, copy=False)
        self.embeddings = np.concatenate([self.embeddings, block])
        for memory, pos, terms in zip(memories, positions, analyze(texts), strict=True):
            self.memories.append(memory)
            self._edit_key.append(memory.updated_at)
            self._terms.append(frozenset(terms))
            self._df.update(frozenset(terms))
            self.pos_of[memory.id] = int(pos)

    def _rebuild(self) -> None:
        """Drop tombstones: re-index the live rows at fresh, dense positions."""
        live = [pos for pos in self.pos_of.values()]
        live.sort()
        memories = [self.memories[p] for p in live]
        texts = [m.searchable_text() for m in memories if m is not None]
        self.index = BM25Index.build(texts)
        self.memories = list(memories)
        self._edit_key = [self._edit_key[p] for p in live]
        self._terms = [self._terms[p] for p in live]
        self.embeddings = self.embeddings[live]
        self.pos_of = {m.id: i for i, m in enumerate(memories) if m is not None}

    # ---- queries --------------------------------------------------------------------------

    def allowed(
        self,
        scopes: Sequence[str],
        *,
        states: Sequence[State] = (State.WORKING, State.CONSOLIDATED),
        memory_types: Sequence[str] = (),
        tags: Sequence[str] = (),
        related_files: Sequence[str] = (),
        created_after: datetime | None = None,
        created_before: datetime | None = None,
    ) -> npt.NDArray[np.bool_]:
        """A mask over positions of the rows a query may return."""
        mask = np.zeros(len(self.memories), dtype=bool)
        wanted_tags, wanted_files = set(tags), set(related_files)
        for pos, m in enumerate(self.memories):
            mask[pos] = (
                m is not None
                and m.scope in scopes
                and m.state in states
                and (not memory_types or m.memory_type.value in memory_types)
                and (not wanted_tags or not wanted_tags.isdisjoint(m.tags))
                and (not wanted_files or not wanted_files.isdisjoint(m.related_files))
                and (created_after is None or m.created_at >= created_after)
                and (created_before is None or m.created_at < created_before)
            )
        return mask

    def coverage(self, query: str, positions: Sequence[int]) -> npt.NDArray[np.float64]:
        """How much of the query's information each document contains: the idf-weighted share
        of the query's distinct terms present in it, in [0, 1]. An absolute measure (unlike a
        BM25 score), so exact-word matches can pass a relevance threshold on their own."""
        terms = set(analyze([query])[0])
        out = np.zeros(len(positions), dtype=np.float64)
        if not terms:
            return out
        n = max(1, len(self.pos_of))
        idf = {t: math.log(1 + (n - self._df[t] + 0.5) / (self._df[t] + 0.5)) for t in terms}
        total = sum(idf.values())
        for i, pos in enumerate(positions):
            doc = self._terms[pos]
            out[i] = sum(w for t, w in idf.items() if t in doc) / total
        return out

    def ids(self, positions: Sequence[int]) -> list[str]:
        """Memory ids at `positions`."""
        out = []
        for pos in positions:
            memory = self.memories[pos]
            assert memory is not None
            out.append(memory.id)
        return out

    def memory(self, pos: int) -> Memory:
        """The memory at a live position."""
        memory = self.memories[pos]
        assert memory is not None
        return memory

    def where_ids(self, positions: Sequence[int]) -> str:
        """A SQL predicate selecting exactly these positions' rows."""
        return sql_in("id", self.ids(positions))
