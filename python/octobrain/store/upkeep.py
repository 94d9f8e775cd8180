"""The store's upkeep: compaction (small fragments merged, deletions folded, versions past
`KEEP_VERSIONS_FOR` cleaned up), the indexes that pay at the table's size, `reindex`, the
maintenance pass every `COMPACT_EVERY` commits (run after the answer where it is deferred), and
a table an earlier octobrain made brought up to the current columns, the checksum stamped on
the rows that lack a valid one."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from octobrain.errors import StorageError
from octobrain.models import KEEP_VERSIONS_DAYS
from octobrain.store import manifest, schema
from octobrain.store.columns import check_later_columns
from octobrain.store.failures import io_failure
from octobrain.store.forgotten import (
    FORGOTTEN,
    FORGOTTEN_CHECKED,
    forgotten_checksum,
    forgotten_schema,
)
from octobrain.store.journal_rows import (
    RECORD_CHECKED,
    consolidations_schema,
    record_checksum,
)
from octobrain.store.lancedb_import import import_lancedb
from octobrain.store.scans import scan_arrow, scan_batches
from octobrain.store.sql import DELETE_BATCH, sql_in

if TYPE_CHECKING:
    import lancedb
    import pyarrow as pa

    from octobrain.store.memories import MemoryStore

log = logging.getLogger(__name__)

COMPACT_EVERY = 64  # commits between maintenance passes
# Old table versions are the undo history (`octobrain memory history` / `restore`).
KEEP_VERSIONS_FOR = timedelta(days=KEEP_VERSIONS_DAYS)
SCALAR_INDEX_MIN_ROWS = 5_000
VECTOR_INDEX_MIN_ROWS = 50_000  # where the exact in-process scan hands over to LanceDB


def compact(store: MemoryStore) -> None:
    """Merge small fragments, fold deletions, update indexes and drop versions older than
    `KEEP_VERSIONS_FOR` (long enough for any in-flight reader), so reads stay fast after
    many small writes. Creates the indexes that pay at the current size."""
    import_lancedb()
    from lancedb.index import Bitmap, BTree, IvfPq

    with store.write_lock():
        store.check_lease()
        store.check_deletions()  # (a compaction folds the deleted rows into its files)
        rows = store.memories.count_rows()
        indexed = {ix.columns[0] for ix in store.memories.list_indices()}
        if rows >= SCALAR_INDEX_MIN_ROWS:
            # id: point lookups, access bumps and deletes; title: `memorize`'s look for a copy
            # of its memory (`memory.copies`); scope/state: every read's filter.
            for column in ("id", "title"):
                if column not in indexed:
                    store.memories.create_index(column, config=BTree())
            for column in ("scope", "state"):
                if column not in indexed:
                    store.memories.create_index(column, config=Bitmap())
        if rows >= VECTOR_INDEX_MIN_ROWS and "embedding" not in indexed:
            ivf = IvfPq(
                distance_type="cosine",
                num_partitions=max(2, min(256, int(rows**0.5))),
                num_sub_vectors=_sub_vectors(store.dim),
            )
            store.memories.create_index("embedding", config=ivf)
        stamped = stamp(store, store.memories)  # rows an older octobrain wrote meanwhile
        if stamped:
            log.info("memories: stamped %d rows an older octobrain wrote", stamped)
        store.memories.optimize(cleanup_older_than=KEEP_VERSIONS_FOR)
        store.wrote(store.memories)
        store.relationships.optimize(cleanup_older_than=_companion_keep(store, store.relationships))
        store.wrote(store.relationships)


def _companion_keep(store: MemoryStore, table: lancedb.table.Table) -> timedelta:
    """How far back a companion table's versions are kept: `KEEP_VERSIONS_FOR`, and back to
    the version current when the oldest kept memories version was made, however old (edges
    untouched for ten days are the edges of every memories version since). `restore` maps
    each memories version to the companion version current at that moment; cleaned away,
    a restore brought memories back without their edges."""
    # LanceDB gives version times as naive local times, as `datetime.now()` is.
    oldest: datetime = min(v["timestamp"] for v in store.memories.list_versions())
    current: list[datetime] = [
        v["timestamp"] for v in table.list_versions() if v["timestamp"] <= oldest
    ]
    if not current:
        return KEEP_VERSIONS_FOR
    return max(KEEP_VERSIONS_FOR, datetime.now() - max(current) + timedelta(minutes=1))


def reindex(store: MemoryStore) -> tuple[list[str], list[str]]:
    """Drop every index of the memories table and build again those that pay at its size
    (`compact`): the way back from a damaged or lost index file, which reads would
    otherwise keep tripping over. Returns the indexes dropped and those built. Every row
    is read first: over rows that cannot be read the indexes cannot be built again, and
    dropping them would change the store for nothing (that damage is `doctor`'s to name)."""
    with store.write_lock():
        try:
            for _ in store.memories.search().limit(None).to_batches():
                pass
        except (OSError, RuntimeError) as exc:
            damage = manifest.read_failure(exc)
            if damage is None:
                raise
            raise StorageError(damage) from exc
        dropped = [ix.name for ix in store.memories.list_indices()]
        for name in dropped:
            store.memories.drop_index(name)
        store.compact()
        built = [ix.name for ix in store.memories.list_indices()]
    return dropped, built


def maybe_maintain(store: MemoryStore) -> None:
    """Compact every `COMPACT_EVERY` commits (call with the write lock held), or, where
    maintenance is deferred, note that it is due."""
    if store.memories.version % COMPACT_EVERY == 0:
        if store.defer_maintenance:
            store._maintenance_due = True
            return
        _maintain(store)


def maintain_if_due(store: MemoryStore) -> bool:
    """Run the maintenance pass a deferred write fell due for; whether it ran."""
    if not store._maintenance_due:
        return False
    store._maintenance_due = False
    _maintain(store)
    return True


def _maintain(store: MemoryStore) -> None:
    # Edges a killed `forget` left and those from a memory to itself (an earlier octobrain
    # wrote them) first, so the compaction folds their deletion in.
    for step in (store.drop_dangling_edges, store.drop_self_links, store.compact):
        try:
            step()
        except Exception:  # maintenance must never fail the write that triggered it
            log.warning("store maintenance failed; it will be retried", exc_info=True)


def add_later_columns(
    store: MemoryStore,
    db: lancedb.DBConnection,
    name: str,
    missing_of: Callable[[pa.Schema], list[pa.Field]],
    checked: Sequence[str],
    sum_of: Callable[[Mapping[str, Any]], int],
) -> lancedb.table.Table:
    """Bring table `name` made by an older version up to the current columns (under the
    write lock; the rows and the model stamp are kept, the new columns start null); when
    the checksum is one of them, each row's is computed from its `checked` columns as the
    row is now (`sum_of`, one more commit): the rows are taken as sound as they are."""
    try:
        with store._lock:
            table = db.open_table(name)
            store.location.to_latest(table)
            missing = missing_of(table.schema)
            if missing:  # another process may have added them while we waited
                known = _OWN_SCHEMAS[name]().names
                check_later_columns(store.location, table, [f.name for f in missing], known)
                store.check_lease()
                table.add_columns(missing)
                store.wrote(table)
                log.info("%s: added columns %s", name, [f.name for f in missing])
                if any(f.name == schema.CHECKSUM for f in missing):
                    stamp(store, table, f"{schema.CHECKSUM} IS NULL", checked, sum_of)
    except (OSError, RuntimeError) as exc:
        raise StorageError(io_failure(store.location, exc)) from exc
    return db.open_table(name)


# The tables `add_later_columns` brings up to date: their columns as octobrain writes them.
_OWN_SCHEMAS: dict[str, Callable[[], pa.Schema]] = {
    schema.MEMORIES: lambda: schema.memories_schema("", 1),
    schema.RELATIONSHIPS: schema.relationships_schema,
    schema.CONSOLIDATIONS: consolidations_schema,
    FORGOTTEN: forgotten_schema,
}
# The tables `MemoryStore.write_lock` brings up to date once a process opened them: what
# `add_later_columns` takes of each (the columns it lacks, those its checksum reads, the sum).
LATER_COLUMNS: dict[
    str,
    tuple[Callable[[pa.Schema], list[pa.Field]], Sequence[str], Callable[[Mapping[str, Any]], int]],
] = {
    schema.MEMORIES: (schema.missing_columns, schema.CHECKED, schema.checksum),
    schema.RELATIONSHIPS: (
        schema.missing_checksum_column,
        schema.EDGE_CHECKED,
        schema.edge_checksum,
    ),
    schema.CONSOLIDATIONS: (schema.missing_checksum_column, RECORD_CHECKED, record_checksum),
    FORGOTTEN: (schema.missing_checksum_column, FORGOTTEN_CHECKED, forgotten_checksum),
}


def stamp(
    store: MemoryStore,
    table: lancedb.table.Table,
    where: str | None = None,
    checked: Sequence[str] = schema.CHECKED,
    sum_of: Callable[[Mapping[str, Any]], int] = schema.checksum,
) -> int:
    """Under the write lock: set the checksum (`sum_of` its `checked` columns) of the rows
    matching `where`, else of every memory without a valid stamp (written before the
    column, or since by an older octobrain, which keeps the column as it was), as they are
    now, in one commit. Returns how many."""
    wheres = [where] if where is not None else []
    if where is None:
        narrow = scan_arrow(table, "true", ["id", "updated_at", schema.CHECKSUM], None)
        ids = narrow["id"].filter(schema.unstamped_mask(narrow)).to_pylist()
        step = DELETE_BATCH
        wheres = [sql_in("id", ids[at : at + step]) for at in range(0, len(ids), step)]
    batches = (b for w in wheres for b in scan_batches(table, w, list(checked), DELETE_BATCH))
    data = schema.stamps(batches, sum_of)
    if data.num_rows:
        store.check_lease()
        table.merge_insert("id").when_matched_update_all().execute(data)
        store.wrote(table)
    return int(data.num_rows)


def _sub_vectors(dim: int) -> int:
    """The largest divisor of `dim` that is at most dim/8 (PQ needs an exact split)."""
    target = max(1, dim // 8)
    return next(d for d in range(target, 0, -1) if dim % d == 0)
