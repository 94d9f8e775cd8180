"""What a mirror caught up with since the snapshot it opened, kept beside that snapshot so that
the next new process catches up without LanceDB.

A snapshot is rewritten only once enough rows changed since it (`corpus_apply.SNAPSHOT_STALE_ROWS`):
writing one costs about as much as a new process (0.1-0.2 s at 10k memories, over a second at
100k). Below that, every new process after a write read the store's changes again through
LanceDB, whose import alone is a third of such a process. So a mirror that opened a snapshot
records each catch-up it applies (`Step`: the positions dropped and moved, the rows read, with
their vectors) and leaves them, with the edges as they are at the end, in one file inside the
snapshot's directory: ``tail-<version>.bin``. A new process whose snapshot is older than the
store by exactly what a tail holds (the tail's version is the newest on disk, and that
version's Lance manifest is the one the tail was made at, `MemoryStore.version_fingerprint`)
replays the steps in order (the same code a catch-up runs, so positions come out the same) and
is current. A tail of an older version (its version's manifest still the one it was made
at) is replayed too, and only the versions after it are caught up through LanceDB: a writer
reads its own write, not every write since the snapshot. The tail records the store's data
files its versions read, as a snapshot does for its own (`corpus_snapshot.check_data_files`):
a new process checks those before it answers. Anything else (no tail, a checksum that
fails, a step that does not apply) leaves the snapshot to be caught up through LanceDB.

The file: ``OBTAIL2\\n``, the length of a JSON header (8 bytes, little-endian), the header's
CRC-32 (4 bytes), the header (versions, fingerprint, each step's arrays and row count, the
CRC-32 of what follows), then the rows of every step and the edges as two Arrow IPC streams.
The header is checked as the rows are: its arrays are positions in the mirror, and one digit
changed on disk would drop or move another memory than the step did. Written beside its name and
renamed to it; a tail that replaces it, or the snapshot's next rewrite, removes it.
"""

from __future__ import annotations

import json
import logging
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from octobrain.files import drop_dead_leftovers, read_regular, replace_whole
from octobrain.store.operations import DataFile, recorded_files

log = logging.getLogger(__name__)

MAGIC = b"OBTAIL2\n"
# What an older octobrain left: its header had no checksum of its own, nor (before that) the
# data files its versions read. Not replayed; the next catch-up leaves a tail of this one's.
_OLDER = b"OBTAIL1\n"
_FRAME = struct.Struct("<QI")  # the header's length and CRC-32
MAX_BYTES = 256 << 20  # a tail holds at most a few hundred rows and the edges
# The edges go into a tail whole when they changed: past this size (some 100,000 of them) a
# tail is not left, since each write would copy them all once more.
MAX_EDGES_BYTES = 16 << 20
_ARRAYS = ("gone", "moved", "moved_addr", "moved_access", "moved_seen")


@dataclass
class Step:
    """One catch-up as the mirror applied it (`corpus_apply.apply`)."""

    version: int
    gone: npt.NDArray[np.int64]
    moved: npt.NDArray[np.int64]
    moved_addr: npt.NDArray[np.int64]
    moved_access: npt.NDArray[np.int64]
    moved_seen: npt.NDArray[np.int64]
    mark: int
    cheap: bool
    rows: pa.Table | None  # the rows read, with their embeddings and row addresses


@dataclass
class Tail:
    """Every step from a snapshot's version to `version`, and the edges at the end."""

    version: int
    fingerprint: str
    steps: list[Step]
    edges: pa.Table | None
    edges_version: int
    edges_mark: int
    # The store's data files its versions read, by table (`Snapshot.data_files`; None: they
    # could not be told). Written on the writer's thread, just before the tail is.
    data_files: dict[str, list[DataFile]] | None = None


def _name(version: int) -> str:
    return f"tail-{version}.bin"


def _stream(table: pa.Table | None) -> bytes:
    if table is None:
        return b""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue())


def _table(data: bytes) -> pa.Table | None:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all() if data else None


def write(where: Path, tail: Tail) -> None:
    """Leave `tail` in the snapshot directory `where`, replacing the tails of versions before
    it."""
    with_rows = [s.rows for s in tail.steps if s.rows is not None and len(s.rows)]
    rows = _stream(pa.concat_tables(with_rows, promote_options="default") if with_rows else None)
    edges = _stream(tail.edges)
    header: dict[str, Any] = {
        "version": tail.version,
        "fingerprint": tail.fingerprint,
        "edges_version": tail.edges_version,
        "edges_mark": tail.edges_mark,
        "steps": [
            {
                "version": s.version,
                "mark": s.mark,
                "cheap": s.cheap,
                "rows": 0 if s.rows is None else len(s.rows),
                **{name: getattr(s, name).tolist() for name in _ARRAYS},
            }
            for s in tail.steps
        ],
        "data_files": tail.data_files,
        "rows_bytes": len(rows),
        "crc": zlib.crc32(edges, zlib.crc32(rows)),
    }
    head = json.dumps(header).encode()
    # What writers killed mid-write left for other versions (`replace_whole` drops this one's):
    # no writer writes those versions' tails again.
    for left in where.glob(".tail-*.bin.*.tmp"):
        drop_dead_leftovers(where / f"{left.name[1:].partition('.bin.')[0]}.bin", ".tmp")
    # Whole or not at all: a write that fails (a full cache) leaves nothing beside the snapshot.
    frame = MAGIC + _FRAME.pack(len(head), zlib.crc32(head))
    replace_whole(where / _name(tail.version), b"".join((frame, head, rows, edges)))
    for other in where.glob("tail-*.bin"):
        # (Not a newer one: a writer that committed after this one caught up left it, and
        # only it can serve the next process.)
        if _version_of(other) < tail.version:
            other.unlink(missing_ok=True)


def _version_of(path: Path) -> int:
    """The version a tail's file name says it ends at (-1: not a tail's name)."""
    number = path.name.removeprefix("tail-").removesuffix(".bin")
    return int(number) if number.isdigit() else -1


def newest(where: Path, at_most: int) -> Tail | None:
    """The newest tail in `where` that ends at `at_most` or before, checked (`load`)."""
    versions = [v for p in where.glob("tail-*.bin") if 0 <= (v := _version_of(p)) <= at_most]
    return load(where, max(versions)) if versions else None


def load(where: Path, version: int) -> Tail | None:
    """The tail in `where` that ends at `version`, checked; None when there is none or it
    is not sound (then removed, so no later process reads it again)."""
    path = where / _name(version)
    try:
        data = read_regular(path, MAX_BYTES)[0]
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("memory snapshot tail %s not used: %s", path.name, exc)
        return None
    if data.startswith(_OLDER):
        log.info("memory snapshot tail %s is an older octobrain's; removed", path.name)
        path.unlink(missing_ok=True)
        return None
    try:
        return _parse(data, version)
    except (ValueError, KeyError, TypeError, struct.error, pa.ArrowException) as exc:
        log.warning("memory snapshot tail %s not used (%s); removed", path.name, exc)
        path.unlink(missing_ok=True)
        return None


def _parse(data: bytes, version: int) -> Tail:
    if not data.startswith(MAGIC):
        raise ValueError("not a snapshot tail")
    size, crc = _FRAME.unpack_from(data, len(MAGIC))
    start = len(MAGIC) + _FRAME.size + size
    head = data[len(MAGIC) + _FRAME.size : start]
    if len(head) != size or zlib.crc32(head) != crc:
        raise ValueError("its header fails its checksum")
    header = json.loads(head)
    body = data[start:]
    if zlib.crc32(body) != header["crc"]:
        raise ValueError("it fails its checksum")
    if int(header["version"]) != version:
        raise ValueError(f"it ends at version {header['version']}, not {version}")
    rows = _table(body[: int(header["rows_bytes"])])
    edges = _table(body[int(header["rows_bytes"]) :])
    steps, at = [], 0
    for record in header["steps"]:
        count = int(record["rows"])
        if count and (rows is None or at + count > len(rows)):
            raise ValueError("its steps name more rows than it holds")
        step_rows = rows.slice(at, count) if count and rows is not None else None
        at += count
        arrays = {name: np.asarray(record[name], dtype=np.int64) for name in _ARRAYS}
        steps.append(
            Step(
                version=int(record["version"]),
                mark=int(record["mark"]),
                cheap=bool(record["cheap"]),
                rows=step_rows,
                **arrays,
            )
        )
    if rows is not None and at != len(rows):
        raise ValueError("it holds rows no step names")
    return Tail(
        version=version,
        fingerprint=str(header["fingerprint"]),
        steps=steps,
        edges=edges,
        edges_version=int(header["edges_version"]),
        edges_mark=int(header["edges_mark"]),
        data_files=recorded_files(header["data_files"]),
    )
