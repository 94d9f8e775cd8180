"""Stored embeddings read back as one matrix, and the check that each is still unit length."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

# Every embedder (`embed.base`) and `memory import` store unit-length vectors: one further from
# it than float32 rounding was changed on disk (Lance keeps no checksum of its data pages, so
# such a byte reads back without an error), and scored as it is, a memory holding it outranks
# every other for any query (a relevance of 1e28).
UNIT_SLACK = 1e-3


def vector_matrix(column: pa.Array | pa.ChunkedArray, rows: int) -> np.ndarray[Any, Any]:
    """An `embedding` column (fixed-size lists) as one float32 matrix of `rows` rows, without
    a Python list per row."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    flat = column.flatten().to_numpy(zero_copy_only=False)
    return np.asarray(flat, dtype="<f4").reshape(rows, column.type.list_size)


def unsound(vectors: np.ndarray[Any, Any]) -> tuple[int, int, float] | None:
    """Of the rows of `vectors` (a float32 matrix) that are not unit length within
    `UNIT_SLACK` (NaN and inf are not): how many, the first's position and its length; None
    when every row is."""
    lengths = np.sqrt(np.einsum("ij,ij->i", vectors, vectors, dtype=np.float64))
    bad = np.flatnonzero(~(np.abs(lengths - 1.0) <= UNIT_SLACK))
    if not len(bad):
        return None
    return len(bad), int(bad[0]), float(lengths[bad[0]])


def describe_unsound(first: str, length: float, count: int, row: str = "memory") -> str:
    """What the store says of the rows `unsound` found: the first (`row` and its name), its
    length, and how many more."""
    more = f" (and {count - 1:,} more)" if count > 1 else ""
    return (
        f"{row} {first}{more} holds an embedding of length {length:.3g}, not 1: a data file "
        "changed on disk"
    )
