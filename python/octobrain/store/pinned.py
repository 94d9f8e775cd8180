"""`Pinned`: the `memories` table as of one committed version, read only (what the mirror,
`memory.corpus`, catches up from while writers go on committing)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from octobrain.store import addresses, scans
from octobrain.store.sql import sql_in

if TYPE_CHECKING:
    import lancedb
    import pyarrow as pa


class Pinned:
    """Read-only `memories` as of one committed version (see `MemoryStore.pinned`)."""

    def __init__(self, table: lancedb.table.Table) -> None:
        self._table = table

    def scan_arrow(self, where: str, *, columns: Sequence[str]) -> pa.Table:
        return scans.scan_arrow(self._table, where, columns, None)

    def scan_batches(
        self, where: str, *, columns: Sequence[str], batch_rows: int
    ) -> Iterator[pa.RecordBatch]:
        """`scan_arrow` as batches of at most `batch_rows` rows, read as they are consumed
        (in the same order), so a reader of the whole table never holds all of it."""
        return scans.scan_batches(self._table, where, columns, batch_rows)

    def count(self) -> int:
        """Rows at this version (from the manifest: no data is read)."""
        return int(self._table.count_rows())

    def changes(
        self, where: str, *, ids: Sequence[str] = (), addrs: Sequence[int] = ()
    ) -> tuple[list[int], int, set[str], dict[int, str]]:
        """The row addresses matching `where`, the row count, which of `ids` the table holds and
        the id at each of the row addresses `addrs` (`store.addresses.changes`)."""
        return addresses.changes(self._table, where, sql_in("id", ids) if ids else None, addrs)

    def take(self, addrs: Sequence[int], columns: Sequence[str]) -> pa.Table:
        """`columns` of the rows at these row addresses (`store.addresses.take`)."""
        return addresses.take(self._table, addrs, columns)
