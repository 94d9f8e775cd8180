"""The checksums of a whole table of rows at once, from their Arrow columns (Rust:
`rust/src/rowcrc.rs`): what `schema._crc` (the readable reference) computes of one row, with no
Python object made per row (checked that way, the 10,200 memories of a store took 147 ms of
CPU of every `memory stats` and `doctor`; at once, 4 ms)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from octobrain import _core
from octobrain.store.schema import (
    CHECKED_FLOATS,
    CHECKED_LISTS,
    CHECKED_TEXT,
    CHECKED_TIMES,
    CHECKSUM,
    CHUNK_FIELDS,
    EDGE_FIELDS,
    SOURCE_FIELDS,
)

Fields = tuple[tuple[str, ...], ...]
# One column as the kernel takes it: value offsets (None: fixed-width values), data, width,
# validity, list offsets, list validity.
_Arrays = tuple[Any, npt.NDArray[np.uint8], int, Any, Any, Any]
_MEMORY: Fields = (CHECKED_TEXT, CHECKED_LISTS, CHECKED_FLOATS, CHECKED_TIMES)
_STAMP_BITS = 0x7FFFFFFF


def flags(values: pa.Array | pa.ChunkedArray) -> npt.NDArray[np.bool_]:
    """A boolean Arrow column as numpy flags (no nulls: `is_valid`, `is_in` and the like)."""
    return np.asarray(values.to_numpy(zero_copy_only=False), np.bool_)


def _valid(array: pa.Array) -> npt.NDArray[np.bool_] | None:
    return flags(array.is_valid()) if array.null_count else None


def _values(array: pa.Array) -> tuple[Any, npt.NDArray[np.uint8], int]:
    """(offsets, data, width) of a text, float, flag or time array: text as Arrow lays it out,
    the rest as the float32 stored or the time's microseconds (i64)."""
    kind = array.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        width = np.dtype(np.int32 if pa.types.is_string(kind) else np.int64)
        _, offsets, data = array.buffers()
        starts = np.frombuffer(
            offsets, width, count=len(array) + 1, offset=array.offset * width.itemsize
        )
        payload = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
        return starts.astype(np.int64), payload, 0
    if pa.types.is_timestamp(kind):
        array = array.cast(pa.timestamp("us", kind.tz), safe=False).cast(pa.int64())
    elif pa.types.is_floating(kind) or pa.types.is_boolean(kind) or pa.types.is_null(kind):
        array = array.cast(pa.float32(), safe=False)
    else:
        raise TypeError(f"a checked column holds {kind}: no checksum rule for it")
    size = array.type.byte_width
    data = array.buffers()[1]
    raw = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    return None, raw[array.offset * size : (array.offset + len(array)) * size], size


def _column(array: pa.Array) -> _Arrays:
    if pa.types.is_list(array.type) or pa.types.is_large_list(array.type):
        lists = np.asarray(array.offsets).astype(np.int64)
        items = array.values  # (the whole child: the offsets point into it)
        return (*_values(items), _valid(items), lists, _valid(array))
    return (*_values(array), _valid(array), None, None)


def crcs(rows: pa.Table, fields: Fields | None = None) -> npt.NDArray[np.uint32]:
    """`schema._crc` of each row of `rows` (`fields`: its text, list, float and time fields,
    by default a memory's); a field `rows` lacks reads as null, as `_crc` reads it, but a
    time (KeyError, as there)."""
    text, lists, floats, times = fields or _MEMORY
    empty = {**dict.fromkeys(text, pa.string()), **dict.fromkeys(lists, pa.list_(pa.string()))}
    names = (*text, *lists, *floats, *times)
    if missing := [n for n in times if n not in rows.column_names]:
        raise KeyError(missing[0])
    # Batch by batch, each column where it lies: joining a column's chunks into one copied it
    # (a mirror of a snapshot's mapped rows and those read since holds two).
    out = [np.zeros(0, np.uint32)]
    for batch in rows.select([n for n in names if n in rows.column_names]).to_batches():
        columns = [
            _column(
                batch.column(name)
                if name in batch.schema.names
                else pa.nulls(batch.num_rows, empty.get(name, pa.float32()))
            )
            for name in names
        ]
        out.append(_core.row_crcs(batch.num_rows, columns))
    return np.concatenate(out)


def sums(
    rows: pa.Table, fields: Fields | None = None, at: str | None = None
) -> npt.NDArray[np.int64]:
    """The `checksum` each row of `rows` should hold: its CRC-32, beside the low 31 bits of its
    time `at` when it is stamped with one (`schema.checksum`)."""
    out = crcs(rows, fields).astype(np.int64)
    if at is not None:
        made_for = _column_int64(rows.column(at).cast(pa.int64()))
        out |= (made_for & _STAMP_BITS) << 32
    return out


def _column_int64(values: pa.ChunkedArray) -> npt.NDArray[np.int64]:
    return np.asarray(values.fill_null(0).to_numpy(), np.int64)


def damaged(
    rows: pa.Table, fields: Fields | None = None, at: str | None = None, restamped: bool = False
) -> npt.NDArray[np.bool_]:
    """Which rows of `rows` (holding `fields`, `at` and the checksum) no longer match the
    checksum written with them. A row with none is not; with `restamped`, neither is one whose
    checksum was made for another time `at` (`schema.verified`: rewritten by an older
    octobrain); without, that row is (`schema._matches`)."""
    column = rows.column(CHECKSUM)
    checked = flags(column.is_valid())
    if not checked.any():
        return checked
    stored, expected = _column_int64(column), sums(rows, fields, at)
    if restamped:
        checked &= (stored >> 32) == (expected >> 32)
    out: npt.NDArray[np.bool_] = checked & (stored != expected)
    return out


def memories_damaged(rows: pa.Table) -> npt.NDArray[np.bool_]:
    """`damaged` of memories (`rows` holding the `CHECKED` fields, `updated_at` and the
    checksum): each stamped with its `updated_at`, and one re-stamped by an older octobrain
    (its checksum made for another time) not damaged (`schema.verified`)."""
    return damaged(rows, at="updated_at", restamped=True)


def edges_damaged(rows: pa.Table) -> npt.NDArray[np.bool_]:
    """`damaged` of links (never rewritten: no stamp; `schema.edge_verified`)."""
    return damaged(rows, EDGE_FIELDS)


def chunks_damaged(rows: pa.Table) -> npt.NDArray[np.bool_]:
    """`damaged` of knowledge chunks (never rewritten: no stamp; `schema.chunk_verified`)."""
    return damaged(rows, CHUNK_FIELDS)


def sources_damaged(rows: pa.Table) -> npt.NDArray[np.bool_]:
    """`damaged` of knowledge sources, stamped with their `indexed_at` as memories are with
    their `updated_at` (`schema.source_verified`)."""
    return damaged(rows, SOURCE_FIELDS, "indexed_at", restamped=True)


def damaged_ids(
    batches: Iterable[pa.RecordBatch], check: Callable[[pa.Table], npt.NDArray[np.bool_]]
) -> list[str]:
    """The ids of the rows of `batches` (each holding `id` and what `check` reads) that
    `check` finds damaged, in order: a batch at once, a Python object made only per damaged
    row."""
    out: list[str] = []
    for batch in batches:
        rows = pa.Table.from_batches([batch])
        ids = rows.column("id")
        # (by position: a numpy mask made into Arrow imports numpy.ma, 13 ms of a process)
        out += [ids[int(at)].as_py() for at in np.flatnonzero(check(rows))]
    return out
