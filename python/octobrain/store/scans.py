"""The scans every read of a table goes through: its rows matching a predicate, whole or in
batches, with a column a later octobrain added (`schema.missing_columns`) read as nulls until a
writer adds it (`upkeep.add_later_columns`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from octobrain.store import schema
from octobrain.store.sql import sql_in

if TYPE_CHECKING:
    import lancedb
    import pyarrow as pa


def scan_arrow(
    table: lancedb.table.Table, where: str, columns: Sequence[str] | None, limit: int | None
) -> pa.Table:
    """The rows matching `where`. A column added after a store was made (`schema.
    missing_columns`) reads as nulls until a writer adds it: a reader without write access
    to an old store must still open it."""
    query = table.search().where(where)
    later = {f.name: f for f in schema.missing_columns(table.schema)}
    absent = [c for c in columns or () if c in later]
    if columns is not None:
        query = query.select([c for c in columns if c not in later])
    rows: pa.Table = query.limit(limit).to_arrow()
    return _with_absent(rows, columns, later, absent)


def _with_absent(
    rows: Any, columns: Sequence[str] | None, later: dict[str, Any], absent: list[str]
) -> Any:
    """`rows` (a table or a batch) with the columns in `absent` added as nulls, in the order
    of `columns`."""
    import pyarrow as pa

    if not absent:
        return rows
    assert columns is not None
    for name in absent:
        rows = rows.append_column(later[name], pa.nulls(rows.num_rows, later[name].type))
    return rows.select(list(columns))


def held(table: lancedb.table.Table, ids: Sequence[str]) -> set[str]:
    """Which of `ids` are the id of a row of `table`."""
    if not ids:
        return set()
    return set(scan_arrow(table, sql_in("id", ids), ["id"], None)["id"].to_pylist())


def scan_batches(
    table: lancedb.table.Table, where: str, columns: Sequence[str], batch_rows: int
) -> Iterator[pa.RecordBatch]:
    """The rows matching `where` as record batches of at most `batch_rows` rows, in scan
    order, read as they are consumed (missing columns as in `scan_arrow`)."""
    later = {f.name: f for f in schema.missing_columns(table.schema)}
    absent = [c for c in columns if c in later]
    query = table.search().where(where).select([c for c in columns if c not in later])
    reader = query.limit(None).to_batches(batch_rows)
    for batch in reader:
        if batch.num_rows:
            yield _with_absent(batch, columns, later, absent)
