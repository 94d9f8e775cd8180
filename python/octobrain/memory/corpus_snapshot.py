"""The mirror's snapshot (`Corpus`, `memory.snapshot`), as the mirror uses it: a new process
opens it, and replays the tail an earlier process left beside it (`memory.tail`), instead of
reading and indexing the whole store; a process that caught up far enough writes it anew off
the request path, or leaves a tail of its catch-ups beside it (a process that wrote, as it
ends: `leave_tail`); a mirror adopts the snapshot it wrote once it is in place; a damaged one
is discarded, and the mirror rebuilt from the store.

These functions take the `Corpus` whose state they read and change, under its lock (`save`
takes it).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from octobrain.errors import OctobrainError
from octobrain.heap import collect_later
from octobrain.memory import build, corpus_apply, tail
from octobrain.memory.edges import EdgeMirror
from octobrain.memory.page_check import SnapshotDamaged
from octobrain.memory.snapshot import Snapshot, SnapshotDir
from octobrain.store import operations

if TYPE_CHECKING:
    from octobrain.memory.corpus import Corpus

log = logging.getLogger(__name__)


def open_current(c: Corpus) -> bool:
    """A new process's first read, served by the snapshot without opening LanceDB, when it
    is of the versions the newest manifests of both tables on disk name and its store is
    this one by its fingerprint (`MemoryStore.versions_on_disk`; importing LanceDB alone
    took a third of such a process). Else what it adopted stays, and the caller catches
    up from there through LanceDB as before."""
    on_disk = c._store.versions_on_disk()
    if on_disk is None or not adopt_snapshot(c, on_disk[0]):
        return False
    source = c._source
    recorded = None if source is None else source.data_files
    newest = (c._version, c._edges.version) == on_disk
    if not newest:
        replayed = replay_tail(c, *on_disk)
        if replayed is not None:
            recorded = replayed.data_files
            newest = (c._version, c._edges.version) == on_disk
    check_data_files(c, recorded, newest=newest)
    if (c._version, c._edges.version) != on_disk:
        return False
    c._apply_kept_access(c._store.kept_access())
    fingerprint = c._store.version_fingerprint(c._version)
    c._served = None if fingerprint is None else (*on_disk, fingerprint)
    return True


def unchanged_on_disk(c: Corpus) -> bool:
    """Whether a mirror `open_current` served, and nothing caught up since, is still of the
    store's newest versions, told from the files as `open_current` told them (the version
    folders, and the fingerprint of that version's Lance manifest): a long-lived process
    that has not opened LanceDB (an in-process `octobrain mcp` server, its mirror opened by
    the warm-up) then answers its next read without importing it, which took half of its
    first `remember`. Accesses other processes kept since are applied, as `open_current`
    applies them; anything else (a commit since, this process's own included, a store that
    only an open can tell) is caught up through LanceDB as before."""
    served = c._served
    if served is None or c._store.connected or (c._version, c._edges.version) != served[:2]:
        return False
    if c._store.versions_on_disk() != served[:2]:
        return False
    if c._store.version_fingerprint(c._version) != served[2]:
        return False
    c._apply_kept_access(c._store.kept_access())
    return True


def serve_current(c: Corpus) -> bool:
    """Open a mirror not opened yet from a current snapshot (`open_current`), for a read the
    store answers otherwise (`memory.snapshot_reads`); whether it is served so. Damage found
    in the snapshot, or in the files it names, leaves the mirror empty: the caller's read of
    the store then says what it finds, as before."""
    with c._lock:
        if c._version != -1 or c._snapshots is None:
            return False
        try:
            return open_current(c)
        except SnapshotDamaged:
            discard(c)
        except OctobrainError:
            c._reset()
        return False


def leave_tail(c: Corpus) -> None:
    """After this process committed to the store: catch a mirror a snapshot keeps up with
    the store and leave what it applied beside the snapshot (`maybe_tail`, or the whole
    snapshot when due), and wait for it. The first new process after a write caught up
    through LanceDB itself, importing it (a third of such a process), where the writer had it
    open already. Nothing when no snapshot keeps the mirror (none is built for this), or it
    is current already."""
    if not c.leave_tails or c._snapshots is None:
        return
    if serve_current(c) or not c.reads_snapshot:
        return
    c.refresh()
    c.wait_for_snapshot()


def check_data_files(
    c: Corpus, recorded: dict[str, list[operations.DataFile]] | None, *, newest: bool
) -> None:
    """Refuse (`TableDamaged`) to answer from the snapshot when a data or deletion file the
    store's newest versions read is gone or cut (a stat and a footer read each, no
    LanceDB): the snapshot still held every row, so `remember`, `brief` and the session
    hooks answered as if nothing were wrong, while `stats`, `get` and every write said the
    store was damaged. `recorded` are the files the snapshot recorded for its versions, or
    the tail replayed after it for its own (`newest`: they are the newest versions'); a file
    gone counts only then (else a clean-up may have removed it since, and the catch-up
    through LanceDB reads what the newest versions do). A file written since its time was
    recorded (changed in place, its size and footer intact) is `SnapshotDamaged`: its copy of
    the rows is not the store's now, and the store's read says what it finds."""
    from octobrain.store import manifest

    if recorded is None:
        return
    location = c._store.location
    written = None
    for name, files in recorded.items():
        damage, since = operations.checked_among(location, name, files, gone=newest)
        if damage is not None:
            raise manifest.TableDamaged(location, name, damage)
        written = written or since
    if written is not None:
        raise SnapshotDamaged(written)


def _data_files(
    c: Corpus,
    version: int,
    edges_version: int,
    recorded: dict[str, list[operations.DataFile]] | None = None,
) -> dict[str, list[operations.DataFile]] | None:
    """The data files `version` of `memories` and `edges_version` of `relationships` read,
    from the tables' manifests (on a writer's thread: `check_data_files` reads them back
    without importing protobuf), each with its time as it is now, or as `recorded` (the
    snapshot a tail follows) holds it; None when they cannot be told."""
    from octobrain.store.schema import MEMORIES, RELATIONSHIPS

    location = c._store.location
    if location.path is None or edges_version < 0:
        return None
    found = {
        MEMORIES: operations.data_files(location, MEMORIES, version),
        RELATIONSHIPS: operations.data_files(location, RELATIONSHIPS, edges_version),
    }
    if any(files is None for files in found.values()):
        return None
    times = {
        (name, f[0]): f[2] for name, files in (recorded or {}).items() for f in files if len(f) > 2
    }
    return {
        name: [
            (f[0], f[1], times[name, f[0]]) if (name, f[0]) in times else f
            for f in operations.stamped(location, name, files or ())
        ]
        for name, files in found.items()
    }


def replay_tail(c: Corpus, version: int, edges_version: int) -> tail.Tail | None:
    """Catch up from the snapshot just adopted towards `version` by the tail a process that
    caught up before left beside it (`memory.tail`): of exactly that store version, or an
    older one (the caller then catches up the rest through LanceDB, rather than every write
    since the snapshot again); else the mirror stays at the snapshot's version. The tail
    replayed, or None."""
    source = c._source
    if source is None or source.where is None:
        return None
    found = tail.newest(source.where, version)
    if found is None or found.fingerprint != c._store.version_fingerprint(found.version):
        return None
    edges_at = found.edges_version if found.edges is not None else source.edges_version
    if edges_at != edges_version and (found.version == version or edges_at > edges_version):
        return None
    try:
        corpus_apply.replay(c, found.steps)
    except Exception as exc:  # (checked, yet it does not fit: start again from the snapshot)
        log.warning("memory snapshot tail not used (%s); catching up from the store", exc)
        c._reset()
        adopt_snapshot(c, -1)
        return None
    if found.edges is not None:
        c._edges = EdgeMirror(found.edges, found.edges_version, found.edges_mark)
    c._steps, c._tail_at = list(found.steps), (found.version, edges_at)
    return found


def adopt_snapshot(c: Corpus, latest: int) -> bool:
    """Read from the current snapshot unless it is another store's; True when its store
    was confirmed by the fingerprint of its version's Lance manifest."""
    assert c._snapshots is not None
    for _ in range(2):  # the current one, or the one that replaced it meanwhile
        snap = c._snapshots.load()
        if snap is None:
            return False
        theirs = snap.fingerprint and c._store.version_fingerprint(snap.version)
        if theirs and theirs != snap.fingerprint:
            # Another store now lives at this URI (replaced, re-created): its version of the
            # same number names other files. Never served, however well its counts agree.
            log.warning("memory snapshot is of another store at this location; rebuilding")
            return False
        live = int(np.count_nonzero(snap.columns["live"]))
        # (A manifest that matches names the same files: only without one is the count
        # asked of the store.)
        if not theirs and snap.version == latest and live != c._store.count():
            log.warning("memory snapshot disagrees with the store; rebuilding")
            return False  # another table under the same name: never served
        if adopt(c, snap):
            return bool(theirs)
    return False


def adopt(c: Corpus, snap: Snapshot) -> bool:
    """Read from `snap`; False (the mirror left empty) when its files went away after its
    manifest was read: another process wrote a newer snapshot and removed the others, and
    what this one had not opened yet (its vectors) is gone with them."""
    try:
        c._reset(snap)
    except FileNotFoundError:
        log.info("memory snapshot replaced while it was being opened")
        c._reset()
        return False
    return True


def adopt_written(c: Corpus) -> None:
    """A mirror reads the snapshot it wrote once it is in place, instead of what it built
    or caught up with: the rows, vectors and index it built from the store (most of a
    building process's memory: a resident service at 100k kept 1 GB more than one that
    opened the snapshot), or the older snapshot it opened, whose every page the write
    made resident, and the rows it read since, are dropped; the catch-up goes on from the
    snapshot's version as in any process that opened it."""
    assert c._snapshots is not None
    c._written = False
    snap = c._snapshots.load()
    if snap is not None and snap.version <= c._version:
        opened = c.opened_snapshot
        if not adopt(c, snap):
            return  # (then read as a new process would: the current snapshot, or the store)
        c.opened_snapshot = opened  # (how it started)
        collect_later()  # what it built is held in reference cycles too


def save(c: Corpus) -> None:
    """Write the snapshot now if the mirror is at a newer version, however few rows changed,
    and wait for it: a long-lived process going away (the resident service, idle) leaves
    the next new process a snapshot that serves it without LanceDB (`open_current`)."""
    c.wait_for_snapshot()
    with c._lock:
        if c._version >= 0 and c._version != c._snap_version:
            maybe_write(c, now=True)
    c.wait_for_snapshot()


def maybe_write(c: Corpus, *, now: bool = False) -> None:
    """Write the snapshot when due (`now`: whenever it is of another version), off the
    request path: what it needs is captured now, under the caller's lock (copies of the
    arrays patched in place), and a thread writes it while the query goes on. The thread
    is not a daemon, so a CLI process finishes the write before it exits; a process killed
    meanwhile leaves the previous snapshot in force."""
    if c._snapshots is None or len(c.pos_of) < c._snapshot_min_rows:
        return
    if c._snap_version is not None and not now:
        stale = corpus_apply.stale_rows(c)
        if c._version == c._snap_version or c._reread_since_snap < stale:
            maybe_tail(c)
            return
    if c._writer is not None and c._writer.is_alive():
        return  # the next refresh tries again once it is done
    try:
        snap = c.snapshot()  # (the caller holds the lock)
    except SnapshotDamaged as exc:  # (an index merged from the snapshot's postings, read)
        _damaged(c, c._snapshots, c._source, exc)
        return
    # Tried or written: the next attempt waits for as many changed rows again.
    c._snap_version, c._reread_since_snap = snap.version, 0.0
    scratch, c._scratch = c._scratch, None  # (the writer removes it when done)
    c._writer = threading.Thread(
        target=_write,
        args=(c, c._snapshots, snap, scratch),
        name="octobrain-snapshot",
    )
    c._writer.start()


def maybe_tail(c: Corpus) -> None:
    """Leave the catch-ups since the snapshot beside it (`memory.tail`) when the mirror
    moved past the versions a tail was last left at, on the snapshot writer's thread."""
    source, steps, edges = c._source, c._steps, c._edges
    if not c.leave_tails or source is None or source.where is None or steps is None:
        return
    if (c._version, edges.version) == c._tail_at:
        return
    if c._writer is not None and c._writer.is_alive():
        return  # the next refresh tries again once it is done
    moved_edges = None if edges.version == source.edges_version else edges.table
    if moved_edges is not None and moved_edges.nbytes > tail.MAX_EDGES_BYTES:
        return  # (the edges go whole: past this, the next process reads the store)
    fingerprint = c._store.version_fingerprint(c._version)
    if fingerprint is None:
        return
    left = tail.Tail(
        version=c._version,
        fingerprint=fingerprint,
        steps=list(steps),
        edges=moved_edges,
        edges_version=edges.version,
        edges_mark=edges.mark,
    )
    c._tail_at = (c._version, edges.version)
    c._writer = threading.Thread(
        target=_write_tail,
        args=(c, source.where, left, source.data_files),
        name="octobrain-snapshot",
    )
    c._writer.start()


def _write_tail(
    c: Corpus, where: Path, left: tail.Tail, recorded: dict[str, list[operations.DataFile]] | None
) -> None:
    try:
        # (a file the snapshot recorded keeps its time then: its rows are the snapshot's copy)
        left.data_files = _data_files(c, left.version, left.edges_version, recorded)
        tail.write(where, left)
    except OSError as exc:  # a full or read-only cache, or the snapshot removed meanwhile
        log.info("memory snapshot tail not written: %s", exc)


def _write(c: Corpus, snapshots: SnapshotDir, snap: Snapshot, scratch: Path | None = None) -> None:
    try:
        snap.data_files = _data_files(c, snap.version, snap.edges_version)
        snapshots.write(snap)
    except OSError as exc:  # a full or read-only cache never fails a query
        log.warning("memory snapshot not written: %s", exc)
    except SnapshotDamaged as exc:  # what it was made from: the next query rebuilds
        _damaged(c, snapshots, snap, exc)
    else:
        c._written = True  # the next refresh may read it instead of what it holds
    finally:
        if scratch is not None:
            build.remove_scratch(scratch)


def _damaged(
    c: Corpus, snapshots: SnapshotDir, snap: Snapshot | None, exc: SnapshotDamaged
) -> None:
    """`snap`, which a snapshot was being made from, was found damaged: said, dropped (no
    process opens it again; this one may exit first: a CLI command's writer), and the
    mirror's next refresh rebuilds from the store."""
    log.warning("memory snapshot damaged (%s); rebuilding from the store", exc)
    if snap is not None:
        snapshots.discard(snap)
    c._damaged = True


def take(c: Corpus) -> Snapshot:
    """The mirror as it is now, for `SnapshotDir.write` (nothing in it changes later)."""
    c._index_ids()
    return Snapshot(
        version=c._version,
        # (immutable: written as its chunks, by the writer's thread, which reads what it keeps
        # of an older snapshot's rows verified block by block: not checked here as well, on
        # the request path, 40-60 ms at 100k)
        rows=c._rows,
        vectors=c.vectors.blocks()[0],
        vector_blocks=c.vectors.blocks(),
        columns={
            "live": c._live.copy(),
            "edit_key": c._edit_key,
            "rowaddr": c._addr.copy(),
            "access_count": c._access.copy(),
            "last_accessed": c._seen.copy(),
            "created": c._created,
            **c._coded,
        },
        codes={k: list(v) for k, v in c._codes.items()},
        sorted_ids=c._sorted_ids,
        id_order=c._id_order,
        index=c.index.frozen(),
        checks=None if c._source is None else c._source.checks,
        mark=c._mark,
        fingerprint=c._store.version_fingerprint(c._version),
        edges=c._edges.table,
        edges_version=c._edges.version,
        edges_mark=c._edges.mark,
    )


def discard(c: Corpus) -> None:
    """Stop every process from opening the snapshot the mirror reads (found damaged), and
    empty the mirror (the next refresh rebuilds from the store)."""
    if c._source is not None and c._snapshots is not None:
        c._snapshots.discard(c._source)
    c._reset()
