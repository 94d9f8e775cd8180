"""`MemoryStore`: memories and relationships in embedded LanceDB, safe for several processes.

Concurrency model: every write (add, update, delete, access bump) runs under one cross-process
file lock per store and is a single LanceDB commit, so writers never race each other's
read-modify-write and a killed process leaves either the whole commit or none of it. Readers
take no lock and always see the latest committed version (`read_consistency_interval=0`).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import re
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import numpy.typing as npt

from octobrain.errors import InvalidInput, OctobrainError, StorageError
from octobrain.models import KEEP_VERSIONS_DAYS, Memory, Relationship
from octobrain.store import accessed, addresses, changes, manifest, schema
from octobrain.store.highwater import Commits
from octobrain.store.lancedb_import import import_lancedb
from octobrain.store.lease import LeaseLost
from octobrain.store.location import StoreLocation
from octobrain.store.operations import data_files, upkeep_note
from octobrain.store.sql import sql_in, sql_str, visible_where

if TYPE_CHECKING:
    import lancedb
    import pyarrow as pa

log = logging.getLogger(__name__)

MEMORIES = "memories"
RELATIONSHIPS = "relationships"
LOCK_TIMEOUT_S = 120.0
COMPACT_EVERY = 64  # commits between maintenance passes
DELETE_BATCH = 4_096  # ids per delete predicate (an `IN` list's cost grows with its length)
CLOCK_STEP = timedelta(seconds=1)  # a step back in version times that `restore` refuses
# Old table versions are the undo history (`octobrain memory history` / `restore`).
KEEP_VERSIONS_FOR = timedelta(days=KEEP_VERSIONS_DAYS)
# Tables restored together with `memories` (the consolidation journal lives beside them).
CONSOLIDATIONS = "consolidations"
COMPANION_TABLES = (RELATIONSHIPS, CONSOLIDATIONS)
SCALAR_INDEX_MIN_ROWS = 5_000
VECTOR_INDEX_MIN_ROWS = 50_000  # where the exact in-process scan hands over to LanceDB


# The last bytes of every Lance data file, legacy and v2 formats alike. A file overwritten at
# its own size (zeros, as a crash of some filesystems leaves the blocks last written) keeps
# the size the commit check compares, not these.
LANCE_MAGIC = b"LANC"


def _footer(path: Path, size: int) -> bytes:
    """The last four bytes of the data file `path` of `size` bytes (a regular file: its size
    matched what Lance wrote)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        return os.pread(fd, 4, max(size - 4, 0))
    finally:
        os.close(fd)


def _damaged_file(location: StoreLocation, name: str, version: int) -> str | None:
    """The first data file that `version` of table `name` of a local store reads and that is
    gone, not the size Lance wrote it at, or no longer ends in Lance's footer, in words."""
    assert location.path is not None
    folder = location.path / f"{name}.lance" / "data"
    for path, size in data_files(location, name, version) or ():
        try:
            got = (folder / path).stat().st_size
            if got == size and _footer(folder / path, size) == LANCE_MAGIC:
                continue
        except FileNotFoundError:
            return f"data file {path} is gone"
        except OSError:
            continue  # (access, not damage: the commit says so itself)
        if not size:
            continue
        if got != size:
            return f"data file {path} holds {got:,} bytes, not the {size:,} written"
        return f"data file {path} no longer ends in Lance's footer (overwritten at its size)"
    return None


class ModelMismatch(OctobrainError):
    """The store was embedded with another model than the one configured."""


class NotFound(InvalidInput):
    """A memory id that does not exist or is not visible from this scope (a caller's mistake)."""


class RowChanged(StorageError):
    """A read-modify-write found a row it read changed or gone when it came to commit (another
    writer got the store meanwhile: this one's lease lapsed): nothing was written."""


# What every write of a row changes (`updated_at`; an access bump only `access_count`), so a
# row whose three still hold them is the row as read (`replace`, `merge_rows`).
_FENCE = ("updated_at", "access_count", "state")


def _fence(row: Mapping[str, Any] | Memory) -> tuple[str, datetime, int, str]:
    """(id, updated_at, access_count, state) of a row or memory as read."""
    if isinstance(row, Memory):
        return row.id, row.updated_at, row.access_count, row.state.value
    return row["id"], row["updated_at"], int(row["access_count"]), row["state"]


def _fence_where(read: Memory) -> str:
    """A merge's SQL (on its `target`) true of the row of `read`'s id while it still is as
    `read` was read."""
    memory_id, stamp, accesses, state = _fence(read)
    return (
        f"target.id = {sql_str(memory_id)} AND "
        f"target.updated_at = timestamp {sql_str(stamp.isoformat())} AND "
        f"target.access_count = {accesses} AND target.state = {sql_str(state)}"
    )


@dataclass(frozen=True)
class StoreVersion:
    """One committed version of the memories table."""

    version: int
    timestamp: datetime
    rows: int
    note: str = ""  # what a commit that changed no row did (`manifest.stamp_note`)


def io_failure(path: object, exc: BaseException, done: str = "nothing was changed") -> str:
    """One line for an I/O failure under `path` (LanceDB reports them as RuntimeError), and
    what the write had `done` before it."""
    text = str(exc)
    found = re.search(r"LanceError\(IO\): ([^,\n]+)", text)
    reason = found.group(1) if found else (getattr(exc, "strerror", None) or text.splitlines()[0])
    return f"store: cannot write to {path}: {reason}; {done} (check free space and permissions)"


# An object store that took a commit but whose answer was lost (a timeout, a reset): the
# commit may or may not have landed.
_UNKNOWN_OUTCOME = re.compile(
    r"result for version \d+ is unknown|timed? ?out|connection (?:reset|closed|aborted)", re.I
)


class WriteFailed(StorageError):
    """A commit under the write lock failed (a full disk, permissions). Its line says nothing
    was changed, which holds for that commit; a caller that made commits before it says what
    they stored instead (`after`)."""

    def __init__(self, path: object, exc: BaseException) -> None:
        # A write that read the table's files and found them damaged is damage, not a full
        # disk: said as one, the user went looking for free space and never at `doctor`.
        super().__init__(manifest.read_failure(exc) or io_failure(path, exc))
        self.path, self.cause = path, exc

    def after(self, done: str) -> StorageError:
        """The same failure, saying what the earlier commits of this write `done`."""
        damage = manifest.read_failure(self.cause, done)
        return StorageError(damage or io_failure(self.path, self.cause, done))


def _invisible(memory_id: str, scope: str) -> str:
    return f"no memory {memory_id} is visible from scope {scope or '(global)'!r}"


def _scan_arrow(
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


def _held(table: lancedb.table.Table, ids: Sequence[str]) -> set[str]:
    """Which of `ids` are the id of a row of `table`."""
    if not ids:
        return set()
    return set(_scan_arrow(table, sql_in("id", ids), ["id"], None)["id"].to_pylist())


def _scan_batches(
    table: lancedb.table.Table, where: str, columns: Sequence[str], batch_rows: int
) -> Iterator[pa.RecordBatch]:
    """The rows matching `where` as record batches of at most `batch_rows` rows, in scan
    order, read as they are consumed (missing columns as in `_scan_arrow`)."""
    later = {f.name: f for f in schema.missing_columns(table.schema)}
    absent = [c for c in columns if c in later]
    query = table.search().where(where).select([c for c in columns if c not in later])
    reader = query.limit(None).to_batches(batch_rows)
    for batch in reader:
        if batch.num_rows:
            yield _with_absent(batch, columns, later, absent)


class Pinned:
    """Read-only `memories` as of one committed version (see `MemoryStore.pinned`)."""

    def __init__(self, table: lancedb.table.Table) -> None:
        self._table = table

    def scan_arrow(self, where: str, *, columns: Sequence[str]) -> pa.Table:
        return _scan_arrow(self._table, where, columns, None)

    def scan_batches(
        self, where: str, *, columns: Sequence[str], batch_rows: int
    ) -> Iterator[pa.RecordBatch]:
        """`scan_arrow` as batches of at most `batch_rows` rows, read as they are consumed
        (in the same order), so a reader of the whole table never holds all of it."""
        return _scan_batches(self._table, where, columns, batch_rows)

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


class MemoryStore:
    """The `memories` and `relationships` tables of the LanceDB database at `uri`."""

    # Set by a process that answers others (the resident service): the maintenance pass a
    # write falls due for then waits for `maintain_if_due`, run after the answer, instead of
    # holding up the command whose write happened to be the 64th commit.
    defer_maintenance: ClassVar[bool] = False
    # Cleared by the resident service, which answers the next calls itself: it commits the
    # access counts of its calls rather than keep them for another process (`keep_access`).
    keeps_access: ClassVar[bool] = True

    def __init__(self, uri: str | Path | StoreLocation, model_id: str, dim: int) -> None:
        self._maintenance_due = False
        self.location = uri if isinstance(uri, StoreLocation) else StoreLocation(uri)
        self.model_id = model_id
        self.dim = dim
        self._db: lancedb.DBConnection | None = None
        self._memories: lancedb.table.Table | None = None
        self._relationships: lancedb.table.Table | None = None
        self._lock: Any = None  # the store's write lock once connected
        self._tables: dict[str, lancedb.table.Table] = {}  # other tables, by name (`open_table`)
        self._pinned_tables: dict[str, lancedb.table.Table] = {}  # (`pinned`)
        self._finishing_restore = False  # `restore` opens a store another restore left marked
        self._commits = Commits(self.location.high_water)  # versions recorded per `write_lock`

    def _open_db(self) -> lancedb.DBConnection:
        """Connect and create missing tables; no model check (see `_connect`)."""
        if self._db is not None:
            return self._db
        self._lock = self.location.lock("write", LOCK_TIMEOUT_S)
        try:
            db = self.location.connect()
            interrupted = manifest.interrupted(manifest.adopt_if_new(db, self.location))
            if interrupted is not None and not self._finishing_restore:
                raise StorageError(
                    f"store: {self.location}: {interrupted.reason}; {interrupted.repair}"
                )
            # Creation is a write under the lock (two first runs must not race); a table the
            # manifest lists is never re-created, however it fails to open.
            manifest.open_or_create(
                db,
                self.location,
                MEMORIES,
                lambda: schema.memories_schema(self.model_id, self.dim),
                self._lock,
            )
            manifest.open_or_create(
                db, self.location, RELATIONSHIPS, schema.relationships_schema, self._lock
            )
        except (OSError, RuntimeError) as exc:
            raise StorageError(io_failure(self.location, exc)) from exc
        self._db = db
        return db

    def open_db(self) -> lancedb.DBConnection:
        """The LanceDB connection (for tables beside memories and relationships)."""
        return self._open_db()

    def _connect(self) -> None:
        db = self._open_db()
        memories = db.open_table(MEMORIES)
        self._check_model(memories.schema)
        # Columns a newer version added are added by the first write (`write_lock`), not here:
        # a reader may have no write access (reads treat them as null meanwhile).
        self._memories = memories
        self._relationships = db.open_table(RELATIONSHIPS)
        self.count_kept_access()

    def count_kept_access(self) -> None:
        """Commit the access counts processes of their own kept for the next process that
        opens the tables (`store.accessed`): done as this one opens them, before it reads, so
        it shows them (a long-lived process also asks before each call). Never fails the open:
        an access count is a ranking signal."""
        if self._finishing_restore or self._memories is None:
            return
        try:
            claimed = accessed.claim(self.location)
        except OSError as exc:  # a read-only store still answers questions
            log.warning("access counts not recorded: %s", exc)
            return
        if not claimed:
            return
        kept = accessed.read(claimed)
        try:
            if kept is not None:
                self.record_access(kept.ids, kept.at, min_interval=kept.window)
        except Exception as exc:  # (as above; a damaged table is the read's to report)
            log.warning("access counts not recorded: %s", exc)
            accessed.unclaim(claimed)
        else:
            accessed.remove(claimed)

    def keep_access(self, ids: Sequence[str], now: datetime, *, min_interval: timedelta) -> bool:
        """`record_access` left to the next process that opens the tables (`store.accessed`);
        False when it cannot be (an object store, enough are waiting, or this process is the
        resident service): commit instead."""
        return self.keeps_access and accessed.write(self.location, ids, now, min_interval)

    def kept_access(self) -> accessed.Accessed | None:
        """The accesses kept and not yet committed (`keep_access`)."""
        return accessed.waiting(self.location)

    def _add_later_columns(
        self,
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
            with self._lock:
                table = db.open_table(name)
                self.location.to_latest(table)
                missing = missing_of(table.schema)
                if missing:  # another process may have added them while we waited
                    self.check_lease()
                    table.add_columns(missing)
                    self.wrote(table)
                    log.info("%s: added columns %s", name, [f.name for f in missing])
                    if any(f.name == schema.CHECKSUM for f in missing):
                        self._stamp(table, f"{schema.CHECKSUM} IS NULL", checked, sum_of)
        except (OSError, RuntimeError) as exc:
            raise StorageError(io_failure(self.location, exc)) from exc
        return db.open_table(name)

    def _check_model(self, table_schema: pa.Schema) -> None:
        meta = table_schema.metadata or {}
        stored_model = meta.get(schema.META_MODEL, b"").decode()
        stored_dim = meta.get(schema.META_DIM, b"0").decode()
        if stored_model != self.model_id or stored_dim != str(self.dim):
            raise ModelMismatch(
                f"the memory store at {self.location} was embedded with {stored_model!r} "
                f"(dim {stored_dim}), but the configured model is {self.model_id!r} "
                f"(dim {self.dim}); "
                "run `octobrain memory reembed` to migrate it, or set embedding.model back"
            )

    @property
    def connected(self) -> bool:
        """Whether this handle has opened LanceDB (a read a current snapshot serves never does)."""
        return self._db is not None

    def versions_on_disk(self) -> tuple[int, int] | None:
        """The newest versions of `memories` and `relationships`, read from a local disk without
        LanceDB (`manifest.newest_on_disk`): None where only an open can tell, and when the
        store's manifest is unreadable or says a restore or migrate was cut short (the open
        then refuses the store, naming why)."""
        if self.location.path is None:
            return None
        try:
            if manifest.interrupted(manifest.read(self.location)) is not None:
                return None
        except StorageError:
            return None
        rows = manifest.newest_on_disk(self.location, MEMORIES)
        edges = manifest.newest_on_disk(self.location, RELATIONSHIPS)
        return None if rows is None or edges is None else (rows, edges)

    def open(self) -> None:
        """Connect now, as the first read or write would: import LanceDB, open (or make) the
        tables and check the model."""
        _ = self.memories

    @property
    def memories(self) -> lancedb.table.Table:
        if self._memories is None:
            self._connect()
        assert self._memories is not None
        return self._memories

    @property
    def relationships(self) -> lancedb.table.Table:
        if self._relationships is None:
            self._connect()
        assert self._relationships is not None
        return self._relationships

    @contextlib.contextmanager
    def write_lock(self, *, check_model: bool = True) -> Iterator[None]:
        """Hold the store's cross-process write lock (re-entrant within a process)."""
        try:
            if check_model:
                _ = self.memories  # connect and check the model
            else:
                self._open_db()
            with self._lock:
                # Object storage reads may lag by `remote_refresh_ms`; a read-modify-write under
                # the lock must start from the latest commit.
                self.refresh()
                manifest.check_before_write(
                    self.location, self._memories, self._relationships, *self._tables.values()
                )
                with self._commits.held():
                    if self._memories is not None and schema.missing_columns(self._memories.schema):
                        self._memories = self._add_later_columns(
                            self._open_db(),
                            MEMORIES,
                            schema.missing_columns,
                            schema.CHECKED,
                            schema.checksum,
                        )
                    edges = self._relationships
                    if edges is not None and schema.missing_edge_columns(edges.schema):
                        self._relationships = self._add_later_columns(
                            self._open_db(),
                            RELATIONSHIPS,
                            schema.missing_edge_columns,
                            schema.EDGE_CHECKED,
                            schema.edge_checksum,
                        )
                    if check_model and self._memories is not None:
                        # Another process may have re-embedded the store since this one opened
                        # it: a vector of the old model written now would be found by neither.
                        self._check_model(self._memories.schema)
                    yield
        except OctobrainError:
            raise
        except (OSError, RuntimeError) as exc:
            raise WriteFailed(self.location, exc) from exc

    def wrote(self, *tables: lancedb.table.Table) -> None:
        """Call right after a commit to `tables` under `write_lock`: the versions reached are
        recorded when the lock is let go (`highwater`)."""
        self._commits.wrote(*tables)

    def check_lease(self) -> None:
        """Call just before each commit under `write_lock`: on an object store, `LeaseLost`
        when this process's write lease may have passed to another writer since it was taken
        (paused, or cut off from the store, past the lease's time); nothing when it holds."""
        self.location.check_held()

    def check_commit(self) -> None:
        """`check_lease`, and on a local store, refuse the commit (`TableDamaged`, nothing
        changed) when a data file `memories` or `relationships` reads is gone, not the size
        Lance wrote it at, or no longer ends in Lance's footer: a commit never reads the old
        files, so a write into a damaged table was acknowledged, and the repair (`memory
        restore` of a version before the damage) would drop it. Both tables, as a write to
        one (a `forget`, a memory with links) is followed by one to the other."""
        self.check_lease()
        if self.location.path is None:
            return
        for name, table in ((MEMORIES, self.memories), (RELATIONSHIPS, self.relationships)):
            damage = _damaged_file(self.location, name, table.version)
            if damage is not None:
                raise manifest.TableDamaged(self.location, name, f"{damage}; nothing was changed")

    def refresh(self) -> None:
        """Move this store's table handles to their latest commit (object stores lag by
        `remote_refresh_ms` otherwise); a pass that reads before it locks starts here."""
        self.location.to_latest(self._memories, self._relationships)
        for name, table in list(self._tables.items()):
            # A table started over by another process (`doctor --recreate`) is opened (or
            # made) again by its next use, instead of every write failing on a handle to
            # nothing until this process restarts.
            try:
                gone = self.location.path is not None and self.location.table_gone(name)
                if not gone:
                    self.location.to_latest(table)
            except (OSError, RuntimeError, ValueError):
                if not self.location.table_gone(name):
                    raise
                gone = True
            if gone:
                self._tables.pop(name, None)  # (another thread may have already)

    def open_memories_unchecked(self) -> lancedb.table.Table:
        """The memories table whatever model embedded it (for `reembed` only)."""
        return self._open_db().open_table(MEMORIES)

    def overwrite_memories(self, batches: Iterable[list[dict[str, Any]]]) -> None:
        """Replace the whole memories table in one commit, stamped with this store's model,
        by rows given in batches and written as they come (so the old rows may still be read
        while the batches are made).

        Call under `write_lock(check_model=False)`. LanceDB writes the new rows as a new
        version of the same table, so readers see the old version until the commit lands.
        """
        import pyarrow as pa

        table_schema = schema.memories_schema(self.model_id, self.dim)
        # The stamps of tables made later (`manifest.STAMPED_ON`) go with the rows.
        kept = self.open_memories_unchecked().schema.field("id").metadata
        if kept:
            at = table_schema.get_field_index("id")
            table_schema = table_schema.set(at, table_schema.field("id").with_metadata(kept))
        lost: list[LeaseLost] = []

        def checked() -> Iterator[pa.RecordBatch]:
            # The batches are made (embedded) while the commit streams them: long enough for
            # the write lease to lapse, so it is checked before each and once after the last.
            try:
                for rows in batches:
                    self.check_lease()
                    rows = [schema.stamped(row) for row in rows]
                    yield pa.RecordBatch.from_pylist(rows, schema=table_schema)
                self.check_lease()
            except LeaseLost as exc:
                lost.append(exc)  # LanceDB reports a failed stream as its own error
                raise

        data = pa.RecordBatchReader.from_batches(table_schema, checked())
        db = self._open_db()
        self._note_changes(everything=True)
        try:
            made = db.create_table(MEMORIES, data=data, schema=table_schema, mode="overwrite")
        except Exception:
            if lost:
                raise lost[0] from None
            raise
        self.wrote(made)  # (an overwrite is a new, higher version)
        self._memories = None
        self._relationships = None
        self._pinned_tables = {}

    def version(self) -> int:
        """The latest committed version of `memories` (changes on every write by anyone)."""
        return int(self.memories.version)

    # ---- reads ----------------------------------------------------------------------------

    def count(self, where: str | None = None) -> int:
        """Rows matching `where` (all rows when None)."""
        return int(self.memories.count_rows(where))

    def scan(
        self,
        where: str,
        *,
        columns: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """Rows matching a predicate, as dicts (no ordering guarantee; no limit by default)."""
        rows: list[dict[str, Any]] = _scan_arrow(self.memories, where, columns, limit).to_pylist()
        return rows

    def scan_arrow(self, where: str, *, columns: Sequence[str] | None = None) -> pa.Table:
        """Rows matching a predicate as an Arrow table (cheap for a few narrow columns)."""
        return _scan_arrow(self.memories, where, columns, None)

    def held(self, ids: Sequence[str]) -> set[str]:
        """Which of `ids` the store holds (any scope, any state)."""
        return _held(self.memories, ids)

    def scopes_of(self, ids: Sequence[str]) -> dict[str, str]:
        """The scope of each of `ids` the store holds (any scope, any state)."""
        return self.values_of(ids, "scope")

    def values_of(self, ids: Sequence[str], column: str) -> dict[str, Any]:
        """`column` of each of `ids` the store holds (any scope, any state)."""
        if not ids:
            return {}
        rows = _scan_arrow(self.memories, sql_in("id", ids), ["id", column], None)
        return dict(zip(rows["id"].to_pylist(), rows[column].to_pylist(), strict=True))

    def held_relationships(self, ids: Sequence[str]) -> set[str]:
        """Which of the edge ids `ids` the store holds (whatever their ends)."""
        return _held(self.relationships, ids)

    def pinned(self, version: int) -> Pinned:
        """`memories` frozen at `version`: several reads through it see the same rows, whatever
        other processes commit meanwhile (each read through the store sees the latest)."""
        _ = self.memories  # connect and check the model
        return self._pinned_at(MEMORIES, version)

    def snapshot(self, version: int) -> Pinned:
        """`memories` frozen at `version` on a handle of its own, for a long read: `pinned`
        shares one handle, which the next `pinned` (a background sleep pass catching the
        mirror up) moves to another version."""
        _ = self.memories  # connect and check the model
        table = self._open_db().open_table(MEMORIES)
        table.checkout(version)
        return Pinned(table)

    def pinned_relationships(self, version: int) -> Pinned:
        """`relationships` frozen at `version` (as `pinned`)."""
        return self._pinned_at(RELATIONSHIPS, version)

    def _pinned_at(self, name: str, version: int) -> Pinned:
        # One handle per table, moved to each version asked for (opening one per catch-up
        # cost more than the catch-up's reads); a `Pinned` is used before the next is made.
        table = self._pinned_tables.get(name)
        if table is None:
            table = self._pinned_tables[name] = self._open_db().open_table(name)
        table.checkout(version)
        return Pinned(table)

    def changes_since(self, table: str, version: int) -> changes.Changes:
        """What octobrain's commits after `version` of `table` removed (`store.changes`)."""
        return changes.since(self.location, table, version)

    def _note_changes(
        self, *, ids: Sequence[str] = (), edges: Sequence[str] = (), everything: bool = False
    ) -> None:
        """Record what the next commit removes, before it is made (under the write lock; the
        tables are opened afresh: their latest versions, whatever model embedded them)."""
        db = self._open_db()
        versions = {name: int(db.open_table(name).version) for name in (MEMORIES, RELATIONSHIPS)}
        changes.note(self.location, versions, ids=ids, edges=edges, everything=everything)

    def get(
        self, memory_id: str, scope: str, field_name: str = "memory_id", *, checked: bool = True
    ) -> Memory:
        """A memory visible from `scope` (archived included), or `NotFound` naming `field_name`
        (`checked`: `schema.row_to_memory`)."""
        rows = self.scan(
            f"id = {sql_str(memory_id)} AND {visible_where(scope, include_archived=True)}", limit=1
        )
        if not rows:
            raise NotFound(field_name, _invisible(memory_id, scope))
        return schema.row_to_memory(rows[0], checked=checked)

    def ids_with_prefix(self, prefix: str, scope: str, limit: int) -> list[tuple[str, str]]:
        """`(id, title)` of up to `limit` memories visible from `scope` (archived included)
        whose id starts with `prefix` (lowercase hex and hyphens only)."""
        if not prefix or set(prefix) - set("0123456789abcdef-"):
            raise ValueError(f"not an id prefix: {prefix!r}")
        rows = self.scan(
            f"id LIKE '{prefix}%' AND {visible_where(scope, include_archived=True)}",
            columns=["id", "title"],
            limit=limit,
        )
        return sorted((row["id"], row["title"]) for row in rows)

    def get_many(
        self, ids: Sequence[str], scope: str, *, checked: bool = True
    ) -> dict[str, Memory]:
        """The visible memories among `ids`, keyed by id (`checked`: `schema.row_to_memory`)."""
        if not ids:
            return {}
        rows = self.scan(f"{sql_in('id', ids)} AND {visible_where(scope, include_archived=True)}")
        return {row["id"]: schema.row_to_memory(row, checked=checked) for row in rows}

    def vector_search(
        self, vector: np.ndarray, where: str | None, k: int, *, nprobes: int | None = None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """Row addresses of the `k` nearest rows matching `where` (None: any row), best first,
        with their cosine similarity: from the ANN index where one exists (`nprobes`
        partitions probed; approximate, so the search re-scores them exactly), and exact for
        the rows added since it was built. Addresses, not ids: Lance hands them over without
        reading a column of the scattered candidates."""
        # A vector query builder; lancedb's annotations only promise the base class.
        query: Any = self.memories.search(
            np.asarray(vector, dtype=np.float32), vector_column_name="embedding"
        )
        query = query.distance_type("cosine")
        if where is not None:
            query = query.where(where, prefilter=True)
        if nprobes is not None:
            query = query.nprobes(nprobes)
        table = query.select([addresses.ADDR, "_distance"]).limit(k).to_arrow()
        addrs = table.column(addresses.ADDR).to_numpy().astype(np.int64)
        cosines = 1.0 - table.column("_distance").to_numpy().astype(np.float64)
        return addrs, cosines

    def version_fingerprint(self, version: int) -> str | None:
        """What tells this store's `version` of `memories` from another store's at the same
        number: a checksum of that version's Lance manifest, which names the version's data
        files (random names), so two stores never share it, while a copy of this one (a backup
        restored) does. None on object storage, or once the version was cleaned up."""
        path = manifest.version_manifest(self.location, MEMORIES, version)
        try:
            return None if path is None else format(zlib.crc32(path.read_bytes()), "08x")
        except OSError:  # cleaned up meanwhile
            return None

    def relationships_version(self) -> int:
        """The latest committed version of `relationships`."""
        return int(self.relationships.version)

    def all_relationships(self) -> list[Relationship]:
        """Every edge in the store."""
        return [r for batch in self.relationship_batches(4096) for r in batch]

    def relationship_batches(self, batch_rows: int) -> Iterator[list[Relationship]]:
        """Every edge in the store, at most `batch_rows` at a time, read as they are consumed
        (at the version the first batch reads)."""
        columns = self.relationships.schema.names
        for batch in _scan_batches(self.relationships, "true", columns, batch_rows):
            yield [schema.row_to_relationship(r) for r in batch.to_pylist()]

    def sources_to(self, target_id: str, relationship_type: str) -> list[str]:
        """The source ids of the edges of one type that point at `target_id` (one narrow read:
        a goal may have tens of thousands of findings)."""
        where = (
            f"target_id = {sql_str(target_id)} AND relationship_type = {sql_str(relationship_type)}"
        )
        rows = _scan_arrow(self.relationships, where, ["source_id"], None)
        return list(dict.fromkeys(rows["source_id"].to_pylist()))

    def sources_of(self, relationship_type: str) -> set[str]:
        """The source ids of every edge of one type (read by the type alone: a caller asking
        which of 200,000 ids is one names none of them in the query)."""
        where = f"relationship_type = {sql_str(relationship_type)}"
        return set(
            _scan_arrow(self.relationships, where, ["source_id"], None)["source_id"].to_pylist()
        )

    def relationships_of(self, ids: Sequence[str]) -> list[Relationship]:
        """Every edge touching any of `ids`, in either direction."""
        if not ids:
            return []
        where = f"{sql_in('source_id', ids)} OR {sql_in('target_id', ids)}"
        rows = self.relationships.search().where(where).limit(None).to_list()
        return [schema.row_to_relationship(r) for r in rows]

    # ---- writes ---------------------------------------------------------------------------

    def add(
        self,
        memories: Sequence[Memory],
        embeddings: np.ndarray,
        links: Sequence[Relationship] = (),
        *,
        drop_gone_links: bool = False,
    ) -> int:
        """Append memories (one commit) and their edges (one more). Ids must be new. An edge
        with an end neither held nor among `memories` (deleted since the caller looked) is
        `NotFound`, or with `drop_gone_links` left out. Returns the edges written."""
        embeddings = np.asarray(embeddings, dtype=np.float32)
        if embeddings.shape != (len(memories), self.dim):
            raise InvalidInput(
                "embeddings",
                f"must have shape ({len(memories)}, {self.dim}), got {embeddings.shape}",
            )
        rows = [
            schema.stamped(schema.memory_to_row(m, e))
            for m, e in zip(memories, embeddings, strict=True)
        ]
        with self.write_lock():
            links = self.require_ends(links, {m.id for m in memories}, drop=drop_gone_links)
            self.check_commit()
            if rows:
                self._append(self.memories, rows)
            if links:
                try:
                    self._append(self.relationships, [schema.relationship_to_row(r) for r in links])
                except (OSError, RuntimeError, StorageError) as exc:
                    self._take_back([m.id for m in memories], exc)
                    raise
            self._maybe_maintain()
        return len(links)

    def _append(self, table: lancedb.table.Table, rows: list[dict[str, Any]]) -> None:
        """Append `rows` (each with a new `id`) in one commit. When the store's answer to the
        commit is lost, read back whether it landed: a caller told "nothing was changed" sends
        the write again, and a write that had landed would be stored twice."""
        try:
            table.add(rows)
            self.wrote(table)
        except (OSError, RuntimeError) as exc:
            if not _UNKNOWN_OUTCOME.search(str(exc)):
                raise
            ids = [row["id"] for row in rows]
            reason = manifest.short_reason(exc)
            try:
                table.checkout_latest()  # type: ignore[no-untyped-call]
                landed = _held(table, ids)
            except (OSError, RuntimeError) as again:
                raise StorageError(
                    f"store: {self.location}: the answer to a commit was lost ({reason}), and "
                    f"reading back failed too ({manifest.short_reason(again)}): the write may "
                    "have landed; look (`octobrain memory recent`) before sending it again"
                ) from exc
            if landed != set(ids):  # one commit: all of it or none
                raise StorageError(
                    f"store: {self.location}: the answer to a commit was lost ({reason}); read "
                    "back, the write is not in the store: nothing was changed, it can be sent "
                    "again"
                ) from exc
            log.info("store: a commit's answer was lost (%s); read back, it landed", reason)

    def _take_back(self, ids: Sequence[str], exc: BaseException) -> None:
        """The edge commit of `add` failed after its memories were committed: delete them
        again, so the write is whole or absent (a caller retries it whole). When that fails
        too, the failure says which memories were stored without their links."""
        if not ids:
            return
        try:
            self._note_changes(ids=ids)  # a warm process that saw them drops them again
            self.memories.delete(sql_in("id", ids))
        except (OSError, RuntimeError):
            done = (
                f"{len(ids)} memories were stored without their links "
                f"({', '.join(ids[:3])}{', …' * (len(ids) > 3)}): link them again, or forget "
                "them, once there is space"
            )
            raise WriteFailed(self.location, exc).after(done) from exc

    def require_ends(
        self, links: Sequence[Relationship], adding: set[str], *, drop: bool = False
    ) -> Sequence[Relationship]:
        """Under the write lock: `links` when every end is held or among the rows `adding`; with
        `drop`, those that are. A caller checks its targets before it embeds; a `forget` in
        between would leave an acknowledged edge to a deleted memory."""
        ends = {e for r in links for e in (r.source_id, r.target_id)} - adding
        missing = ends - self.held(sorted(ends)) if ends else set()
        if missing and drop:
            return [r for r in links if not {r.source_id, r.target_id} & missing]
        if missing:
            raise NotFound(
                "related_to",
                f"memory {min(missing)} was deleted while this write waited for the store; "
                "nothing was stored",
            )
        return links

    def replace(self, memory: Memory, embedding: np.ndarray, *, read: Memory) -> None:
        """Rewrite one existing row in place (one atomic merge commit), only while it is still
        the row `read` (same `updated_at`, access count and state): the commit itself checks,
        so an edit made meanwhile by a writer that took over a lapsed lease is never
        overwritten. Otherwise `RowChanged` (or `NotFound` when it is gone); nothing written."""
        row = schema.stamped(schema.memory_to_row(memory, embedding))
        with self.write_lock():
            self.check_commit()
            merge = self.memories.merge_insert("id")
            merge = merge.when_matched_update_all(where=_fence_where(read))
            updated = merge.execute([row]).num_updated_rows
            self.wrote(self.memories)
            if updated != 1:
                raise self._changed([read], self._fences_now([read]))
            self._maybe_maintain()

    def _fences_now(self, read: Sequence[Mapping[str, Any] | Memory]) -> dict[str, tuple[Any, ...]]:
        """The `_fence` of each row of `read` as the store holds it now, by id (gone: absent)."""
        ids = [_fence(r)[0] for r in read]
        return {r["id"]: _fence(r) for r in self.scan(sql_in("id", ids), columns=[*_FENCE, "id"])}

    def _changed(
        self, read: Sequence[Mapping[str, Any] | Memory], now: dict[str, tuple[Any, ...]]
    ) -> OctobrainError:
        """The error for a read-modify-write of `read` that found one of them changed or gone
        (`now`: `_fences_now`)."""
        for before in map(_fence, read):
            after = now.get(before[0])
            if after is None:
                return NotFound(
                    "memory_id",
                    f"memory {before[0]} was deleted by another writer after this write read "
                    "it; nothing was changed",
                )
            if after != before:
                return RowChanged(
                    f"store: {self.location}: memory {before[0]} was changed by another writer "
                    f"after this write read it (updated {after[1]:%Y-%m-%d %H:%M:%S} UTC); "
                    "nothing was changed: run it again to apply it to the memory as it is now"
                )
        return RowChanged(
            f"store: {self.location}: a memory this write read changed while it committed; "
            "nothing was changed: run it again"
        )

    def set_columns(self, where: str, values: dict[str, Any]) -> None:
        """Partial update of rows matching `where` (embeddings untouched), each row checked
        against its checksum first and stamped again with the new values (one commit)."""
        import pyarrow as pa

        with self.write_lock():
            self.check_commit()
            rows = self.scan(where, columns=[*schema.CHECKED, schema.CHECKSUM])
            for row in rows:
                schema.check_row(row)  # a damaged row is not stamped sound
            names = ["id", *values, schema.CHECKSUM]
            changed = [
                {"id": r["id"], **values, schema.CHECKSUM: schema.checksum({**r, **values})}
                for r in rows
            ]
            if changed:
                fields = [self.memories.schema.field(name) for name in names]
                data = pa.Table.from_pylist(changed, schema=pa.schema(fields))
                self.memories.merge_insert("id").when_matched_update_all().execute(data)
                self.wrote(self.memories)
            self._maybe_maintain()

    def _stamp(
        self,
        table: lancedb.table.Table,
        where: str | None = None,
        checked: Sequence[str] = schema.CHECKED,
        sum_of: Callable[[Mapping[str, Any]], int] = schema.checksum,
    ) -> int:
        """Under the write lock: set the checksum (`sum_of` its `checked` columns) of the rows
        matching `where`, else of every memory without a valid stamp (written before the
        column, or since by an older octobrain, which keeps the column as it was), as they are
        now, in one commit. Returns how many."""
        import pyarrow as pa

        wheres = [where] if where is not None else []
        if where is None:
            narrow = _scan_arrow(table, "true", ["id", "updated_at", schema.CHECKSUM], None)
            ids = narrow["id"].filter(schema.unstamped_mask(narrow)).to_pylist()
            step = DELETE_BATCH
            wheres = [sql_in("id", ids[at : at + step]) for at in range(0, len(ids), step)]
        stamps: dict[str, int] = {}
        for part in wheres:
            for batch in _scan_batches(table, part, list(checked), DELETE_BATCH):
                stamps.update((row["id"], sum_of(row)) for row in batch.to_pylist())
        if stamps:
            self.check_lease()
            data = pa.table({"id": list(stamps), schema.CHECKSUM: pa.array(stamps.values())})
            table.merge_insert("id").when_matched_update_all().execute(data)
            self.wrote(table)
        return len(stamps)

    def merge_rows(
        self,
        rows: Sequence[dict[str, Any]],
        *,
        delete_where: str | None = None,
        read: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        """Upsert full `memories` rows by id and optionally delete rows matching `delete_where`
        that are not among them — all in ONE atomic commit (a reader sees all of it or none).

        `read`: the rows this write read and writes back changed. Just before the commit they
        are read again, and one changed or gone since is `RowChanged` (`NotFound`), nothing
        written. (Not inside the commit, as `replace` checks: a merge of many rows cannot
        refuse as a whole there; the lease check just before it covers the moment between.)"""
        import pyarrow as pa

        for row in read:
            schema.check_row(row)  # a damaged row read is not written back stamped sound
        with self.write_lock():
            stamped = [schema.stamped(dict(row)) for row in rows]
            data = pa.Table.from_pylist(stamped, schema=self.memories.schema)
            self.check_commit()
            if read:
                now = self._fences_now(read)
                if set(now.values()) != {_fence(r) for r in read}:
                    raise self._changed(read, now)
            if delete_where is not None:
                kept = {row["id"] for row in rows}
                gone = [r["id"] for r in self.scan(delete_where, columns=["id"])]
                self._note_changes(ids=[i for i in gone if i not in kept])
            merge = self.memories.merge_insert("id").when_matched_update_all()
            merge = merge.when_not_matched_insert_all()
            if delete_where is not None:
                merge = merge.when_not_matched_by_source_delete(delete_where)
            merge.execute(data)
            self.wrote(self.memories)
            self._maybe_maintain()

    def delete_relationships(self, where: str) -> None:
        """Delete the edges matching a predicate (one commit)."""
        with self.write_lock():
            found = self.relationships.search().where(where).select(["id"]).limit(None)
            self.check_lease()
            self._note_changes(edges=found.to_arrow().column("id").to_pylist())
            self.relationships.delete(where)
            self.wrote(self.relationships)

    def drop_dangling_edges(self) -> int:
        """Delete the edges with an end that is no memory (`store.dangling`; not those made
        after the newest memories version, which show what lost versions held), under the
        write lock, `DELETE_BATCH` a commit. Returns how many. Edges only: the model is
        neither checked nor used."""
        from octobrain.store.dangling import sweepable

        with self.write_lock(check_model=False):
            db = self._open_db()
            log = db.open_table(CONSOLIDATIONS) if self.made(CONSOLIDATIONS) else None
            edges = db.open_table(RELATIONSHIPS)
            ids, _ = sweepable(db.open_table(MEMORIES), edges, log)
            for at in range(0, len(ids), DELETE_BATCH):
                batch = ids[at : at + DELETE_BATCH]
                self.check_lease()
                self._note_changes(edges=batch)
                edges.delete(sql_in("id", batch))
                self.wrote(edges)
        return len(ids)

    def made(self, name: str) -> bool:
        """Whether this store ever made table `name`: listed, recorded in its manifest, or
        stamped on memories (`manifest.STAMPED_ON`). A recorded table that is gone is damage,
        which opening it names; read as never made, it answers as empty (no forgotten turns,
        no consolidation records)."""
        if name in self._open_db().list_tables().tables:
            return True
        if name in (manifest.recorded(self.location) or set()):
            return True
        return manifest.STAMPED_ON.get(name) == MEMORIES and manifest.stamped(self.memories, name)

    def open_table(self, name: str, table_schema: pa.Schema) -> lancedb.table.Table:
        """Open (creating it if this store never did) another table of this database, e.g. the
        consolidation log; created under the write lock so two first runs cannot race, opened
        without it so a read-only store reads it."""
        table = self._tables.get(name)
        if table is not None:
            return table
        db = self._open_db()
        try:
            table = manifest.open_or_create(
                db, self.location, name, lambda: table_schema, self._lock
            )
        except (OSError, RuntimeError) as exc:
            raise StorageError(io_failure(self.location, exc)) from exc
        self._tables[name] = table
        return table

    def record_access(self, ids: Sequence[str], now: datetime, *, min_interval: timedelta) -> int:
        """Count one access for each id, unless it was accessed less than `min_interval` ago.
        Returns the version this commit created."""
        if not ids:
            return int(self.memories.version)
        cutoff = (now - min_interval).isoformat()
        # A row's first access always counts (last_accessed starts at its creation time).
        recent = f"last_accessed < timestamp {sql_str(cutoff)}"
        where = f"{sql_in('id', ids)} AND (access_count = 0 OR {recent})"
        with self.write_lock():
            self.check_lease()
            result = self.memories.update(
                where=where,
                values_sql={
                    "access_count": "access_count + 1",
                    "last_accessed": f"timestamp {sql_str(now.isoformat())}",
                },
            )
            self.wrote(self.memories)
            self._maybe_maintain()
        return int(result.version)

    def delete(self, ids: Sequence[str]) -> int:
        """Delete memories by id and every edge touching them. Returns rows deleted."""
        if not ids:
            return 0
        with self.write_lock():
            before = self.count()
            self.check_commit()
            self._note_changes(ids=ids)
            self.memories.delete(sql_in("id", ids))
            self.wrote(self.memories)
            deleted = before - self.count()
            try:
                self.relationships.delete(
                    f"{sql_in('source_id', ids)} OR {sql_in('target_id', ids)}"
                )
                self.wrote(self.relationships)
            except (OSError, RuntimeError) as exc:
                done = (
                    f"{deleted} memories were deleted but not their edges (searches never show "
                    "them; `octobrain doctor --drop-dangling-edges` deletes them)"
                )
                raise WriteFailed(self.location, exc).after(done) from exc
            self._maybe_maintain()
        return deleted

    def add_relationships(self, rels: Sequence[Relationship], *, ends_held: bool = False) -> None:
        """Append edges (one commit); with `ends_held`, only while both ends of each are held
        (`NotFound` otherwise). Consolidations write a parent's edges before its row."""
        if rels:
            with self.write_lock():
                if ends_held:
                    self.require_ends(rels, set())
                self.check_commit()
                self._append(self.relationships, [schema.relationship_to_row(r) for r in rels])

    def compact(self) -> None:
        """Merge small fragments, fold deletions, update indexes and drop versions older than
        `KEEP_VERSIONS_FOR` (long enough for any in-flight reader), so reads stay fast after
        many small writes. Creates the indexes that pay at the current size."""
        import_lancedb()
        from lancedb.index import Bitmap, BTree, IvfPq

        with self.write_lock():
            self.check_lease()
            rows = self.memories.count_rows()
            indexed = {ix.columns[0] for ix in self.memories.list_indices()}
            if rows >= SCALAR_INDEX_MIN_ROWS:
                # id: point lookups, access bumps and deletes; scope/state: every read's filter.
                if "id" not in indexed:
                    self.memories.create_index("id", config=BTree())
                for column in ("scope", "state"):
                    if column not in indexed:
                        self.memories.create_index(column, config=Bitmap())
            if rows >= VECTOR_INDEX_MIN_ROWS and "embedding" not in indexed:
                ivf = IvfPq(
                    distance_type="cosine",
                    num_partitions=max(2, min(256, int(rows**0.5))),
                    num_sub_vectors=_sub_vectors(self.dim),
                )
                self.memories.create_index("embedding", config=ivf)
            stamped = self._stamp(self.memories)  # rows an older octobrain wrote meanwhile
            if stamped:
                log.info("memories: stamped %d rows an older octobrain wrote", stamped)
            self.memories.optimize(cleanup_older_than=KEEP_VERSIONS_FOR)
            self.wrote(self.memories)
            self.relationships.optimize(cleanup_older_than=self._companion_keep(self.relationships))
            self.wrote(self.relationships)

    def _companion_keep(self, table: lancedb.table.Table) -> timedelta:
        """How far back a companion table's versions are kept: `KEEP_VERSIONS_FOR`, and back to
        the version current when the oldest kept memories version was made, however old (edges
        untouched for ten days are the edges of every memories version since). `restore` maps
        each memories version to the companion version current at that moment; cleaned away,
        a restore brought memories back without their edges."""
        # LanceDB gives version times as naive local times, as `datetime.now()` is.
        oldest: datetime = min(v["timestamp"] for v in self.memories.list_versions())
        current: list[datetime] = [
            v["timestamp"] for v in table.list_versions() if v["timestamp"] <= oldest
        ]
        if not current:
            return KEEP_VERSIONS_FOR
        return max(KEEP_VERSIONS_FOR, datetime.now() - max(current) + timedelta(minutes=1))

    def reindex(self) -> tuple[list[str], list[str]]:
        """Drop every index of the memories table and build again those that pay at its size
        (`compact`): the way back from a damaged or lost index file, which reads would
        otherwise keep tripping over. Returns the indexes dropped and those built. Every row
        is read first: over rows that cannot be read the indexes cannot be built again, and
        dropping them would change the store for nothing (that damage is `doctor`'s to name)."""
        with self.write_lock():
            try:
                for _ in self.memories.search().limit(None).to_batches():
                    pass
            except (OSError, RuntimeError) as exc:
                damage = manifest.read_failure(exc)
                if damage is None:
                    raise
                raise StorageError(damage) from exc
            dropped = [ix.name for ix in self.memories.list_indices()]
            for name in dropped:
                self.memories.drop_index(name)
            self.compact()
            built = [ix.name for ix in self.memories.list_indices()]
        return dropped, built

    # ---- history --------------------------------------------------------------------------

    def history(self, limit: int = 20) -> list[StoreVersion]:
        """The newest `limit` kept versions of the memories table, newest first."""
        versions = sorted(self.memories.list_versions(), key=lambda v: int(v["version"]))
        probe = None
        shown = []
        for at in range(len(versions) - 1, max(len(versions) - limit, 0) - 1, -1):
            v, note = versions[at], ""
            before = versions[at - 1]["metadata"] if at else None
            # A commit that kept the row count may be the store's upkeep (an index built, files
            # compacted: the operation Lance records for it), or, when its data files are the
            # ones before it, a stamp of a table made later (`manifest.STAMPED_ON`).
            if before is not None and before.get("total_rows") == v["metadata"].get("total_rows"):
                note = upkeep_note(self.location, MEMORIES, int(v["version"]))
                if not note and v["metadata"] == before:
                    probe = probe or self.open_memories_unchecked()
                    note = manifest.stamp_note(
                        probe, int(versions[at - 1]["version"]), int(v["version"])
                    )
            shown.append(
                StoreVersion(
                    int(v["version"]),
                    v["timestamp"].astimezone(timezone.utc),  # LanceDB's is naive local time
                    int(v["metadata"].get("total_rows", 0)),
                    note,
                )
            )
        return shown

    def restore(self, version: int, settle: Callable[[], object] | None = None) -> StoreVersion:
        """Bring the whole store back to how it was at `version` of the memories table, as new
        commits (so a restore can itself be undone). Edges and the consolidation journal go
        back to their state at the same moment; one that did not exist yet is emptied. The
        store is marked as restoring until every table is back (`manifest.mark_restore`), so a
        restore cut short is refused by every open until it is run again. `settle` runs once
        every table is back, before the mark is lifted (a caller's fix-up of the journal)."""
        self._finishing_restore = True
        try:
            return self._restore(version, settle)
        finally:
            self._finishing_restore = False

    def _restore(self, version: int, settle: Callable[[], object] | None) -> StoreVersion:
        # The model is checked against the version restored, not the store as it is: a store
        # re-embedded since goes back with the configured model set to the one it had then.
        with self.write_lock(check_model=False):
            memories = self.open_memories_unchecked()
            versions = sorted(memories.list_versions(), key=lambda v: int(v["version"]))
            numbers = [int(v["version"]) for v in versions]
            if version not in numbers:
                raise InvalidInput(
                    "version",
                    f"no version {version} is kept (kept: {manifest.version_ranges(numbers)}); "
                    "see `octobrain memory history`",
                )
            self._check_version_model(version)
            at = numbers.index(version)
            self._check_clock(version, versions[at:])
            self.check_lease()
            manifest.mark_restore(self.location, version)
            self._note_changes(everything=True)
            # Everything committed before the next memories commit belongs to this version
            # (memorize writes its edges just after its row).
            until = versions[at + 1]["timestamp"] if at + 1 < len(versions) else None
            memories.restore(version)
            self.wrote(memories)  # (a restore is a new, higher version)
            db = self._open_db()
            present = set(db.list_tables().tables)
            for name in COMPANION_TABLES:
                if name not in present:
                    continue
                table = db.open_table(name)
                kept = table.list_versions()
                earlier = [v for v in kept if until is None or v["timestamp"] < until]
                if earlier and len(kept) > 1:
                    table.restore(max(int(v["version"]) for v in earlier))
                elif not earlier and any(int(v["version"]) == 1 for v in kept):
                    table.restore(1)  # made after that moment: back to as it was made, empty
                self.wrote(table)
            if settle is not None:
                settle()
            manifest.mark_restore(self.location, None)
            self._memories = self._relationships = None
            self._pinned_tables = {}
        return self.history(1)[0]

    def _check_clock(self, version: int, since: list[dict[str, Any]]) -> None:
        """Refuse, before anything changes, a restore whose edges and journal cannot be told:
        each companion table goes back to the version made before the next memories commit,
        by their times, so a clock stepped back (by more than `CLOCK_STEP`) since `version`
        (a correction, a daylight-saving hour: LanceDB's times are local) would pick the
        wrong ones. Memories of an hour ago came back without their edges."""
        db = self._open_db()
        start = since[0]["timestamp"]
        tables = [(MEMORIES, since)] + [
            (name, sorted(db.open_table(name).list_versions(), key=lambda v: int(v["version"])))
            for name in COMPANION_TABLES
            if name in db.list_tables().tables
        ]
        for name, kept in tables:
            for a, b in itertools.pairwise(kept):
                if a["timestamp"] >= start and b["timestamp"] < a["timestamp"] - CLOCK_STEP:
                    raise InvalidInput(
                        "version",
                        f"which edges and journal records belong to version {version} cannot "
                        f"be told: the clock went back between {name} versions "
                        f"{a['version']} and {b['version']} ({a['timestamp']:%Y-%m-%d %H:%M:%S}"
                        f" → {b['timestamp']:%H:%M:%S}); restore a version made after that, or "
                        "bring the store back from an export (`memory import`); nothing was "
                        "changed",
                    )

    def _check_version_model(self, version: int) -> None:
        """Refuse, before anything changes, a restore to a version another model embedded."""
        probe = self.open_memories_unchecked()
        probe.checkout(version)
        meta = probe.schema.metadata or {}
        model = meta.get(schema.META_MODEL, b"").decode()
        dim = meta.get(schema.META_DIM, b"0").decode()
        if model != self.model_id or dim != str(self.dim):
            raise InvalidInput(
                "version",
                f"version {version} was embedded with {model!r} (dim {dim}), but the "
                f"configured model is {self.model_id!r} (dim {self.dim}): set embedding.model "
                f"to {model!r} to restore it, or restore a version made since; nothing was "
                "changed",
            )

    def _maybe_maintain(self) -> None:
        """Compact every `COMPACT_EVERY` commits (call with the write lock held), or, where
        maintenance is deferred, note that it is due."""
        if self.memories.version % COMPACT_EVERY == 0:
            if self.defer_maintenance:
                self._maintenance_due = True
                return
            self._maintain()

    @property
    def maintenance_due(self) -> bool:
        """Whether a deferred maintenance pass waits for `maintain_if_due`."""
        return self._maintenance_due

    def maintain_if_due(self) -> bool:
        """Run the maintenance pass a deferred write fell due for; whether it ran."""
        if not self._maintenance_due:
            return False
        self._maintenance_due = False
        self._maintain()
        return True

    def _maintain(self) -> None:
        # Edges a killed `forget` left first, so the compaction folds their deletion in.
        for step in (self.drop_dangling_edges, self.compact):
            try:
                step()
            except Exception:  # maintenance must never fail the write that triggered it
                log.warning("store maintenance failed; it will be retried", exc_info=True)


def _sub_vectors(dim: int) -> int:
    """The largest divisor of `dim` that is at most dim/8 (PQ needs an exact split)."""
    target = max(1, dim // 8)
    return next(d for d in range(target, 0, -1) if dim % d == 0)
