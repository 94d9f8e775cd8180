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
become visible without a rebuild. The relationships follow the same way (`memory.edges`).

From `snapshot_min_rows` live rows the mirror is also kept as a memory-mapped snapshot on this
machine (`memory.snapshot`): a new process opens it and catches up from its version instead
of reading and indexing the whole store.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from octobrain.heap import collect_later
from octobrain.kernels.bm25 import BM25Index
from octobrain.kernels.vectors import VectorBlocks
from octobrain.memory import build, catchup, tail
from octobrain.memory.corpus_io import (
    CODED,
    LIGHT_COLUMNS,
    int64s,
    latest_versions,
    read_rows,
    sorted_ids,
    texts_of,
    vectors_of,
)
from octobrain.memory.edges import EdgeMirror
from octobrain.memory.positions import AddressIndex, Positions
from octobrain.memory.snapshot import Snapshot, SnapshotDamaged, SnapshotDir
from octobrain.models import Memory, Relationship, State, from_micros, micros
from octobrain.store import MemoryStore
from octobrain.store.memories import Pinned
from octobrain.store.schema import row_to_memory, stored_float

__all__ = ["LIGHT_COLUMNS", "Corpus"]

log = logging.getLogger(__name__)

_SEARCHABLE = (State.WORKING.value, State.CONSOLIDATED.value)
_CODED = tuple(CODED)
_MAX_CACHED = 5_000  # Memory objects kept for reuse; past this the cache starts over (at 100k,
# 50,000 of them held 35 MiB more for about 1 ms a query)
_MAX_ADDED = 4096  # ids held in a dict before they are sorted in with the rest
_MAX_CHUNKS = 32  # appended Arrow chunks before they are merged into one
# A snapshot is rewritten once this many rows (or this share of them) were re-read since it
# (a process opening it re-reads them too; a row that only moved, as after an access count or
# compaction, counts a quarter), or after a catch-up that read every row (the next open would).
SNAPSHOT_STALE_ROWS, SNAPSHOT_STALE_SHARE = 256, 0.01


class Corpus:
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
        self.vectors = VectorBlocks(
            dim, None if snap is None else snap.vectors, None if snap is None else snap.vector_rows
        )
        self._source = snap  # the snapshot whose files the mirror still reads, if any
        self._rows_ready = None if snap is None else snap.rows_ready
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
        self._buffers: dict[str, tuple[npt.NDArray[Any], npt.NDArray[Any]]] = {}  # (`_grow`)
        self._cache: dict[int, Memory] = {}
        self._lists: dict[tuple[str, int], tuple[npt.NDArray[np.int32], list[str]]] = {}
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

    def rows(self) -> pa.Table:
        """The mirrored rows, once they are verified (a snapshot's are checked meanwhile)."""
        if self._rows_ready is not None:
            try:
                self._rows_ready()
            except SnapshotDamaged:
                self._damaged = True  # never read: the next refresh discards and rebuilds
                raise
            self._rows_ready = None
        return self._rows

    # ---- keeping up with the store ----------------------------------------------------------

    def refresh(self) -> None:
        """Catch up with the store's latest committed version (a no-op when unchanged)."""
        if self._damaged:
            self._damaged = False
            self.discard_snapshot()
        with self._lock:
            try:
                if self._version == -1 and self._snapshots is not None and self._open_current():
                    return
                rows_version, edges_version = latest_versions(self._store)
                if self._written:
                    self._adopt_written()
                if self._version == -1 and self._snapshots is not None:
                    self._adopt_snapshot(rows_version)
                self._refresh_edges(edges_version)
                self._refresh_rows(rows_version)
            except SnapshotDamaged:
                self._discard()
                raise
            except BaseException:
                self._reset()  # a half-applied catch-up must never outlive its error
                raise
            self._maybe_snapshot()

    def _open_current(self) -> bool:
        """A new process's first read, served by the snapshot without opening LanceDB, when it
        is of the versions the newest manifests of both tables on disk name and its store is
        this one by its fingerprint (`MemoryStore.versions_on_disk`; importing LanceDB alone
        took a third of such a process). Else what it adopted stays, and the caller catches
        up from there through LanceDB as before."""
        on_disk = self._store.versions_on_disk()
        if on_disk is None or not self._adopt_snapshot(on_disk[0]):
            return False
        if (self._version, self._edges.version) != on_disk:
            self._replay_tail(*on_disk)
        if (self._version, self._edges.version) != on_disk:
            return False
        self._apply_kept_access()
        return True

    def _replay_tail(self, version: int, edges_version: int) -> None:
        """Catch up from the snapshot just adopted to `version` by the tail a process that
        caught up before left beside it (`memory.tail`), if it is of exactly that store
        version; else the mirror stays at the snapshot's version."""
        source = self._source
        if source is None or source.where is None:
            return
        found = tail.load(source.where, version)
        if found is None or found.fingerprint != self._store.version_fingerprint(version):
            return
        if (found.edges_version if found.edges is not None else source.edges_version) != (
            edges_version
        ):
            return
        try:
            for step in found.steps:
                self._apply(step)
        except Exception as exc:  # (checked, yet it does not fit: start again from the snapshot)
            log.warning("memory snapshot tail not used (%s); catching up from the store", exc)
            self._reset()
            self._adopt_snapshot(-1)
            return
        if found.edges is not None:
            self._edges = EdgeMirror(found.edges, found.edges_version, found.edges_mark)
        self._steps, self._tail_at = list(found.steps), (version, edges_version)

    def _adopt_snapshot(self, latest: int) -> bool:
        """Read from the current snapshot unless it is another store's; True when its store
        was confirmed by the fingerprint of its version's Lance manifest."""
        assert self._snapshots is not None
        for _ in range(2):  # the current one, or the one that replaced it meanwhile
            snap = self._snapshots.load()
            if snap is None:
                return False
            theirs = snap.fingerprint and self._store.version_fingerprint(snap.version)
            if theirs and theirs != snap.fingerprint:
                # Another store now lives at this URI (replaced, re-created): its version of the
                # same number names other files. Never served, however well its counts agree.
                log.warning("memory snapshot is of another store at this location; rebuilding")
                return False
            live = int(np.count_nonzero(snap.columns["live"]))
            # (A manifest that matches names the same files: only without one is the count
            # asked of the store.)
            if not theirs and snap.version == latest and live != self._store.count():
                log.warning("memory snapshot disagrees with the store; rebuilding")
                return False  # another table under the same name: never served
            if self._adopt(snap):
                return bool(theirs)
        return False

    def _adopt(self, snap: Snapshot) -> bool:
        """Read from `snap`; False (the mirror left empty) when its files went away after its
        manifest was read: another process wrote a newer snapshot and removed the others, and
        what this one had not opened yet (its vectors) is gone with them."""
        try:
            self._reset(snap)
        except FileNotFoundError:
            log.info("memory snapshot replaced while it was being opened")
            self._reset()
            return False
        return True

    def _adopt_written(self) -> None:
        """A mirror reads the snapshot it wrote once it is in place, instead of what it built
        or caught up with: the rows, vectors and index it built from the store (most of a
        building process's memory: a resident service at 100k kept 1 GB more than one that
        opened the snapshot), or the older snapshot it opened, whose every page the write
        made resident, and the rows it read since, are dropped; the catch-up goes on from the
        snapshot's version as in any process that opened it."""
        assert self._snapshots is not None
        self._written = False
        snap = self._snapshots.load()
        if snap is not None and snap.version <= self._version:
            opened = self.opened_snapshot
            if not self._adopt(snap):
                return  # (then read as a new process would: the current snapshot, or the store)
            self.opened_snapshot = opened  # (how it started)
            collect_later()  # what it built is held in reference cycles too

    def save_snapshot(self) -> None:
        """Write the snapshot now if the mirror is at a newer version, however few rows changed,
        and wait for it: a long-lived process going away (the resident service, idle) leaves
        the next new process a snapshot that serves it without LanceDB (`_open_current`)."""
        self.wait_for_snapshot()
        with self._lock:
            if self._version >= 0 and self._version != self._snap_version:
                self._maybe_snapshot(now=True)
        self.wait_for_snapshot()

    def _maybe_snapshot(self, *, now: bool = False) -> None:
        """Write the snapshot when due (`now`: whenever it is of another version), off the
        request path: what it needs is captured now, under the caller's lock (copies of the
        arrays patched in place), and a thread writes it while the query goes on. The thread
        is not a daemon, so a CLI process finishes the write before it exits; a process killed
        meanwhile leaves the previous snapshot in force."""
        if self._snapshots is None or len(self.pos_of) < self._snapshot_min_rows:
            return
        if self._snap_version is not None and not now:
            stale = max(SNAPSHOT_STALE_ROWS, SNAPSHOT_STALE_SHARE * len(self.pos_of))
            if self._version == self._snap_version or self._reread_since_snap < stale:
                self._maybe_tail()
                return
        if self._writer is not None and self._writer.is_alive():
            return  # the next refresh tries again once it is done
        snap = self.snapshot()  # (the caller holds the lock)
        # Tried or written: the next attempt waits for as many changed rows again.
        self._snap_version, self._reread_since_snap = snap.version, 0.0
        scratch, self._scratch = self._scratch, None  # (the writer removes it when done)
        self._writer = threading.Thread(
            target=self._write_snapshot,
            args=(self._snapshots, snap, scratch),
            name="octobrain-snapshot",
        )
        self._writer.start()

    def _maybe_tail(self) -> None:
        """Leave the catch-ups since the snapshot beside it (`memory.tail`) when the mirror
        moved past the versions a tail was last left at, on the snapshot writer's thread."""
        source, steps, edges = self._source, self._steps, self._edges
        if not self.leave_tails or source is None or source.where is None or steps is None:
            return
        if (self._version, edges.version) == self._tail_at:
            return
        if self._writer is not None and self._writer.is_alive():
            return  # the next refresh tries again once it is done
        moved_edges = None if edges.version == source.edges_version else edges.table
        if moved_edges is not None and moved_edges.nbytes > tail.MAX_EDGES_BYTES:
            return  # (the edges go whole: past this, the next process reads the store)
        fingerprint = self._store.version_fingerprint(self._version)
        if fingerprint is None:
            return
        left = tail.Tail(
            version=self._version,
            fingerprint=fingerprint,
            steps=list(steps),
            edges=moved_edges,
            edges_version=edges.version,
            edges_mark=edges.mark,
        )
        self._tail_at = (self._version, edges.version)
        self._writer = threading.Thread(
            target=self._write_tail, args=(source.where, left), name="octobrain-snapshot"
        )
        self._writer.start()

    @staticmethod
    def _write_tail(where: Path, left: tail.Tail) -> None:
        try:
            tail.write(where, left)
        except OSError as exc:  # a full or read-only cache, or the snapshot removed meanwhile
            log.info("memory snapshot tail not written: %s", exc)

    def _write_snapshot(
        self, snapshots: SnapshotDir, snap: Snapshot, scratch: Path | None = None
    ) -> None:
        try:
            snapshots.write(snap)
        except OSError as exc:  # a full or read-only cache never fails a query
            log.warning("memory snapshot not written: %s", exc)
        except SnapshotDamaged as exc:  # what it was made from: the next query rebuilds
            log.warning("memory snapshot damaged (%s); rebuilding from the store", exc)
            self._damaged = True
        else:
            self._written = True  # the next refresh may read it instead of what it holds
        finally:
            if scratch is not None:
                build.remove_scratch(scratch)

    def wait_for_snapshot(self) -> None:
        """Block until a snapshot being written in the background is in place (or failed)."""
        writer = self._writer
        if writer is not None:
            writer.join()

    def snapshot(self) -> Snapshot:
        """The mirror as it is now, for `SnapshotDir.write` (nothing in it changes later)."""
        self._index_ids()
        return Snapshot(
            version=self._version,
            rows=self.rows(),  # (immutable: written as its chunks, by the writer's thread)
            vectors=self.vectors.blocks()[0],
            vector_blocks=self.vectors.blocks(),
            columns={
                "live": self._live.copy(),
                "edit_key": self._edit_key,
                "rowaddr": self._addr.copy(),
                "access_count": self._access.copy(),
                "last_accessed": self._seen.copy(),
                "created": self._created,
                **self._coded,
            },
            codes={k: list(v) for k, v in self._codes.items()},
            sorted_ids=self._sorted_ids,
            id_order=self._id_order,
            index=self.index.frozen(),
            checks=None if self._source is None else self._source.checks,
            mark=self._mark,
            fingerprint=self._store.version_fingerprint(self._version),
            edges=self._edges.table,
            edges_version=self._edges.version,
            edges_mark=self._edges.mark,
        )

    def discard_snapshot(self) -> None:
        """The snapshot this mirror reads from was found damaged: stop every process from
        opening it, and empty the mirror (the next refresh rebuilds from the store)."""
        with self._lock:
            self._discard()

    def _discard(self) -> None:
        if self._source is not None and self._snapshots is not None:
            self._snapshots.discard(self._source)
        self._reset()

    def _refresh_rows(self, version: int) -> None:
        if version == self._version:
            return
        # Every read below sees `version`, however many commits other processes make meanwhile.
        pinned = self._store.pinned(version)
        if not len(self._live):
            count = pinned.count()
            if count:
                self._build(pinned, version, count)
                return
        delta = None
        if len(self.pos_of) and 0 <= self._version < version:
            removed = self._store.changes_since("memories", self._version)
            delta = catchup.cheap(self, pinned, removed)
        if delta is None:
            delta = catchup.full(self, pinned)
        self.last_catch_up = "changes" if delta.cheap else "every row"
        total = len(self.pos_of) + len(delta.read)
        rows = delta.rows
        if rows is None and delta.read:
            rows = read_rows(pinned, delta.read, total)
        step = tail.Step(
            version=version,
            gone=delta.gone,
            moved=delta.moved,
            moved_addr=delta.moved_addr,
            moved_access=delta.moved_access,
            moved_seen=delta.moved_seen,
            mark=delta.mark,
            cheap=delta.cheap,
            rows=rows,
        )
        self._apply(step)
        if self._steps is not None:
            self._steps.append(step)
            if self._reread_since_snap >= SNAPSHOT_STALE_ROWS:
                self._steps = None  # (a rewrite of the whole snapshot is due instead)

    def _apply(self, step: tail.Step) -> None:
        """Bring the mirror to `step.version` by what a catch-up found changed: the same
        positions come out of the same steps (`memory.tail` replays them)."""
        rows = step.rows
        self._remove(step.gone)
        if rows is not None and len(rows):
            addrs = int64s(rows.column(catchup.ADDR))
            self._add(rows.drop_columns(["embedding"]), vectors_of(rows), addrs)
        if len(step.moved):
            self._addr[step.moved] = step.moved_addr
            self._by_addr.changed(step.moved, self._addr)
            self._patch_access(step.moved, step.moved_access, step.moved_seen)
        # A moved row (an access counted, compaction) costs an opening process far less than a
        # re-read one (its narrow columns, no text to index): it weighs a quarter.
        self._reread_since_snap += (0 if rows is None else len(rows)) + len(step.moved) / 4
        if not step.cheap:
            self._reread_since_snap += SNAPSHOT_STALE_ROWS
        self._mark = step.mark
        if len(self._live) > 1000 and len(self.pos_of) < len(self._live) // 2:
            self._rebuild()
        self._version = step.version

    def _build(self, pinned: Pinned, version: int, rows: int) -> None:
        """Read every row (`rows` of them) into the empty mirror, in bounded memory
        (`memory.build`); when a snapshot will be written, its vectors go to a scratch file
        that the snapshot takes."""
        snap, scratch = None, None
        if self._snapshots is not None and rows >= self._snapshot_min_rows:
            try:
                scratch = self._snapshots.scratch()
                snap = build.build(pinned, version, self._store.dim, scratch=scratch)
            except BaseException as exc:
                if scratch is not None:
                    build.remove_scratch(scratch)
                if not isinstance(exc, OSError):
                    raise
                # A full or read-only cache never fails a query: the mirror is built in memory.
                log.warning("memory mirror not built beside the snapshots: %s", exc)
                scratch = None
        if snap is None:
            snap = build.build(pinned, version, self._store.dim)
        edges = self._edges
        self._reset(snap)
        # Built, not opened: the mirror reads no snapshot's files, and one is due.
        self._source = self._snap_version = None
        self.opened_snapshot, self._edges, self._scratch = False, edges, scratch
        self.last_catch_up = "every row"
        self._reread_since_snap = len(snap.rows) + SNAPSHOT_STALE_ROWS

    def _lookup(self, ids: pa.ChunkedArray) -> npt.NDArray[np.int64]:
        """The live position of each id, -1 for ids the mirror does not hold."""
        if not len(self._live):
            return np.full(len(ids), -1, dtype=np.int64)
        held = pc.if_else(pa.array(self._live), self.rows().column("id"), None)
        found = pc.fill_null(pc.index_in(ids, value_set=held.combine_chunks()), -1)
        return np.asarray(found.to_numpy(zero_copy_only=False), dtype=np.int64)

    def _patch_access(
        self, at: npt.NDArray[np.int64], counts: npt.NDArray[np.int64], seen: npt.NDArray[np.int64]
    ) -> None:
        self._access[at], self._seen[at] = counts, seen
        for p in at.tolist():
            memory = self._cache.get(p)
            if memory is not None:
                memory.access_count, memory.last_accessed = (
                    int(self._access[p]),
                    from_micros(self._seen[p]),
                )

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
                self._patch_access(where, counts, np.full(len(at), micros(now), np.int64))
            if version is not None:
                self._version = version

    def _apply_kept_access(self) -> None:
        """Count what processes before this one kept for the next commit (`store.accessed`),
        as that commit will: each id once, unless accessed within the window."""
        kept = self._store.kept_access()
        if kept is None:
            return
        where = self.pos_of.many(kept.ids)
        where = where[where >= 0]
        cutoff = micros(kept.at - kept.window)
        due = where[(self._access[where] == 0) | (self._seen[where] < cutoff)]
        if len(due):
            self._patch_access(due, self._access[due] + 1, np.full(len(due), micros(kept.at)))

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

    def edges_of_kinds(self, kinds: Sequence[str]) -> tuple[list[str], list[str], list[str]]:
        """Sources, targets and types of every edge of the types `kinds`
        (`EdgeMirror.of_kinds`)."""
        return self._edges.of_kinds(kinds)

    def _remove(self, positions: npt.NDArray[np.int64]) -> None:
        if not len(positions):
            return
        self.index.remove(positions)
        self._live[positions] = False
        for p in positions.tolist():
            self._cache.pop(p, None)

    def _add(
        self, rows: pa.Table, block: npt.NDArray[np.float32], addrs: npt.NDArray[np.int64]
    ) -> None:
        if not len(rows):
            return
        rows = rows.select(LIGHT_COLUMNS).cast(self._rows.schema) if len(self._rows) else rows
        rows = rows.select(LIGHT_COLUMNS)
        texts = texts_of(rows)
        start = int(self.index.add(texts)[0])
        assert start == len(self._live), "BM25 positions and the mirror's rows disagree"
        self._rows = pa.concat_tables([self._rows, rows]) if len(self._rows) else rows
        if self._rows.column("id").num_chunks > _MAX_CHUNKS:
            head, tail = self._rows.slice(0, self._base_len), self._rows.slice(self._base_len)
            self._rows = pa.concat_tables([head, tail.combine_chunks()])
        self.vectors.append(block)
        n = len(rows)
        grow = self._grow
        self._live = grow("live", self._live, np.ones(n, dtype=bool))
        self._edit_key = grow("edit", self._edit_key, int64s(rows.column("updated_at")))
        self._addr = grow("addr", self._addr, np.asarray(addrs, dtype=np.int64))
        self._by_addr.changed(np.arange(start, start + n, dtype=np.int64), self._addr)
        self._access = grow("access", self._access, int64s(rows.column("access_count")))
        self._seen = grow("seen", self._seen, int64s(rows.column("last_accessed")))
        self._created = grow("created", self._created, int64s(rows.column("created_at")))
        for name, column in CODED.items():
            codes = [self._code(name, v) for v in rows.column(column).to_pylist()]
            self._coded[name] = grow(name, self._coded[name], np.asarray(codes, np.int32))
        for i, mid in enumerate(rows.column("id").to_pylist()):
            self._added[mid] = start + i
        if len(self._added) > _MAX_ADDED:
            self._index_ids()
        self._lists.clear()

    def _grow(self, name: str, head: npt.NDArray[Any], tail: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """`head` then `tail`, as a view of a buffer with room to spare: appending a row to a
        1M-row mirror copied its nine per-position arrays (about 10 ms a commit). A view handed
        out earlier (to a snapshot being written) keeps its length, so it never sees the tail."""
        n, k = len(head), len(tail)
        held = self._buffers.get(name)
        if held is not None and held[1] is head and len(held[0]) >= n + k:
            buffer = held[0]
        else:
            buffer = np.empty(n + k + max(1024, (n + k) // 4), dtype=head.dtype)
            buffer[:n] = head
        buffer[n : n + k] = tail
        view = buffer[: n + k]
        self._buffers[name] = (buffer, view)
        return view

    def _index_ids(self) -> None:
        """Sort the live ids (id → position by binary search); empties `_added`."""
        self._sorted_ids, self._id_order = sorted_ids(self.rows().column("id"), self._live)
        self._added = {}

    def _code(self, name: str, value: str) -> int:
        code = self._code_of[name].get(value)
        if code is None:
            code = self._code_of[name][value] = len(self._codes[name])
            self._codes[name].append(value)
        return code

    def _rebuild(self) -> None:
        """Drop tombstones: re-index the live rows at fresh, dense positions."""
        live = np.flatnonzero(self._live)
        rows = self.rows().take(pa.array(live))
        vectors = self.vectors[live]
        kept = self._version, self._mark, self._edges
        access, seen, addrs = self._access[live], self._seen[live], self._addr[live]
        self._reset()
        self._add(rows, vectors, addrs)
        self._access[:], self._seen[:] = access, seen  # patched counts, newer than the rows
        self._version, self._mark, self._edges = kept

    # ---- queries --------------------------------------------------------------------------

    def _codes_for(self, name: str, values: Sequence[str]) -> list[int]:
        return [self._code_of[name][v] for v in values if v in self._code_of[name]]

    def _coded_in(self, name: str, values: Sequence[str]) -> npt.NDArray[np.bool_]:
        """Positions whose coded column `name` holds one of `values`: one comparison per
        value (a filter names a few), several times faster than `np.isin` at a million rows."""
        column = self._coded[name]
        hit = np.zeros(len(column), dtype=bool)
        for code in dict.fromkeys(self._codes_for(name, values)):
            hit |= column == code
        return hit

    def in_scopes(
        self, positions: npt.NDArray[np.int64], scopes: Sequence[str]
    ) -> npt.NDArray[np.bool_]:
        """Whether each of `positions` (-1: none) holds a row of one of `scopes`, read off the
        coded scope column (no row is built)."""
        codes = np.asarray(self._codes_for("scope", scopes), dtype=self._coded["scope"].dtype)
        held = positions >= 0
        out = np.zeros(len(positions), dtype=bool)
        out[held] = np.isin(self._coded["scope"][positions[held]], codes)
        return out

    def seen_by(self, scopes: Sequence[str]) -> npt.NDArray[np.bool_]:
        """A mask over positions of every live row of `scopes`, in any state: the rows whose
        words a search from those scopes is scored by (`BM25Index.search`'s `seen`), so that
        how rare a word is counts only what the asker may see, and no other project's rows
        move its ranking or its relevance."""
        return self._live & self._coded_in("scope", scopes)

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
        mask = self._live & self._coded_in("scope", scopes)
        mask &= self._coded_in("state", states)
        if memory_types:
            mask &= self._coded_in("type", memory_types)
        if created_after is not None:
            mask &= self._created >= micros(created_after)
        if created_before is not None:
            mask &= self._created < micros(created_before)
        for wanted, column in ((tags, "tags"), (related_files, "related_files")):
            if wanted:  # any of the wanted values
                mask &= self._any_of(column, set(wanted))
        return mask

    def _any_of(self, column: str, wanted: set[str]) -> npt.NDArray[np.bool_]:
        """Positions whose list `column` holds any of `wanted` (from cached encodings of the
        list values, one per Arrow chunk)."""
        hit = np.zeros(len(self._live), dtype=bool)
        start = 0
        for i, chunk in enumerate(self.rows().column(column).chunks):
            if not pa.types.is_list(chunk.type):  # an empty store's column has no type yet
                start += len(chunk)
                continue
            key = (column, i)
            if key not in self._lists:  # (the rows only change in `_add`, which clears it)
                encoded = pc.dictionary_encode(pc.list_flatten(chunk))
                values = encoded.dictionary.to_pylist()
                parents = np.asarray(pc.list_parent_indices(chunk), dtype=np.int32)
                codes = np.asarray(encoded.indices, dtype=np.int32)
                self._lists[key] = (np.stack([codes, parents]), values)
            codes_parents, values = self._lists[key]
            want = [j for j, v in enumerate(values) if v in wanted]
            if want:
                sel = np.isin(codes_parents[0], want)
                hit[start + codes_parents[1][sel]] = True
            start += len(chunk)
        return hit

    def nearest(
        self, vector: npt.NDArray[np.float32], allowed: npt.NDArray[np.bool_], k: int
    ) -> list[int]:
        """Exact top-`k` positions by cosine among `allowed`."""
        from octobrain.kernels.hybrid import exact_top

        return exact_top(self.vectors.cosines(vector), allowed, k)

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
        the ids (a list), and one array each of state, type, scope and source (strings),
        importance (as `row_to_memory` rounds it), created and last-accessed time (integer
        microseconds) and access count."""
        rows = self._take(positions, ["id", "source", "importance"])
        out: dict[str, Any] = {"id": rows.column("id").to_pylist()}
        source = pc.dictionary_encode(rows.column("source")).combine_chunks()
        names = np.asarray(source.dictionary.to_pylist(), dtype=object)
        out["source"] = names[source.indices.to_numpy(zero_copy_only=False)]
        imp = rows.column("importance").to_numpy(zero_copy_only=False)
        values, where = np.unique(imp, return_inverse=True)  # few distinct values, rounded once
        out["importance"] = np.asarray([stored_float(v) for v in values], np.float64)[where]
        for name in _CODED:
            values = np.asarray(self._codes[name], dtype=object)
            out[name] = values[self._coded[name][positions]]
        out["created"] = self._created[positions]
        out["last_accessed"] = self._seen[positions]
        out["access_count"] = self._access[positions]
        return out

    def _take(
        self, positions: Sequence[int] | npt.NDArray[np.int64], columns: Sequence[str] | None = None
    ) -> pa.Table:
        """The rows at `positions`, in order, taken chunk by chunk. Arrow's take on a table of
        several chunks (the snapshot's rows, then the rows read since) first copies every
        chunk into one: at 100k memories, 83 MB copied by each query of a resident service
        that had caught up, and every page of the snapshot's mapped rows made resident."""
        rows = self.rows() if columns is None else self.rows().select(list(columns))
        at = np.asarray(positions, dtype=np.int64)
        batches = rows.to_batches()
        if len(batches) <= 1:
            return rows.take(pa.array(at, pa.int64()))
        starts = np.cumsum([0, *(b.num_rows for b in batches)])
        chunk = np.searchsorted(starts, at, side="right") - 1
        order = np.argsort(chunk, kind="stable")
        parts = [
            batches[c].take(pa.array(at[order][chunk[order] == c] - starts[c], pa.int64()))
            for c in np.unique(chunk).tolist()
        ]
        taken = pa.Table.from_batches(parts, schema=rows.schema).combine_chunks()  # (few rows)
        back = np.empty_like(order)
        back[order] = np.arange(len(order))
        return taken.take(pa.array(back, pa.int64()))

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
            rows = self._take(missing).to_pylist()
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
