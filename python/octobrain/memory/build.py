"""How an empty mirror (`Corpus`) is built from a whole `memories` table in bounded memory.

A first process on a large store used to read the table as one Arrow table (with every
embedding), filter a copy of it, copy the embeddings again into one matrix, make every row's
text a Python string and index them all in one call: 10.4 GiB at a million memories. Here the
table is read as a stream of small batches (LanceDB reads a few batches ahead, so the batch
size bounds what its reader holds), and each batch goes where it ends:

- its embeddings to ``vectors.npy`` in a scratch directory beside the snapshots, written as
  they come and mapped afterwards (the snapshot writer links that file instead of copying it);
- its texts to the BM25 index, one batch of Python strings at a time; once every batch is
  in, the index is turned into the flat arrays a snapshot stores (`BM25Index.to_parts`);
- its per-position columns (edit key, row address, access, codes) into preallocated arrays;
- its string columns' bytes to a spool file, read back into one buffer per column of exactly
  the final size once the index is done (Arrow concatenation would hold every batch's copy and
  the whole column at once); the other mirrored columns (a few bytes a row) are copied out of
  the batch, whose buffers LanceDB hands over as one block with the embeddings, and joined.

Without a scratch directory (snapshots disabled) the vectors and strings stay in memory.
The result is the mirror a single read of the table gave, position for position, byte for
byte: same rows in the same order, same index, same vectors.
"""

from __future__ import annotations

import gc
import os
import shutil
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from octobrain.heap import trim_heap
from octobrain.kernels.bm25 import BM25Index
from octobrain.memory import catchup
from octobrain.memory.corpus_io import (
    CODED,
    LIGHT_COLUMNS,
    READ,
    check_unit,
    int64s,
    sorted_ids,
    texts_of,
)
from octobrain.memory.snapshot import Snapshot
from octobrain.store.pinned import Pinned
from octobrain.store.unit_vectors import vector_matrix

__all__ = ["BATCH_ROWS", "build", "remove_scratch"]

# LanceDB's reader holds a few batches ahead: at a million memories, batches of 4,096 rows
# held 290 MB above the process, 32,768 rows 1 GB.
BATCH_ROWS = 4096
# Texts are indexed this many at a time: a call per LanceDB batch cost 40% more (each call
# splits its texts among the threads and looks up every chunk's distinct words).
INDEX_ROWS = 32_768
_INT32_MAX = 2**31 - 1


class _Bytes:
    """Bytes appended batch by batch, read back by range: in a file (held by the page cache,
    not by this process, until read) or, without one, in memory."""

    def __init__(self, path: Path | None) -> None:
        self._file = None if path is None else path.open("w+b")
        self._memory = bytearray()
        self.size = 0

    def write(self, data: memoryview) -> None:
        if self._file is not None:
            self._file.write(data)
        else:
            self._memory += data
        self.size += len(data)

    def read(self, start: int, stop: int) -> npt.NDArray[np.uint8]:
        if self._file is None:  # (a view: nothing is written once reading starts)
            return np.frombuffer(self._memory, dtype=np.uint8)[start:stop]
        self._file.flush()
        out = np.empty(stop - start, dtype=np.uint8)
        view = out.data
        done = 0
        while done < len(out):
            got = os.preadv(self._file.fileno(), [view[done:]], start + done)
            if got <= 0:
                raise OSError("short read of the mirror's spool")
            done += got
        return out

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        self._memory = bytearray()


class _Strings:
    """One string column: each batch's bytes to a spool, its offsets and validity kept, and
    at the end one array per part (a part holds as many rows as 32-bit offsets can address:
    one part, unless the column's text passes 2 GiB)."""

    def __init__(self, rows: int, spool: _Bytes) -> None:
        self._spool = spool
        self._ends = np.zeros(rows + 1, dtype=np.int64)  # ends[i + 1]: where row i's bytes end
        self._valid = np.ones(rows, dtype=bool)
        self._at = 0

    def add(self, chunk: pa.Array) -> None:
        n = len(chunk)
        offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int32)[chunk.offset :][: n + 1]
        lo, hi = int(offsets[0]), int(offsets[-1])
        data = chunk.buffers()[2]
        if hi > lo and data is not None:
            self._spool.write(memoryview(data)[lo:hi])
        base = self._ends[self._at]
        self._ends[self._at + 1 : self._at + n + 1] = base + (offsets[1:] - lo)
        if chunk.null_count:
            self._valid[self._at : self._at + n] = np.asarray(chunk.is_valid())
        self._at += n

    def finish(self, kind: pa.DataType) -> pa.ChunkedArray:
        parts: list[pa.Array] = []
        start = 0
        ends, n = self._ends, self._at
        while start < n or not parts:
            # The rows from `start` whose bytes fit 32-bit offsets (at least one).
            stop = int(np.searchsorted(ends, ends[start] + _INT32_MAX, side="right")) - 1
            stop = min(max(stop, start + 1), n) if n else 0
            lo, hi = int(ends[start]), int(ends[stop])
            offsets = (ends[start : stop + 1] - lo).astype(np.int32)
            valid = self._valid[start:stop]
            nulls = int(len(valid) - np.count_nonzero(valid))
            bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
            buffers = [bitmap, pa.py_buffer(offsets), pa.py_buffer(self._spool.read(lo, hi))]
            parts.append(pa.Array.from_buffers(kind, stop - start, buffers, nulls))
            start = stop
        return pa.chunked_array(parts, kind)


class _Vectors:
    """The embeddings, batch by batch, into `path` as a ``.npy`` file (mapped once complete)
    or, without one, into an array."""

    def __init__(self, rows: int, dim: int, path: Path | None) -> None:
        self.rows, self.dim, self.path, self._at = rows, dim, path, 0
        self._array: npt.NDArray[np.float32] | None = None
        self._file: BinaryIO | None = None
        if path is None:
            self._array = np.empty((rows, dim), dtype=np.float32)
        else:
            self._file = path.open("wb")
            header = {"descr": "<f4", "fortran_order": False, "shape": (rows, dim)}
            np.lib.format.write_array_header_1_0(self._file, header)

    def add(self, column: pa.Array, ids: pa.Array) -> None:
        n = len(column)
        block = vector_matrix(column, n)
        check_unit(block, ids)
        if self._file is not None:
            self._file.write(np.ascontiguousarray(block).data.cast("B"))
        else:
            assert self._array is not None
            self._array[self._at : self._at + n] = block
        self._at += n

    def finish(self) -> npt.NDArray[np.float32]:
        if self._file is None:
            assert self._array is not None
            return self._array
        self._file.flush()
        os.fsync(self._file.fileno())  # (a snapshot takes this file as it is)
        self.close()
        assert self.path is not None
        mapped: npt.NDArray[np.float32] = np.load(self.path, mmap_mode="r")
        return mapped

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def build(
    pinned: Pinned,
    version: int,
    dim: int,
    *,
    scratch: Path | None = None,
    batch_rows: int = BATCH_ROWS,
) -> Snapshot:
    """The mirror of every row of `pinned` (at `version`), as a `Snapshot` of it (see the
    module doc). `scratch` (an empty directory the caller removes) receives ``vectors.npy``,
    which the result maps, and the spools (removed here)."""
    n = pinned.count()
    vectors = _Vectors(n, dim, None if scratch is None else scratch / "vectors.npy")
    index = BM25Index()
    columns: dict[str, npt.NDArray[Any]] = {
        "edit_key": np.empty(n, dtype=np.int64),
        "rowaddr": np.empty(n, dtype=np.int64),
        "access_count": np.empty(n, dtype=np.int64),
        "last_accessed": np.empty(n, dtype=np.int64),
        "created": np.empty(n, dtype=np.int64),
        **{name: np.empty(n, dtype=np.int32) for name in CODED},
    }
    codes: dict[str, dict[str, int]] = {name: {} for name in CODED}
    spools: list[_Bytes] = []
    strings: dict[str, _Strings] = {}
    others: dict[str, list[pa.Array]] = {}
    schema: pa.Schema | None = None
    at = 0
    texts: list[str] = []
    collecting = gc.isenabled()
    gc.disable()  # (a million rows' texts and tag lists triggered costly full collections)
    try:
        for batch in pinned.scan_batches("true", columns=READ, batch_rows=batch_rows):
            m = batch.num_rows
            if at + m > n:
                raise RuntimeError("memories: a pinned version gave more rows than it counts")
            light = batch.select(LIGHT_COLUMNS)
            if schema is None:
                schema = light.schema
                for field in schema:
                    if field.type == pa.string():
                        path = None if scratch is None else scratch / f"{field.name}.bytes"
                        spools.append(_Bytes(path))
                        strings[field.name] = _Strings(n, spools[-1])
                    else:
                        others[field.name] = []
            vectors.add(batch.column("embedding"), batch.column("id"))
            texts += texts_of(light)
            if len(texts) >= INDEX_ROWS:
                index.add(texts)
                texts = []
            for name, column in (
                ("edit_key", "updated_at"),
                ("rowaddr", catchup.ADDR),
                ("access_count", "access_count"),
                ("last_accessed", "last_accessed"),
                ("created", "created_at"),
            ):
                columns[name][at : at + m] = int64s(batch.column(column))
            for name, column in CODED.items():
                columns[name][at : at + m] = _codes(batch.column(column), codes[name])
            for name, sink in strings.items():
                sink.add(light.column(name))
            for name, chunks in others.items():
                # A copy: the batch's buffers are one block with its embeddings.
                chunks.append(pa.concat_arrays([light.column(name)]))
            at += m
        if at != n:
            raise RuntimeError("memories: a pinned version gave fewer rows than it counts")
        if texts:
            index.add(texts)
            texts = []
        vectors_out = vectors.finish()
        parts = index.to_parts()  # (the index as it is stored; the growable one goes)
        params = index.params()
        del index
        trim_heap()  # (what it held is free now, but kept by the allocator: give it back)
        flat = BM25Index.open_parts(parts, params)
        if schema is None:  # (an empty table: the caller does not build one)
            raise RuntimeError("memories: no rows to build a mirror from")
        # The small columns first, their batches' copies freed before the text is read back.
        joined = {
            name: pa.chunked_array([pa.concat_arrays(chunks)]) for name, chunks in others.items()
        }
        others.clear()
        trim_heap()
        for name, sink in strings.items():
            joined[name] = sink.finish(schema.field(name).type)
        rows = pa.Table.from_arrays([joined.pop(f.name) for f in schema], schema=schema)
    finally:
        if collecting:
            gc.enable()
        vectors.close()
        for spool in spools:
            spool.close()
        if scratch is not None:
            for path in scratch.glob("*.bytes"):
                path.unlink(missing_ok=True)
    columns["live"] = np.ones(n, dtype=bool)
    ids, order = sorted_ids(rows.column("id"), columns["live"])
    return Snapshot(
        version=version,
        rows=rows,
        vectors=vectors_out,
        columns=columns,
        codes={name: list(found) for name, found in codes.items()},
        sorted_ids=ids,
        id_order=order,
        index=flat,
        mark=catchup.fragment_mark(columns["rowaddr"]),
    )


def _codes(column: pa.Array, known: dict[str, int]) -> npt.NDArray[np.int32]:
    """Each value's code in `known` (new values get the next codes, in order of appearance)."""
    encoded = pc.dictionary_encode(column)
    values = encoded.dictionary.to_pylist()
    table = np.asarray([known.setdefault(v, len(known)) for v in values], dtype=np.int32)
    indices = encoded.indices.to_numpy(zero_copy_only=False)
    return table[indices] if len(values) else np.zeros(0, dtype=np.int32)


def remove_scratch(path: Path) -> None:
    """Remove a scratch directory (a mirror that maps its vectors keeps reading them)."""
    shutil.rmtree(path, ignore_errors=True)
