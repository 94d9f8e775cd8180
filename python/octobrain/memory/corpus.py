"""`Corpus`: an in-process mirror of the memories table for search and ranking.

It holds every row's mirrored columns as one Arrow table (a `Memory` is made only for the rows
a query returns), the stored embeddings (`VectorBlocks`: exact cosine for any candidate, HyDE
centroids, an exact in-process vector leg), per-row filter columns as numpy arrays (strings as
small integer codes), ids sorted for lookups, and the Rust BM25 index over row positions (whose
postings also answer lexical coverage). It follows the store's version: when anyone commits,
the next query reads what changed since its version (`memory.catchup`: the rows of the
fragments written since, the ids the store's change record says were removed, proved by the
row count; else the narrow columns of every row), re-reads only the rows whose `updated_at`
changed, drops deleted ones, and patches access counts in place — other processes' writes
become visible without a rebuild (`memory.corpus_apply` applies each catch-up). The
relationships follow the same way (`memory.edges`).

From `snapshot_min_rows` live rows the mirror is also kept as a memory-mapped snapshot on this
machine (`memory.snapshot`): a new process opens it and catches up from its version instead
of reading and indexing the whole store (`memory.corpus_snapshot`: opening, tails, writes).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from octobrain.kernels.bm25 import BM25Index
from octobrain.kernels.vectors import VectorBlocks
from octobrain.memory import build, corpus_apply, corpus_snapshot, tail
from octobrain.memory.corpus_filters import CorpusFilters
from octobrain.memory.corpus_io import (
    CODED,
    LIGHT_COLUMNS,
    ListCodes,
    latest_versions,
    merged_ids,
    sorted_ids,
    take_rows,
)
from octobrain.memory.edges import EdgeMirror
from octobrain.memory.page_check import SnapshotDamaged
from octobrain.memory.positions import AddressIndex, Positions
from octobrain.memory.snapshot import Snapshot, SnapshotDir
from octobrain.models import Memory, Relationship
from octobrain.store import MemoryStore
from octobrain.store.accessed import Accessed
from octobrain.store.schema import row_to_memory, stored_float
from octobrain.times import from_micros, micros

__all__ = ["Corpus"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_CODED = tuple(CODED)
_MAX_CACHED = 5_000  # Memory objects kept for reuse; past this the cache starts over (at 100k,
# 50,000 of them held 35 MiB more for about 1 ms a query)


class Corpus(CorpusFilters):
    """Positions ↔ memories, BM25 over their text (its postings give term statistics),
    embeddings and filters."""

    # Cleared by the resident service: it leaves a whole snapshot as it exits (`save_snapshot`)
    # instead of a tail after each catch-up, which no new process reads while it serves.
    leave_tails: ClassVar[bool] = True

    def __init__(
        self,
        store: MemoryStore,
        *,
        snapshots: SnapshotDir | None = None,
        snapshot_min_rows: int = 5_000,
    ) -> None:
        self._store = store
        self._snapshots = snapshots
        self._snapshot_min_rows = snapshot_min_rows
        self._lock = threading.Lock()
        self._writer: threading.Thread | None = None
        self._damaged = False  # a background write found the snapshot damaged
        self._written = False  # a background write put this mirror's snapshot in place
        self._scratch: Path | None = None  # a build's files, until a snapshot write takes them
        self.pos_of = Positions(self)
        self._reset()

    def _reset(self, snap: Snapshot | None = None) -> None:
        """Empty the mirror (the next refresh loads the store afresh), or adopt `snap`."""
        if self._scratch is not None:  # (what maps its vectors keeps reading them)
            build.remove_scratch(self._scratch)
            self._scratch = None
        dim = self._store.dim
        self._version = -1 if snap is None else snap.version
        self.index = BM25Index() if snap is None else snap.index
        self._rows: pa.Table = (
            pa.table({c: [] for c in LIGHT_COLUMNS}) if snap is None else snap.rows
        )
        self._base_len = len(self._rows)
        self._role_mask = None  # (`CorpusFilters._of_roles`)
        self.vectors = VectorBlocks(
            dim, None if snap is None else snap.vectors, None if snap is None else snap.vector_rows
        )
        self._source = snap  # the snapshot whose files the mirror still reads, if any
        # The versions and fingerprint on disk `open_current` served, unread since.
        self._served: tuple[int, int, str] | None = None
        self._rows_check = None if snap is None else snap.rows_check
        cols = snap.columns if snap is not None else {}

        def col(name: str, dtype: Any) -> npt.NDArray[Any]:
            return cols[name] if name in cols else np.zeros(0, dtype=dtype)

        self._live = col("live", np.bool_)
        self._edit_key = col("edit_key", np.int64)
        self._addr = col("rowaddr", np.int64)  # each row's Lance row address
        self._by_addr = AddressIndex()
        self._mark = -1 if snap is None else snap.mark  # the highest fragment id held
        self._access = col("access_count", np.int64)
        self._seen = col("last_accessed", np.int64)
        self._created = col("created", np.int64)
        self._codes: dict[str, list[str]] = (
            {k: list(v) for k, v in snap.codes.items()} if snap else {k: [] for k in _CODED}
        )
        self._code_of = {k: {v: i for i, v in enumerate(vals)} for k, vals in self._codes.items()}
        self._coded = {k: col(k, np.int32) for k in _CODED}
        self._sorted_ids = snap.sorted_ids if snap else np.zeros(0, dtype="S1")
        self._id_order = snap.id_order if snap else np.zeros(0, dtype=np.int64)
        self._added: dict[str, int] = {}  # ids appended after the sorted part
        self._ids_upto = len(self._live)  # the positions the sorted part was sorted from
        self._buffers: dict[str, tuple[npt.NDArray[Any], npt.NDArray[Any]]] = {}  # (`corpus_apply`)
        self._cache: dict[int, Memory] = {}
        self._lists: ListCodes = {}  # (`list_holds`; `corpus_apply.add` clears it)
        # The version of the snapshot this mirror last matched (opened, written or tried).
        self._snap_version = None if snap is None else snap.version
        self.opened_snapshot = snap is not None  # whether it started from a snapshot
        self._reread_since_snap = 0.0
        # The catch-ups applied since the snapshot the mirror reads (`memory.tail`), while
        # they are few enough to be worth keeping; the version a tail was last left at.
        self._steps: list[tail.Step] | None = [] if snap is not None else None
        self._tail_at = None if snap is None else (snap.version, snap.edges_version)
        # How the last catch-up found what changed: "changes" (the fragments written since and
        # the store's change record) or "every row" (the narrow columns of the whole table).
        self.last_catch_up = ""
        self._edges = (
            EdgeMirror(snap.edges, snap.edges_version, snap.edges_mark)
            if snap is not None and snap.edges is not None
            else EdgeMirror()
        )

    @property
    def reads_snapshot(self) -> bool:
        """Whether the mirror reads a snapshot's mapped files (opened one, or adopted the one
        it wrote) rather than only what it read from the store itself."""
        return self._source is not None

    @property
    def store(self) -> MemoryStore:
        """The store the mirror follows."""
        return self._store

    @property
    def version(self) -> int:
        """The memories table's version the mirror is at (-1: nothing loaded yet)."""
        return self._version

    def addresses(self, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The Lance row address of each row at `positions`."""
        return self._addr[positions]

    def rows(self) -> pa.Table:
        """The mirrored rows, every one verified (a snapshot's blocks, those not yet)."""
        self._verify_rows(None, None)
        self._rows_check = None
        return self._rows

    def columns(self, names: Sequence[str]) -> pa.Table:
        """The mirrored rows' columns `names`, every row of them verified (not the others)."""
        self._verify_rows(None, names)
        return self._rows.select(list(names))

    def _verify_rows(self, positions: Any, columns: Sequence[str] | None) -> None:
        """Verify the snapshot's blocks holding `columns` (None: all) of the rows at
        `positions` (None: every row)."""
        if self._rows_check is None or self._rows_check.done:
            return
        try:
            if positions is not None:
                self._rows_check.rows(positions, columns or self._rows.column_names)
            elif columns is not None:
                self._rows_check.columns(columns)
            else:
                self._rows_check.everything()
        except SnapshotDamaged:
            self._damaged = True  # never read: the next refresh discards and rebuilds
            raise

    # ---- keeping up with the store ----------------------------------------------------------

    def refresh(self) -> None:
        """Catch up with the store's latest committed version (a no-op when unchanged)."""
        changed = self._source.changed_file() if self._source is not None else None
        if changed is not None:
            log.warning("memory snapshot file %s changed while in use; rebuilding", changed)
        if self._damaged or changed is not None:
            self._damaged = False
            self.discard_snapshot()
        with self._lock:
            try:
                if self._snapshots is not None and (
                    corpus_snapshot.open_current(self)
                    if self._version == -1
                    else corpus_snapshot.unchanged_on_disk(self)
                ):
                    return
                # Kept accesses as the store is read: one another opener claimed may land
                # after this read, or before it, and is then counted once (the window).
                kept = self._store.kept_access()
                rows_version, edges_version = latest_versions(self._store)
                if self._written:
                    corpus_snapshot.adopt_written(self)
                if self._version == -1 and self._snapshots is not None:
                    corpus_snapshot.adopt_snapshot(self, rows_version)
                self._refresh_edges(edges_version)
                corpus_apply.refresh_rows(self, rows_version)
                self._apply_kept_access(kept)
            except SnapshotDamaged:
                corpus_snapshot.discard(self)
                raise
            except BaseException:
                self._reset()  # a half-applied catch-up must never outlive its error
                raise
            corpus_snapshot.maybe_write(self)

    def save_snapshot(self) -> None:
        """Write the snapshot now if the mirror is at a newer version, however few rows changed,
        and wait for it (`corpus_snapshot.save`): a long-lived process going away (the
        resident service, idle) leaves the next new process a snapshot that serves it
        without LanceDB."""
        corpus_snapshot.save(self)

    def wait_for_snapshot(self) -> None:
        """Block until a snapshot being written in the background is in place (or failed)."""
        writer = self._writer
        if writer is not None:
            writer.join()

    def snapshot(self) -> Snapshot:
        """The mirror as it is now, for `SnapshotDir.write` (nothing in it changes later)."""
        return corpus_snapshot.take(self)

    def discard_snapshot(self) -> None:
        """The snapshot this mirror reads from was found damaged: stop every process from
        opening it, and empty the mirror (the next refresh rebuilds from the store)."""
        with self._lock:
            corpus_snapshot.discard(self)

    def read_or_rebuild(self, read: Callable[[], T]) -> T:
        """`read()`; when it finds the snapshot damaged (found as read: never served), the
        damage named on the log, the snapshot discarded and `read()` again from the store."""
        try:
            return read()
        except SnapshotDamaged as exc:
            log.warning("memory snapshot damaged (%s); rebuilding from the store", exc)
            self.discard_snapshot()
            return read()

    def _lookup(self, ids: pa.ChunkedArray) -> npt.NDArray[np.int64]:
        """The live position of each id, -1 for ids the mirror does not hold."""
        if not len(self._live):
            return np.full(len(ids), -1, dtype=np.int64)
        held = pc.if_else(pa.array(self._live), self.columns(["id"]).column("id"), None)
        found = pc.fill_null(pc.index_in(ids, value_set=held.combine_chunks()), -1)
        return np.asarray(found.to_numpy(zero_copy_only=False), dtype=np.int64)

    def _refresh_edges(self, version: int) -> None:
        self._edges.refresh(self._store, version)

    def due_for_access(self, ids: Sequence[str], now: datetime, window: timedelta) -> list[str]:
        """The ids whose access should count now: never accessed, or not within `window`."""
        due = []
        cutoff = micros(now - window)
        for mid in ids:
            pos = self.pos_of.get(mid)
            if pos is not None and (self._access[pos] == 0 or self._seen[pos] < cutoff):
                due.append(mid)
        return due

    def note_own_access(self, ids: Sequence[str], now: datetime, version: int | None) -> None:
        """Apply an access bump this process just committed as `version` (None: kept for the
        next process that opens the tables, `MemoryStore.keep_access`) without re-reading,
        when nobody else committed in between (otherwise the next refresh reads the store)."""
        with self._lock:
            if version is not None and version != self._version + 1:
                return
            at = [p for p in (self.pos_of.get(mid) for mid in ids) if p is not None]
            if at:  # (a missing id: another scope's memory, counted in the same commit)
                where = np.asarray(at, dtype=np.int64)
                counts = self._access[where] + 1
                corpus_apply.patch_access(
                    self, where, counts, np.full(len(at), micros(now), np.int64)
                )
            if version is not None:
                self._version = version

    def _apply_kept_access(self, kept: Accessed | None) -> None:
        """Count what processes before this one kept for the next commit (`kept`, as
        `MemoryStore.kept_access` listed them) as that commit will: each id once, unless
        accessed within the window. A reader the snapshot serves applies them all; one that
        read the store, those another opener had claimed and not committed as it listed them
        (one committed by the time of the read is not counted twice: the window)."""
        if kept is None:
            return
        where = self.pos_of.many(kept.ids)
        where = where[where >= 0]
        cutoff = micros(kept.at - kept.window)
        due = where[(self._access[where] == 0) | (self._seen[where] < cutoff)]
        if len(due):
            corpus_apply.patch_access(
                self, due, self._access[due] + 1, np.full(len(due), micros(kept.at))
            )

    def edges(self, ids: Sequence[str]) -> list[Relationship]:
        """Edges touching any of `ids` (each once), from the mirror of `relationships`."""
        return self._edges.touching(ids)

    def edges_into(
        self, ids: Sequence[str], kinds: Sequence[str]
    ) -> tuple[list[str], list[str], list[str]]:
        """Sources, targets and types of the edges of types `kinds` whose target is one of
        `ids` (`EdgeMirror.into`)."""
        return self._edges.into(ids, kinds)

    def edges_by_node(
        self, ids: Sequence[str], per_kind: int | None = None
    ) -> dict[str, list[Relationship]]:
        """The edges touching each of `ids` (`EdgeMirror.by_node`): one pass for them all."""
        return self._edges.by_node(ids, per_kind)

    def damaged_links(self) -> list[str]:
        """The ids of the mirrored edges that no longer match their checksum."""
        return self._edges.damaged()

    def edges_of_kinds(self, kinds: Sequence[str]) -> tuple[list[str], list[str], list[str]]:
        """Sources, targets and types of every edge of the types `kinds`
        (`EdgeMirror.of_kinds`)."""
        return self._edges.of_kinds(kinds)

    def _index_ids(self) -> None:
        """Sort the live ids for binary search (those added since merged into the ids sorted
        before, `merged_ids`; else all of them, their column alone verified); empties
        `_added`."""
        start = self._ids_upto
        merged = merged_ids(
            self._sorted_ids,
            self._id_order,
            self._rows.column("id").slice(start),
            self._live,
            start,
        )
        if merged is None:
            merged = sorted_ids(self.columns(["id"]).column("id"), self._live)
        self._sorted_ids, self._id_order = merged
        self._ids_upto = len(self._live)
        self._added = {}

    # ---- queries --------------------------------------------------------------------------

    def nearest(
        self, vector: npt.NDArray[np.float32], allowed: npt.NDArray[np.bool_], k: int
    ) -> list[int]:
        """Exact top-`k` positions by cosine among `allowed`."""
        from octobrain.kernels.hybrid import exact_top

        return exact_top(self.vectors.cosines(vector), allowed, k, self.pos_of.tie_keys())

    def exact_cosines(
        self, vector: npt.NDArray[np.float32], positions: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float32]:
        """The cosine of `vector` with the rows at `positions` only."""
        if not len(positions):
            return np.zeros(0, dtype=np.float32)
        out: npt.NDArray[np.float32] = np.einsum("ij,j->i", self.vectors[positions], vector)
        return out

    def positions_of(self, ids: Sequence[str]) -> npt.NDArray[np.int64]:
        """The live position of each id (-1 where the mirror does not hold it)."""
        return self.pos_of.many(ids)

    def positions_at(self, addrs: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The live position of each Lance row address (-1 where the mirror holds no such row)."""
        return self._by_addr.positions(addrs, self._addr, self._live)

    @property
    def embeddings(self) -> npt.NDArray[np.float32]:
        """Every position's vector as one array (a copy when rows were appended)."""
        return self.vectors.dense()

    def coverage(
        self, query: str, positions: Sequence[int], seen: npt.NDArray[np.bool_] | None = None
    ) -> npt.NDArray[np.float64]:
        """The idf-weighted share of the query's distinct terms each row contains, in [0, 1]
        (idf over the rows `seen` marks, `seen_by`; every row when None)."""
        return self.index.coverage(query, positions, seen)

    def fields_at(self, positions: npt.NDArray[np.int64]) -> dict[str, Any]:
        """What ranking a row needs, for the rows at live `positions`, without making memories:
        the ids (a list), the source of each as a code (an array) into the distinct sources
        ("sources", a list), importance (as `row_to_memory` rounds it), created and
        last-accessed time (integer microseconds) and access count. State, type and scope are
        `coded_in`'s (an array of 100,000 strings each, and comparing them, cost a briefing
        50 ms of CPU)."""
        rows = self.take(positions, ["id", "source", "importance"])
        out: dict[str, Any] = {"id": rows.column("id").to_pylist()}
        source = pc.dictionary_encode(rows.column("source")).combine_chunks()
        out["sources"] = source.dictionary.to_pylist()
        out["source"] = source.indices.to_numpy(zero_copy_only=False)
        imp = rows.column("importance").to_numpy(zero_copy_only=False)
        values, where = np.unique(imp, return_inverse=True)  # few distinct values, rounded once
        out["importance"] = np.asarray([stored_float(v) for v in values], np.float64)[where]
        out["created"] = self._created[positions]
        out["last_accessed"] = self._seen[positions]
        out["access_count"] = self._access[positions]
        return out

    def created(self, positions: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The `created_at` of the rows at `positions`, in microseconds (a mirrored column)."""
        return self._created[positions]

    def take(
        self, positions: Sequence[int] | npt.NDArray[np.int64], columns: Sequence[str] | None = None
    ) -> pa.Table:
        """The rows at `positions` (their `columns`, else all), in order (`take_rows`); of a
        snapshot's rows, only the blocks they are read from are verified."""
        self._verify_rows(positions, columns)
        rows = self._rows if columns is None else self._rows.select(list(columns))
        return take_rows(rows, positions)

    def held(self, memory_id: str) -> Memory | None:
        """The memory `memory_id` (a full id) as the mirror holds it, without catching up:
        None when it holds none (not loaded yet, or not there). It may be out of date."""
        with self._lock:
            pos = self.pos_of.get(memory_id)
            return None if pos is None else self.memory(pos)

    def memory(self, pos: int) -> Memory:
        """The memory at a live position (made from the mirrored columns on first use)."""
        memory = self._cache.get(pos)
        return memory if memory is not None else self.memories_at([pos])[0]

    def memories_at(self, positions: Sequence[int]) -> list[Memory]:
        """The memories at live positions, those not made yet read in one Arrow call."""
        missing = [p for p in dict.fromkeys(positions) if p not in self._cache]
        if missing:
            assert self._live[missing].all(), "a position holds no live memory"
            if len(self._cache) + len(missing) > _MAX_CACHED:
                self._cache.clear()  # (then every asked position is made again)
                missing = list(dict.fromkeys(positions))
            rows = self.take(missing).to_pylist()
            for pos, row in zip(missing, rows, strict=True):
                memory = row_to_memory(row)
                memory.access_count = int(self._access[pos])
                memory.last_accessed = from_micros(self._seen[pos])
                self._cache[pos] = memory
        return [self._cache[p] for p in positions]

    @property
    def position_count(self) -> int:
        """Positions ever assigned (removed ones included)."""
        return len(self._live)

    def __len__(self) -> int:
        return len(self.pos_of)
