"""Reads of a LanceDB table by Lance row address (`_rowaddr` = fragment id << 32 | offset), for
the mirror's catch-up (`octobrain.memory.catchup`): the addresses of the rows a predicate
matches without reading any column, and rows taken by address.

Each call goes through lancedb's async handle in one hand-off to its event loop: through the
sync API every read is several hand-offs, and on a busy 2-core machine a catch-up after one
commit was mostly those. Without the async handle (another lancedb) the reads run one after
the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from octobrain.store import schema
from octobrain.store.lancedb_import import lancedb_loop

if TYPE_CHECKING:
    import lancedb
    import pyarrow as pa

ADDR = "_rowaddr"
Listed = tuple[list[int], int, set[str], dict[int, str]]


def _placed(table: pa.Table) -> dict[int, str]:
    """Row address → id, of a table of both."""
    pairs = zip(table.column(ADDR).to_pylist(), table.column("id").to_pylist(), strict=True)
    return {int(a): str(i) for a, i in pairs}


def changes(
    table: lancedb.table.Table, where: str, ids_where: str | None, addrs: Sequence[int]
) -> Listed:
    """The row addresses matching `where` (no column is read: selecting any made Lance read it
    for every row), the row count, the ids matching `ids_where` (None: none asked), and the id
    at each of `addrs` (an address where no row is left out)."""
    loop = lancedb_loop()

    inner: Any = getattr(table, "_table", None)
    if not hasattr(inner, "query"):
        rows = table.search().where(where).select([ADDR]).limit(None).to_arrow()
        found = table.search().where(ids_where).select(["id"]).limit(None) if ids_where else None
        return (
            [int(a) for a in rows.column(ADDR).to_pylist()],
            int(table.count_rows()),
            set(found.to_arrow().column("id").to_pylist()) if found is not None else set(),
            _placed(take(table, addrs, ["id", ADDR])) if addrs else {},
        )

    async def together() -> Listed:
        import asyncio  # (only here: a process reading its snapshot never loads it)

        reads = [inner.query().where(where).select([ADDR]).to_arrow(), inner.count_rows()]
        if ids_where:
            reads.append(inner.query().where(ids_where).select(["id"]).to_arrow())
        if addrs:
            reads.append(
                inner.take_row_ids([int(a) for a in addrs]).select(["id", ADDR]).to_arrow()
            )
        got = list(await asyncio.gather(*reads))
        placed = _placed(got.pop()) if addrs else {}
        found = set(got.pop().column("id").to_pylist()) if ids_where else set()
        listed = [int(a) for a in got[0].column(ADDR).to_pylist()]
        return listed, int(got[1]), found, placed

    result: Listed = loop.run(together())
    return result


def take(table: lancedb.table.Table, addrs: Sequence[int], columns: Sequence[str]) -> pa.Table:
    """`columns` of the rows at these row addresses (taken as row ids: octobrain's tables have
    no stable row ids, so the two are one; a row that is not there is left out). A column added
    after the store was made (`schema.missing_columns`) reads as nulls."""
    import pyarrow as pa

    loop = lancedb_loop()

    inner: Any = getattr(table, "_table", None)
    wanted = [int(a) for a in addrs]

    async def read() -> tuple[pa.Schema, pa.Table]:
        table_schema = await inner.schema()
        later = {f.name for f in schema.missing_columns(table_schema)}
        query = inner.take_row_ids(wanted).select([c for c in columns if c not in later])
        return table_schema, await query.to_arrow()

    if not wanted:  # (an empty take costs as much as reading the table)
        table_schema = table.schema
        fields = {f.name: f for f in table_schema}
        fields |= {f.name: f for f in schema.missing_columns(table_schema)}
        fields[ADDR] = pa.field(ADDR, pa.uint64())
        return pa.schema([fields[c] for c in columns]).empty_table()
    if hasattr(inner, "take_row_ids"):
        table_schema, rows = loop.run(read())
    else:
        table_schema = table.schema
        later_names = {f.name for f in schema.missing_columns(table_schema)}
        query = table.take_row_ids(wanted)
        rows = query.select([c for c in columns if c not in later_names]).to_arrow()
    later = {f.name: f for f in schema.missing_columns(table_schema)}
    for name in [c for c in columns if c in later]:
        rows = rows.append_column(later[name], pa.nulls(rows.num_rows, later[name].type))
    return rows.select(list(columns))
