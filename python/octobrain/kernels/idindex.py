"""Which rows of an Arrow table hold any of a few string ids, without reading every row.

`IdIndex` files each row under the 64-bit hashes of its ids (Rust: `rust/src/idindex.rs`),
sorted once, so a lookup costs a binary search per id asked instead of a scan of the columns.
A hash may be shared, so `rows_of` returns candidates; `IdIndex.touching` compares their ids and
returns exactly the rows that hold one of the ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from octobrain import _core

__all__ = ["IdIndex", "rows_holding", "string_layout"]


def string_layout(
    values: pa.Array | pa.ChunkedArray,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8]]:
    """A string column as Arrow lays it out: (offsets, data), string i being
    `data[offsets[i]:offsets[i + 1]]` (a null reads as "")."""
    array = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if array.null_count:
        array = pc.fill_null(array, "")
    width: type[np.signedinteger[Any]]
    if pa.types.is_string(array.type):
        width = np.int32
    elif pa.types.is_large_string(array.type):
        width = np.int64
    else:
        raise TypeError(f"values: must be strings, got {array.type}")
    _, offsets, data = array.buffers()
    assert offsets is not None  # (a string array always has them)
    starts = np.frombuffer(
        offsets, dtype=width, count=len(array) + 1, offset=array.offset * np.dtype(width).itemsize
    )
    payload = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    return starts.astype(np.int64), payload


def rows_holding(table: pa.Table, columns: Sequence[str], ids: Sequence[str]) -> pa.Table:
    """The rows of `table` holding one of `ids` in any of `columns`: a scan of those columns."""
    wanted = pa.array(list(ids), pa.string())
    hit = None
    for column in columns:
        match = pc.is_in(table.column(column), value_set=wanted)
        hit = match if hit is None else pc.or_(hit, match)
    return table.filter(hit) if hit is not None else table


class IdIndex:
    """The rows of `table` by the ids in its string `columns`."""

    def __init__(self, table: pa.Table, columns: Sequence[str]) -> None:
        self.table, self.columns = table, list(columns)
        self._inner = _core.IdIndex.build([string_layout(table.column(c)) for c in columns])

    def rows_of(self, ids: Sequence[str]) -> npt.NDArray[np.uint32]:
        """Candidate rows (ascending): every row holding one of `ids`, and perhaps a few more
        whose id shares a hash with one."""
        offsets, data = string_layout(pa.array(list(ids), pa.string()))
        return self._inner.rows_of(offsets, data)

    def touching(self, ids: Sequence[str]) -> pa.Table:
        """The rows of the table that hold one of `ids` in any of the indexed columns."""
        candidates = self.table.take(pa.array(self.rows_of(ids), pa.uint32()))
        return rows_holding(candidates, self.columns, ids)
