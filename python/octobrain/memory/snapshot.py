"""A per-machine, memory-mapped snapshot of the in-process mirror (`Corpus`).

A process that serves a large store would otherwise read every row and every embedding from
LanceDB and re-index all text before its first answer. The snapshot holds what the mirror
needs, as the mirror held it at one committed version of `memories`:

- ``rows.arrow``: the mirrored columns (no embeddings) as an Arrow IPC file, memory-mapped;
- ``vectors.npy`` (memory-mapped) and the per-position filter columns as ``.npy`` files,
  these read whole (copies: an access count patched in place never reaches the file);
- ``ids.npy`` / ``id_order.npy``: the ids sorted, for id → position lookups without a dict;
- ``rowaddr.npy``: each row's Lance row address, from which a catch-up finds what changed;
- ``edges.arrow``: every relationship, at its own table version, read whole (the bytes its
  checksum was taken over: never mapped, so none can be cut from under a reader or writer);
- ``bm25.<part>.npy``: the Rust BM25 index as flat arrays (`BM25Index.to_parts`); its postings
  stay memory-mapped, so a query makes resident only the postings of its terms, and a merge
  (the index changed) reads them from their files, verified block by block, never mapped;
- ``manifest.json``: format version, the table version, positions, live rows, dim, model id,
  store identity (its URI, and a checksum of that version's Lance manifest), each file's size
  and CRC-32;
- ``tail-<version>.bin``, added later: what a mirror that opened this snapshot caught up with
  since, up to that store version (`memory.tail`), which the next new process replays.

Where: ``<data dir>/cache/snapshots/<key>/`` (beside the embedding cache, never in the store,
so object-store stores work unchanged), `key` hashing the store URI, model id and dimension.
Each snapshot is a directory; ``CURRENT`` names the one to read. A writer fills a temporary
directory, fsyncs every file, renames it into place and then replaces ``CURRENT`` atomically, so
a killed writer leaves the previous snapshot in force and only a temporary directory behind
(removed by a later writer). Deleting the whole ``snapshots`` directory is always safe: the
next process rebuilds from the store.

A reader checks the manifest (format, model, dim, store), every file's size, and the checksum
of every small file before using anything, and uses the bytes it checked (the small files and
the edges are never mapped: one cut in place after its check killed the process with SIGBUS, or
was written into the next snapshot under fresh checksums). The large ones carry a CRC-32 per 64
KiB block: ``vectors.npy``, ``bm25.docs.npy`` and ``bm25.tfs.npy`` are checked the first time a
read covers a block (`PageCheck`): a vector's rows before they are scored, a term's postings
before a query reads them, and as an index is merged (read from the files, not mapped);
``rows.arrow`` the same way (`RowsCheck`): the blocks of the rows and columns a read takes,
every block before a read of every row, and its headers at open. A writer reads what it keeps
of an older snapshot's large files that way too, never through their mappings (one cut in place
killed it with SIGBUS): the rows read verified; a file kept whole (vectors, postings unchanged
since) linked and its block checksums compared with the older ones; the older vectors before
those added since copied in the kernel and compared, or read verified. A damaged block raises
`SnapshotDamaged` instead of being used; the caller discards the snapshot and rebuilds from the
store. Any other mismatch makes `load` return None and the caller rebuilds from the store. The
table version is the caller's to compare: it catches up from the snapshot's version by reading
only what changed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import mmap
import os
import secrets
import shutil
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from octobrain.files import read_regular, writer_gone
from octobrain.kernels.bm25 import PARTS, BM25Index, Stored
from octobrain.memory.page_check import BLOCK, PageCheck, SnapshotDamaged
from octobrain.memory.rows_check import RowsCheck, merged_rows
from octobrain.memory.snapshot_files import (
    checked_bytes,
    link_older,
    npy_of,
    sums,
    unchanged,
    write_vectors,
)
from octobrain.store.operations import DataFile, recorded_files

log = logging.getLogger(__name__)

# 10: the manifest's own checksum; 9: invisible format characters (a soft hyphen) dropped
# from the BM25 terms; 8: `C++`, `C#` keep their marks among them; 7: a version's number
# without its `v`; 6: identifier parts; 5: each edge's checksum; 4: each row's; 3: row
# addresses and the edges; 2: the BM25 index as memory-mapped arrays; 1: one file
FORMAT = 10
CURRENT = "CURRENT"
MANIFEST = "manifest.json"
LAZY = ("vectors.npy", "bm25.docs.npy", "bm25.tfs.npy")  # checked as their blocks are read
ROWS = "rows.arrow"  # checked where rows are taken (`RowsCheck`)
_STALE_TMP_S = 3600.0  # a temporary directory this old belongs to a writer that died

# Per-position numpy columns, name → dtype ("ids" is a fixed-width bytes dtype, sized on write).
COLUMNS = {
    "live": np.bool_,
    "edit_key": np.int64,
    "access_count": np.int64,
    "last_accessed": np.int64,
    "created": np.int64,
    "scope": np.int32,
    "state": np.int32,
    "type": np.int32,
    "rowaddr": np.int64,
}
EDGES = "edges.arrow"


def _small_text(path: Path) -> str:
    """The text of `CURRENT` or a snapshot's manifest, stripped; `OSError` when it is not a
    regular file (a FIFO in its place is refused, not waited on) or is past 64 MiB."""
    return read_regular(path, 64 << 20)[0].decode("utf-8").strip()


def _manifest_crc(manifest: dict[str, Any]) -> int:
    """The CRC-32 of a manifest (without its own), over one spelling of its JSON."""
    return zlib.crc32(json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode())


@dataclass
class Snapshot:
    """What the mirror needs, at `version` of `memories` (arrays are memory-mapped)."""

    version: int
    rows: pa.Table
    vectors: npt.NDArray[np.float32]
    columns: dict[str, npt.NDArray[Any]]
    codes: dict[str, list[str]]  # scope / state / type code → value
    sorted_ids: npt.NDArray[np.bytes_]
    id_order: npt.NDArray[np.int64]
    index: BM25Index
    # The lazily checked files this snapshot reads from (what `load` opened), by name; its
    # first rows are those of the `rows.arrow` named here (what a writer reads them from).
    checks: dict[str, PageCheck] | None = None
    # Verifies the blocks of `rows.arrow` a read takes (raising `SnapshotDamaged`).
    rows_check: RowsCheck | None = None
    # For writing: the vectors as consecutive blocks (written one after the other, never
    # concatenated in memory), in place of `vectors`.
    vector_blocks: list[npt.NDArray[np.float32]] | None = None
    mark: int = -1  # the highest fragment id of `memories` the rows come from
    # The store's own mark of `version` (`MemoryStore.version_fingerprint`): None when unknown.
    fingerprint: str | None = None
    edges: pa.Table | None = None  # every relationship (with its row address)
    edges_version: int = -1
    edges_mark: int = -1
    where: Path | None = None  # its directory (what `load` opened)
    # Each file's (inode, size, mtime) as `load` opened it: a file changed in place since
    # (truncated, copied over) is what the maps read, and a page cut from under them
    # killed the process with SIGBUS.
    opened: dict[str, tuple[int, int, int]] | None = None
    # The store's data files its versions read, by table (path under `data/`, size written,
    # mtime_ns then; deletion files as `_deletions/…`, `store.operations.DataFile`): what a
    # new process checks before it answers from the snapshot. None: not recorded.
    data_files: dict[str, list[DataFile]] | None = None

    def changed_file(self) -> str | None:
        """The first of its files changed in place since it was opened, or None. A file gone
        or replaced by another (a newer snapshot's clean-up) is not: the maps keep the one
        they opened."""
        for file, (inode, size, mtime) in (self.opened or {}).items():
            assert self.where is not None
            try:
                now = (self.where / file).stat()
            except OSError:
                continue
            if now.st_ino == inode and (now.st_size, now.st_mtime_ns) != (size, mtime):
                return file
        return None

    @property
    def rows_file(self) -> PageCheck | None:
        """The check of the ``rows.arrow`` its first rows are read from (what a writer or a
        rebuild reads them from, verified, never through the mapping); None: built in memory."""
        return (self.checks or {}).get(ROWS)

    def vector_rows(self, positions: npt.NDArray[np.int64] | None) -> None:
        """Verify the blocks of `vectors.npy` holding these rows (None: all of them)."""
        check = (self.checks or {}).get("vectors.npy")
        if check is None:
            return
        if positions is None:  # (a scan of every row: summed through the mapping it reads,
            # whose pages it makes resident anyway; read into a buffer, it cost twice the time)
            mapped: object = self.vectors.base  # (numpy's memmap: the file from its first byte)
            if isinstance(mapped, mmap.mmap) and len(mapped) == check.size:
                check.everything(memoryview(mapped))
            else:
                check.everything()
            return
        row = self.vectors.shape[1] * 4
        starts = int(getattr(self.vectors, "offset", 0)) + positions.astype(np.int64) * row
        check.ranges(starts, starts + row)


def default_root() -> Path:
    """`<data dir>/cache/snapshots`."""
    from octobrain.config import data_dir

    return data_dir() / "cache" / "snapshots"


def store_key(uri: str, model_id: str, dim: int) -> str:
    """The directory name of one store's snapshots (its URI, model and dimension)."""
    return hashlib.sha256(f"{uri}\0{model_id}\0{dim}".encode()).hexdigest()[:32]


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class SnapshotDir:
    """The snapshots of one store on this machine."""

    def __init__(self, root: Path, uri: str, model_id: str, dim: int) -> None:
        self.uri, self.model_id, self.dim = uri, model_id, dim
        self.path = root / store_key(uri, model_id, dim)
        self._refused = ""  # the snapshot this process found unusable (said once, not again)

    # ---- reading --------------------------------------------------------------------------

    def load(self) -> Snapshot | None:
        """The current snapshot, verified; None when there is none or it is not usable."""
        try:
            name = _small_text(self.path / CURRENT)
        except (OSError, UnicodeDecodeError):  # (a FIFO in its place is not waited on)
            return None
        if name == self._refused:  # (a refresh asks twice: the warning was printed twice)
            return None
        try:
            return self._load(self.path / name)
        except Exception as exc:  # damaged, foreign or half-deleted: never served
            # (the first line only: numpy's refusal of a damaged .npy goes on to suggest
            # loading it with allow_pickle, which no one should do with a damaged file)
            said = (str(exc).splitlines() or [type(exc).__name__])[0]
            said = said.split(" If you trust the file")[0]
            log.warning("memory snapshot %s not used (%s); rebuilding from the store", name, said)
            self._refused = name
            return None

    def _load(self, where: Path) -> Snapshot:
        manifest = json.loads(_small_text(where / MANIFEST))
        if not isinstance(manifest, dict) or manifest.pop("crc", None) != _manifest_crc(manifest):
            # (its codes name each row's scope, state and type: one letter changed on disk
            # and a project's every memory was out of its own searches)
            raise ValueError(f"{MANIFEST} fails its checksum")
        expect = {"format": FORMAT, "uri": self.uri, "model_id": self.model_id, "dim": self.dim}
        for key, value in expect.items():
            if manifest.get(key) != value:
                raise ValueError(f"{key} is {manifest.get(key)!r}, expected {value!r}")
        blocks = manifest["blocks"]
        opened, arrays, edges = {}, {}, None
        for file, (size, crc) in manifest["files"].items():
            path = where / file
            found = path.stat()
            if found.st_size != size:
                raise ValueError(f"{file} has {found.st_size} bytes, expected {size}")
            opened[file] = (found.st_ino, found.st_size, found.st_mtime_ns)
            if file in (*LAZY, ROWS):
                if len(blocks[file]) != -(-size // BLOCK):
                    raise ValueError(f"{file} has no checksum for each of its blocks")
                continue
            data = checked_bytes(path, size, crc)  # (used as read: never mapped)
            if file == EDGES:
                edges = pa.ipc.open_file(pa.py_buffer(data)).read_all()
            elif file.endswith(".npy"):  # (the columns patched in place: copies)
                arrays[file[:-4]] = npy_of(data, writable=file[:-4] in COLUMNS)
        checks = {
            file: PageCheck(where / file, blocks[file], size=manifest["files"][file][0])
            for file in (*LAZY, ROWS)
        }
        parts = {name: arrays[f"bm25.{name}"] for name in PARTS if name not in ("docs", "tfs")}
        for name in ("docs", "tfs"):  # (mapped: a query makes resident its terms' alone)
            parts[name] = np.load(where / f"bm25.{name}.npy", mmap_mode="r")
        index = BM25Index.open_parts(parts, manifest["bm25"])
        index.check_postings(_postings_check(parts, checks), _stored(parts, checks))
        positions = int(manifest["positions"])
        columns = {name: arrays[name] for name in COLUMNS}
        vectors = np.load(where / "vectors.npy", mmap_mode="r")
        sorted_ids, id_order = arrays["ids"], arrays["id_order"]
        mapped = pa.memory_map(str(where / ROWS))
        rows = pa.ipc.open_file(mapped).read_all()
        rows_check = RowsCheck(checks[ROWS], rows, mapped)
        lengths = {len(a) for a in columns.values()}
        lengths |= {len(rows), len(vectors), index.position_count}
        if lengths != {positions} or vectors.shape[1:] != (self.dim,):
            raise ValueError("its files disagree on the number of positions")
        if len(sorted_ids) != len(id_order) or len(sorted_ids) > positions:
            raise ValueError("its id index disagrees with its rows")
        return Snapshot(
            version=int(manifest["version"]),
            rows=rows,
            vectors=vectors,
            columns=columns,
            codes={k: list(v) for k, v in manifest["codes"].items()},
            sorted_ids=sorted_ids,
            id_order=id_order,
            index=index,
            checks=checks,
            rows_check=rows_check,
            mark=int(manifest["mark"]),
            fingerprint=manifest.get("fingerprint"),
            edges=edges,
            edges_version=int(manifest["edges_version"]) if edges is not None else -1,
            edges_mark=int(manifest["edges_mark"]) if edges is not None else -1,
            where=where,
            opened=opened,
            data_files=recorded_files(manifest.get("data_files")),
        )

    def discard(self, snap: Snapshot) -> None:
        """Stop `snap` from being served again (it was found damaged): drop `CURRENT` if it
        still names it, then its directory."""
        from filelock import FileLock

        checks = snap.checks or {}
        where = next(iter(checks.values())).path.parent if checks else None
        if where is None:
            return
        with FileLock(str(self.path / ".lock"), timeout=60):
            with contextlib.suppress(OSError, UnicodeDecodeError):
                if _small_text(self.path / CURRENT) == where.name:
                    (self.path / CURRENT).unlink()
            shutil.rmtree(where, ignore_errors=True)

    # ---- writing --------------------------------------------------------------------------

    def scratch(self) -> Path:
        """A new temporary directory beside the snapshots (a writer's, or a build's files):
        removed by its owner, or as a dead writer's by a later writer."""
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self.path / f".tmp-{os.getpid()}-{secrets.token_hex(4)}"
        tmp.mkdir()
        return tmp

    def write(self, snap: Snapshot) -> Path:
        """Write `snap` and make it the current snapshot (atomically; see the module doc).
        What it keeps of an older snapshot's large files is verified as it is copied
        (`SnapshotDamaged`), never read through their mappings (`snapshot_files`)."""
        tmp = self.scratch()
        try:
            kept = self._fill(tmp, snap)
            files, blocks = sums(tmp, (*LAZY, ROWS))
            for name, older in kept.items():  # (copied unread: compared with the older sums)
                unchanged(name, blocks[name], *older)
            manifest = {
                "format": FORMAT,
                "uri": self.uri,
                "model_id": self.model_id,
                "dim": self.dim,
                "version": snap.version,
                "fingerprint": snap.fingerprint,
                "positions": len(snap.rows),
                "live": int(np.count_nonzero(snap.columns["live"])),
                "codes": snap.codes,
                "bm25": snap.index.params(),
                "mark": snap.mark,
                "edges_version": snap.edges_version,
                "edges_mark": snap.edges_mark,
                "written_at": time.time(),
                "files": files,
                "blocks": blocks,
            }
            if snap.data_files is not None:
                manifest["data_files"] = snap.data_files
            manifest["crc"] = _manifest_crc(manifest)
            _write_synced(tmp / MANIFEST, json.dumps(manifest, indent=1).encode())
            _fsync_dir(tmp)
            final = self.path / f"v{snap.version}-{secrets.token_hex(4)}"
            from filelock import FileLock

            with FileLock(str(self.path / ".lock"), timeout=60):
                tmp.rename(final)
                pointer = self.path / f".{CURRENT}.{secrets.token_hex(4)}"
                _write_synced(pointer, final.name.encode())
                os.replace(pointer, self.path / CURRENT)
                _fsync_dir(self.path)
                self._clean(keep=final.name)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return final

    def _fill(self, tmp: Path, snap: Snapshot) -> dict[str, tuple[PageCheck, range]]:
        """Write `snap`'s files into `tmp`; what of them was copied unread from an older
        snapshot's files, by name: the check of the file it came from, and its blocks."""
        older = snap.checks or {}
        kept: dict[str, tuple[PageCheck, range]] = {}

        def npy(name: str, array: npt.NDArray[Any]) -> None:
            check = older.get(f"{name}.npy")
            if check is not None:  # (the older snapshot's file, mapped: never read through it)
                blocks = link_older(tmp / f"{name}.npy", array, check)
                if blocks is not None:
                    kept[f"{name}.npy"] = (check, blocks)
                    return
            with (tmp / f"{name}.npy").open("wb") as f:
                np.save(f, np.ascontiguousarray(array))
                f.flush()
                os.fsync(f.fileno())

        for name, dtype in COLUMNS.items():
            npy(name, np.asarray(snap.columns[name], dtype=dtype))
        blocks = snap.vector_blocks or [np.asarray(snap.vectors, dtype=np.float32)]
        vectors = older.get("vectors.npy")
        copied = write_vectors(tmp / "vectors.npy", blocks, self.dim, vectors)
        if vectors is not None:
            kept["vectors.npy"] = (vectors, copied)
        npy("ids", snap.sorted_ids)
        npy("id_order", np.asarray(snap.id_order, dtype=np.int64))
        _write_rows(tmp / ROWS, snap)
        for name, array in snap.index.to_parts().items():
            npy(f"bm25.{name}", array)
        if snap.edges is not None:
            with (tmp / EDGES).open("wb") as f:
                with pa.ipc.new_file(f, snap.edges.schema) as writer:
                    writer.write_table(snap.edges)
                f.flush()
                os.fsync(f.fileno())
        return kept

    def _clean(self, keep: str) -> None:
        """Drop every other snapshot (a reader that mapped one keeps its pages), the
        temporary directories of writers that died, and the pointers of writers killed before
        they moved theirs over `CURRENT` (written under the lock this one holds)."""
        now = time.time()
        for entry in self.path.iterdir():
            if entry.name.startswith(f".{CURRENT}.") and entry.is_file():
                entry.unlink(missing_ok=True)
                continue
            if entry.name == keep or not entry.is_dir():
                continue
            if entry.name.startswith(".tmp-") and not writer_gone(entry.name.split("-")[1]):
                with contextlib.suppress(OSError):
                    if now - entry.stat().st_mtime < _STALE_TMP_S:
                        continue  # another writer may still be filling it
            shutil.rmtree(entry, ignore_errors=True)


def _postings_check(parts: dict[str, npt.NDArray[Any]], checks: dict[str, PageCheck]) -> Any:
    """Verify the blocks of `bm25.docs.npy` / `bm25.tfs.npy` holding these terms' postings
    (None: every term's)."""
    offsets = parts["offsets"]

    def check(terms: npt.NDArray[np.uint32] | None) -> None:
        for name in ("docs", "tfs"):
            page = checks[f"bm25.{name}.npy"]
            if terms is None:
                page.everything()
                continue
            known = terms[terms < len(offsets) - 1].astype(np.int64)
            base = int(getattr(parts[name], "offset", 0))
            lo = np.asarray(offsets[known], dtype=np.int64)
            hi = np.asarray(offsets[known + 1], dtype=np.int64)
            page.ranges(base + lo * 4, base + hi * 4)

    return check


def _stored(parts: dict[str, npt.NDArray[Any]], checks: dict[str, PageCheck]) -> Stored:
    """Where the postings lie, for a merge to read them verified (`BM25Index.to_parts`): the
    files as opened (by name, another process's newer snapshot may have removed them)."""
    files = {}
    for name in ("docs", "tfs"):
        check = checks[f"bm25.{name}.npy"]  # (kept open while the merge may read them)
        offset = int(getattr(parts[name], "offset", 0))
        files[name] = (check.opened, check.path.name, offset, check.crcs.tolist())
    return Stored(files["docs"], files["tfs"], BLOCK, SnapshotDamaged)


def _write_rows(path: Path, snap: Snapshot) -> None:
    """`snap`'s rows as ``rows.arrow``, one record batch (a take across several chunks
    concatenates them first: the process serving a 100k snapshot of two batches held 74 MiB
    more after one query; merged here, in the writer's thread, not on the request path),
    those of the older snapshot it read taken from bytes read and verified (`merged_rows`)."""
    rows = merged_rows(snap.rows, snap.rows_file)
    with path.open("wb") as f:
        with pa.ipc.new_file(f, rows.schema) as writer:
            writer.write_table(rows)
        f.flush()
        os.fsync(f.fileno())


def _write_synced(path: Path, data: bytes) -> None:
    with path.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
