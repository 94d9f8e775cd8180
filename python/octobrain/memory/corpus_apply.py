"""How the mirror (`Corpus`) changes: a catch-up's step applied (`tail.Step`: the rows dropped,
the rows read appended to the BM25 index, the vectors and the per-position arrays, the rows
that only moved patched), the whole store read into an empty mirror (`memory.build`), and the
live rows re-indexed at dense positions once half the positions are tombstones. It also
counts the rows re-read since the snapshot, which tells `memory.corpus_snapshot` when one is
due.

These functions take the `Corpus` whose state they change, under its lock.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from octobrain.memory import build, catchup, tail
from octobrain.memory.corpus_io import (
    CODED,
    LIGHT_COLUMNS,
    int64s,
    read_rows,
    texts_of,
    vectors_of,
)
from octobrain.memory.rows_check import merged_rows
from octobrain.store.pinned import Pinned
from octobrain.times import from_micros

if TYPE_CHECKING:
    from octobrain.memory.corpus import Corpus

log = logging.getLogger(__name__)

_MAX_ADDED = 4096  # ids held in a dict before they are sorted in with the rest
_MAX_CHUNKS = 32  # appended Arrow chunks before they are merged into one
# A snapshot is rewritten once this many rows (or this share of them) were re-read since it
# (a process opening it re-reads them too; a row that only moved, as after an access count or
# compaction, counts a quarter), or after a catch-up that read every row (the next open would).
SNAPSHOT_STALE_ROWS, SNAPSHOT_STALE_SHARE = 256, 0.01


def stale_rows(c: Corpus) -> float:
    """How many re-read rows make the snapshot due for a rewrite; until then the catch-ups
    are left beside it as a tail (`memory.tail`). One bound for both: past 25,600 memories,
    dropping the tail at 256 rows while the rewrite waited for 1% of the rows left neither,
    and every new process caught up through LanceDB."""
    return max(SNAPSHOT_STALE_ROWS, SNAPSHOT_STALE_SHARE * len(c.pos_of))


def refresh_rows(c: Corpus, version: int) -> None:
    if version == c._version:
        return
    # Every read below sees `version`, however many commits other processes make meanwhile.
    pinned = c._store.pinned(version)
    if not len(c._live):
        count = pinned.count()
        if count:
            _build(c, pinned, version, count)
            return
    delta = None
    if len(c.pos_of) and 0 <= c._version < version:
        removed = c._store.changes_since("memories", c._version)
        delta = catchup.cheap(c, pinned, removed)
    if delta is None:
        delta = catchup.full(c, pinned)
    c.last_catch_up = "changes" if delta.cheap else "every row"
    total = len(c.pos_of) + len(delta.read)
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
    apply(c, step)
    if c._steps is not None:
        c._steps.append(step)
        if c._reread_since_snap >= stale_rows(c):
            c._steps = None  # (a rewrite of the whole snapshot is due instead)


def replay(c: Corpus, steps: list[tail.Step]) -> None:
    """`apply` each step in order, as one for each run of steps that only appended rows (a
    write each: a tail left after many writes applied one at a time cost as much again per
    write as the write's own catch-up). Appending them at once gives every row the position
    it gets one step at a time."""
    run: list[tail.Step] = []
    for step in [*steps, None]:
        if step is not None and step.cheap and not len(step.gone) and not len(step.moved):
            run.append(step)
            continue
        if run:
            with_rows = [s.rows for s in run if s.rows is not None and len(s.rows)]
            rows = pa.concat_tables(with_rows, promote_options="default") if with_rows else None
            apply(c, replace(run[-1], rows=rows))
            run = []
        if step is not None:
            apply(c, step)


def apply(c: Corpus, step: tail.Step) -> None:
    """Bring the mirror to `step.version` by what a catch-up found changed: the same
    positions come out of the same steps (`memory.tail` replays them)."""
    rows = step.rows
    _remove(c, step.gone)
    if rows is not None and len(rows):
        addrs = int64s(rows.column(catchup.ADDR))
        add(c, rows.drop_columns(["embedding"]), vectors_of(rows), addrs)
    if len(step.moved):
        c._addr[step.moved] = step.moved_addr
        c._by_addr.changed(step.moved, c._addr)
        patch_access(c, step.moved, step.moved_access, step.moved_seen)
    # A moved row (an access counted, compaction) costs an opening process far less than a
    # re-read one (its narrow columns, no text to index): it weighs a quarter.
    c._reread_since_snap += (0 if rows is None else len(rows)) + len(step.moved) / 4
    if not step.cheap:
        c._reread_since_snap += stale_rows(c)
    c._mark = step.mark
    if len(c._live) > 1000 and len(c.pos_of) < len(c._live) // 2:
        _rebuild(c)
    c._version = step.version


def _build(c: Corpus, pinned: Pinned, version: int, rows: int) -> None:
    """Read every row (`rows` of them) into the empty mirror, in bounded memory
    (`memory.build`); when a snapshot will be written, its vectors go to a scratch file
    that the snapshot takes."""
    snap, scratch = None, None
    if c._snapshots is not None and rows >= c._snapshot_min_rows:
        try:
            scratch = c._snapshots.scratch()
            snap = build.build(pinned, version, c._store.dim, scratch=scratch)
        except BaseException as exc:
            if scratch is not None:
                build.remove_scratch(scratch)
            if not isinstance(exc, OSError):
                raise
            # A full or read-only cache never fails a query: the mirror is built in memory.
            log.warning("memory mirror not built beside the snapshots: %s", exc)
            scratch = None
    if snap is None:
        snap = build.build(pinned, version, c._store.dim)
    edges = c._edges
    c._reset(snap)
    # Built, not opened: the mirror reads no snapshot's files, and one is due.
    c._source = c._snap_version = None
    c.opened_snapshot, c._edges, c._scratch = False, edges, scratch
    c.last_catch_up = "every row"
    c._reread_since_snap = len(snap.rows) + SNAPSHOT_STALE_ROWS


def patch_access(
    c: Corpus, at: npt.NDArray[np.int64], counts: npt.NDArray[np.int64], seen: npt.NDArray[np.int64]
) -> None:
    c._access[at], c._seen[at] = counts, seen
    for p in at.tolist():
        memory = c._cache.get(p)
        if memory is not None:
            memory.access_count, memory.last_accessed = (
                int(c._access[p]),
                from_micros(c._seen[p]),
            )


def _remove(c: Corpus, positions: npt.NDArray[np.int64]) -> None:
    if not len(positions):
        return
    c.index.remove(positions)
    c._live[positions] = False
    for p in positions.tolist():
        c._cache.pop(p, None)


def add(
    c: Corpus, rows: pa.Table, block: npt.NDArray[np.float32], addrs: npt.NDArray[np.int64]
) -> None:
    if not len(rows):
        return
    rows = rows.select(LIGHT_COLUMNS)
    if len(c._rows):
        rows = rows.cast(c._rows.schema)
    texts = texts_of(rows)
    start = int(c.index.add(texts)[0])
    assert start == len(c._live), "BM25 positions and the mirror's rows disagree"
    c._rows = pa.concat_tables([c._rows, rows]) if len(c._rows) else rows
    if c._rows.column("id").num_chunks > _MAX_CHUNKS:
        head, tail = c._rows.slice(0, c._base_len), c._rows.slice(c._base_len)
        c._rows = pa.concat_tables([head, tail.combine_chunks()])
    c.vectors.append(block)
    n = len(rows)
    c._live = _grow(c, "live", c._live, np.ones(n, dtype=bool))
    c._edit_key = _grow(c, "edit", c._edit_key, int64s(rows.column("updated_at")))
    c._addr = _grow(c, "addr", c._addr, np.asarray(addrs, dtype=np.int64))
    c._by_addr.changed(np.arange(start, start + n, dtype=np.int64), c._addr)
    c._access = _grow(c, "access", c._access, int64s(rows.column("access_count")))
    c._seen = _grow(c, "seen", c._seen, int64s(rows.column("last_accessed")))
    c._created = _grow(c, "created", c._created, int64s(rows.column("created_at")))
    for name, column in CODED.items():
        codes = [_code(c, name, v) for v in rows.column(column).to_pylist()]
        c._coded[name] = _grow(c, name, c._coded[name], np.asarray(codes, np.int32))
    for i, mid in enumerate(rows.column("id").to_pylist()):
        c._added[mid] = start + i
    if len(c._added) > _MAX_ADDED:
        c._index_ids()
    c._lists.clear()


def _grow(c: Corpus, name: str, head: npt.NDArray[Any], tail: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """`head` then `tail`, as a view of a buffer with room to spare: appending a row to a
    1M-row mirror copied its nine per-position arrays (about 10 ms a commit). A view handed
    out earlier (to a snapshot being written) keeps its length, so it never sees the tail."""
    n, k = len(head), len(tail)
    held = c._buffers.get(name)
    if held is not None and held[1] is head and len(held[0]) >= n + k:
        buffer = held[0]
    else:
        buffer = np.empty(n + k + max(1024, (n + k) // 4), dtype=head.dtype)
        buffer[:n] = head
    buffer[n : n + k] = tail
    view = buffer[: n + k]
    c._buffers[name] = (buffer, view)
    return view


def _code(c: Corpus, name: str, value: str) -> int:
    code = c._code_of[name].get(value)
    if code is None:
        code = c._code_of[name][value] = len(c._codes[name])
        c._codes[name].append(value)
    return code


def _rebuild(c: Corpus) -> None:
    """Drop tombstones: re-index the live rows at fresh, dense positions."""
    live = np.flatnonzero(c._live)
    # (a snapshot's rows read verified, not through the mapping: `merged_rows`)
    rows = merged_rows(c._rows, c._source.rows_file if c._source is not None else None, live)
    vectors = c.vectors[live]
    kept = c._version, c._mark, c._edges
    access, seen, addrs = c._access[live], c._seen[live], c._addr[live]
    c._reset()
    add(c, rows, vectors, addrs)
    c._access[:], c._seen[:] = access, seen  # patched counts, newer than the rows
    c._version, c._mark, c._edges = kept
