"""How the mirror (`octobrain.memory.corpus`) reads the store: the columns it mirrors, the latest
table versions, changed rows at a pinned version, Arrow columns as numpy arrays; and how it
reads its own rows (`take_rows`, `list_holds`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from octobrain.errors import StorageError
from octobrain.store import MemoryStore, addresses
from octobrain.store.lancedb_import import lancedb_loop
from octobrain.store.pinned import Pinned
from octobrain.store.schema import REEMBED
from octobrain.store.sql import sql_in
from octobrain.store.unit_vectors import describe_unsound, unsound, vector_matrix

LIGHT_COLUMNS = [
    "id",
    "scope",
    "role",
    "memory_type",
    "title",
    "content",
    "tags",
    "related_files",
    "importance",
    "pre_consolidation_importance",
    "source",
    "state",
    "created_at",
    "updated_at",
    "last_accessed",
    "access_count",
    "git_commit",
    "context",
    "checksum",  # (checked as each shown memory is made: `schema.row_to_memory`)
]
# The mirror's columns held as small integer codes per position: its name -> the table's column.
CODED = {"scope": "scope", "state": "state", "type": "memory_type"}
# What the mirror reads of a row: its mirrored columns, the embedding and the row address.
READ = [*LIGHT_COLUMNS, "embedding", addresses.ADDR]


def int64s(column: pa.ChunkedArray | pa.Array) -> npt.NDArray[np.int64]:
    """A timestamp or integer column as int64 numbers (microseconds for timestamps)."""
    return np.asarray(pc.cast(column, pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)


def texts_of(rows: pa.Table) -> list[str]:
    """`Memory.searchable_text` of each row, without making the memories."""
    parts = [
        rows.column("title").to_pylist(),
        rows.column("content").to_pylist(),
        rows.column("context").to_pylist(),
        rows.column("tags").to_pylist(),
        rows.column("related_files").to_pylist(),
    ]
    out = []
    for title, content, context, tags, files in zip(*parts, strict=True):
        pieces = (title, content, context, " ".join(tags or ()), " ".join(files or ()))
        out.append(" ".join(p for p in pieces if p))
    return out


def latest_versions(store: MemoryStore) -> tuple[int, int]:
    """The latest committed versions of `memories` and `relationships`, probed together.

    Each probe re-reads the table's newest manifest (so another process's acknowledged write is
    seen by the next query); through lancedb's sync API every probe is a separate hand-off to
    its background event loop, which on a busy 2-core machine cost as much as the I/O. Both
    probes go in one hand-off and run concurrently; without lancedb's async handle (another
    lancedb) they run one after the other.
    """
    loop = lancedb_loop()

    inner: list[Any] = [getattr(t, "_table", None) for t in (store.memories, store.relationships)]
    if not all(hasattr(t, "version") for t in inner):
        return store.version(), store.relationships_version()

    async def both() -> tuple[int, int]:
        import asyncio

        first, second = await asyncio.gather(inner[0].version(), inner[1].version())
        return int(first), int(second)

    versions: tuple[int, int] = loop.run(both())
    return versions


def read_rows(pinned: Pinned, ids: list[str], total: int) -> pa.Table:
    """What the mirror reads (`READ`) of the rows `ids`, at the pinned version."""
    if len(ids) > total // 2:  # mostly new (a first load): one full scan beats an IN list
        table = pinned.scan_arrow("true", columns=READ)
        return table.filter(pc.is_in(table.column("id"), value_set=pa.array(ids, pa.string())))
    return pinned.scan_arrow(sql_in("id", ids), columns=READ)


def vectors_of(rows: pa.Table) -> npt.NDArray[np.float32]:
    """The `embedding` column as one float32 matrix, without a Python list per row; each
    checked for unit length (`check_unit`)."""
    vectors = vector_matrix(rows.column("embedding"), len(rows))
    check_unit(vectors, rows.column("id"))
    return vectors


class DamagedVectors(StorageError):
    """Stored embeddings that are not unit length (`unit_vectors.unsound`): a damaged data file of
    `memories`, never searched (it would outrank every other memory for any query)."""

    def __init__(self, first: str, length: float, count: int) -> None:
        super().__init__(
            f"store: table 'memories' is damaged: {describe_unsound(first, length, count)}; "
            f"it is not searched. Run `octobrain doctor` for details. To repair: {REEMBED}"
        )


def check_unit(vectors: npt.NDArray[np.float32], ids: pa.ChunkedArray | pa.Array) -> None:
    """Refuse (`DamagedVectors`) rows whose stored embedding is not unit length."""
    found = unsound(vectors)
    if found is not None:
        count, at, length = found
        raise DamagedVectors(str(ids[at]), length, count)


def sorted_ids(
    ids: pa.ChunkedArray, live: npt.NDArray[np.bool_]
) -> tuple[npt.NDArray[np.bytes_], npt.NDArray[np.int64]]:
    """The live rows' ids, sorted, as fixed-width bytes, and the position of each."""
    keyed = pc.cast(pc.if_else(pa.array(live), ids, None), pa.binary())
    order = np.asarray(pc.sort_indices(keyed), dtype=np.int64)
    order = order[: int(np.count_nonzero(live))]
    taken = keyed.take(pa.array(order))
    taken = taken.combine_chunks() if isinstance(taken, pa.ChunkedArray) else taken
    if len(taken):  # ids of one length (uuids): their bytes are the fixed-width array already
        ends = np.frombuffer(taken.buffers()[1], dtype=np.int32)[taken.offset :][: len(taken) + 1]
        width = int(ends[1] - ends[0])
        if width > 0 and bool(np.all(np.diff(ends) == width)):
            data = np.frombuffer(taken.buffers()[2], dtype=np.uint8)[ends[0] : ends[-1]]
            return data.view(f"S{width}").copy(), order
    found = taken.to_pylist()
    held = np.array(found, dtype=np.bytes_) if found else np.zeros(0, dtype="S1")
    return held, order


def merged_ids(
    held: npt.NDArray[np.bytes_],
    order: npt.NDArray[np.int64],
    ids: pa.ChunkedArray,
    live: npt.NDArray[np.bool_],
    start: int,
) -> tuple[npt.NDArray[np.bytes_], npt.NDArray[np.int64]] | None:
    """`sorted_ids` of every position, from `held` and `order` (`sorted_ids` of the positions
    before `start`, some removed since) and `ids` (the rows' from `start` on): only those
    are sorted, and merged in, in linear time (re-sorting 100k ids was 30-90 ms of a snapshot
    write's request path). `live` is over every position. None when the merge could differ
    from a sort of them all (ids not all of one length): the caller sorts them all."""
    kept = live[order]
    old_ids, old_order = held[kept], np.asarray(order[kept], dtype=np.int64)
    new_ids, new_order = sorted_ids(ids, live[start:])
    width = held.dtype.itemsize
    if not len(old_ids) or (len(new_ids) and new_ids.dtype.itemsize != width):
        return None
    for part in (old_ids, new_ids):  # (a shorter id ends in the padding's zero byte)
        if len(part) and not part.view(np.uint8).reshape(-1, width)[:, -1].all():
            return None
    # Each new id after the equal ones held (positions before `start`), as a stable sort puts it.
    at = np.searchsorted(old_ids, new_ids, side="right") + np.arange(len(new_ids))
    out_ids = np.empty(len(old_ids) + len(new_ids), dtype=held.dtype)
    out_order = np.empty(len(out_ids), dtype=np.int64)
    rest = np.ones(len(out_ids), dtype=bool)
    rest[at] = False
    out_ids[at], out_ids[rest] = new_ids, old_ids
    out_order[at], out_order[rest] = new_order + start, old_order
    return out_ids, out_order


def take_rows(rows: pa.Table, positions: Sequence[int] | npt.NDArray[np.int64]) -> pa.Table:
    """The rows at `positions`, in order, taken chunk by chunk. Arrow's take on a table of
    several chunks (the snapshot's rows, then the rows read since) first copies every
    chunk into one: at 100k memories, 83 MB copied by each query of a resident service
    that had caught up, and every page of the snapshot's mapped rows made resident."""
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


# Per (list column, Arrow chunk): each flattened value's code and parent row, and the values.
ListCodes = dict[tuple[str, int], tuple[npt.NDArray[np.int32], list[str]]]


def list_holds(
    rows: pa.Table, column: str, wanted: set[str], size: int, cache: ListCodes
) -> npt.NDArray[np.bool_]:
    """A mask over `size` positions of the rows whose list `column` holds any of `wanted`
    (from encodings of the list values, one per Arrow chunk, kept in `cache` until the rows
    change)."""
    hit = np.zeros(size, dtype=bool)
    start = 0
    for i, chunk in enumerate(rows.column(column).chunks):
        if not pa.types.is_list(chunk.type):  # an empty store's column has no type yet
            start += len(chunk)
            continue
        key = (column, i)
        if key not in cache:
            encoded = pc.dictionary_encode(pc.list_flatten(chunk))
            values = encoded.dictionary.to_pylist()
            parents = np.asarray(pc.list_parent_indices(chunk), dtype=np.int32)
            codes = np.asarray(encoded.indices, dtype=np.int32)
            cache[key] = (np.stack([codes, parents]), values)
        codes_parents, values = cache[key]
        want = [j for j, v in enumerate(values) if v in wanted]
        if want:
            sel = np.isin(codes_parents[0], want)
            hit[start + codes_parents[1][sel]] = True
        start += len(chunk)
    return hit
