"""`MemoryStore`: memories and relationships in embedded LanceDB, safe for several processes.

Concurrency model: every write (add, update, delete, access bump) runs under one cross-process
file lock per store and is a single LanceDB commit, so writers never race each other's
read-modify-write and a killed process leaves either the whole commit or none of it. Readers
take no lock and always see the latest committed version (`read_consistency_interval=0`).

Here: opening the tables, the write lock, and the reads (through `store.scans`). The store's
other sides are modules of functions taking the store, bound below as its methods: what every
commit checks first (`store.commit_checks`), the writes (`store.writes`), the edges
(`store.edges`, and `store.dangling` for those left dangling), kept access counts
(`store.accessed`), upkeep and the columns a later octobrain added (`store.upkeep`), the
versions on disk and the undo history (`store.timeline`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import numpy.typing as npt

from octobrain.errors import OctobrainError, StorageError, as_json
from octobrain.models import Memory
from octobrain.scope import scope_named
from octobrain.store import (
    accessed,
    addresses,
    by_id,
    changes,
    commit_checks,
    dangling,
    edges,
    forked,
    manifest,
    scans,
    schema,
    self_links,
    stamps,
    timeline,
    upkeep,
    writes,
)
from octobrain.store.columns import dim_damage
from octobrain.store.failures import ModelMismatch, NotFound, WriteFailed, io_failure
from octobrain.store.highwater import Commits
from octobrain.store.location import StoreLocation
from octobrain.store.pinned import Pinned
from octobrain.store.schema import MEMORIES, RELATIONSHIPS
from octobrain.store.sql import Sight, sql_in, sql_str

if TYPE_CHECKING:
    import lancedb
    import pyarrow as pa

log = logging.getLogger(__name__)

LOCK_TIMEOUT_S = 120.0


def invisible(memory_id: str, sight: Sight) -> str:
    """What a read by id says of a memory `sight` does not see."""
    role = f" as role {as_json(sight.role)}" if sight.role else ""
    return f"no memory {memory_id} is visible from scope {scope_named(sight.scope)}{role}"


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
        self.committed = False  # whether this handle committed (`wrote`): `Brain.leave_tail`

    def _open_db(self) -> lancedb.DBConnection:
        """Connect and create missing tables; no model check (see `_connect`)."""
        forked.check(self.location)
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
        relationships = db.open_table(RELATIONSHIPS)
        # (rows a flipped offset in a deletion file hides or shows read as any others)
        self.check_deletions(memories, relationships, read_manifest=False, done="")
        self._memories = memories
        self._relationships = relationships
        self.count_kept_access()

    def _check_model(self, table_schema: pa.Schema) -> None:
        stored_model, stored_dim = schema.embedded_with(table_schema)
        damaged = dim_damage(self.location, "memories", table_schema, schema.REEMBED)
        if damaged is not None:  # (not another model)
            raise ModelMismatch(damaged)
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

    def open(self) -> None:
        """Connect now, as the first read or write would: import LanceDB, open (or make) the
        tables and check the model."""
        _ = self.memories

    @property
    def memories(self) -> lancedb.table.Table:
        forked.check(self.location)
        if self._memories is None:
            self._connect()
        assert self._memories is not None
        return self._memories

    @property
    def relationships(self) -> lancedb.table.Table:
        forked.check(self.location)
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
                    if self._memories is not None:
                        self._memories = self._up_to_date(MEMORIES, self._memories)
                    if self._relationships is not None:
                        self._relationships = self._up_to_date(RELATIONSHIPS, self._relationships)
                    for name, table in list(self._tables.items()):
                        self._tables[name] = self._up_to_date(name, table)
                    if check_model and self._memories is not None:
                        # Another process may have re-embedded the store since this one opened
                        # it: a vector of the old model written now would be found by neither.
                        self._check_model(self._memories.schema)
                    yield
        except OctobrainError:
            raise
        except (OSError, RuntimeError) as exc:
            raise WriteFailed(self.location, exc) from exc

    def _up_to_date(self, name: str, table: lancedb.table.Table) -> lancedb.table.Table:
        """`table`, or, when it lacks columns a later octobrain added, the table `name` with
        them (`upkeep.LATER_COLUMNS`); under the write lock."""
        later = upkeep.LATER_COLUMNS.get(name)
        if later is None or not later[0](table.schema):
            return table
        return upkeep.add_later_columns(self, self._open_db(), name, *later)

    def wrote(self, *tables: lancedb.table.Table) -> None:
        """Call right after a commit to `tables` under `write_lock`: the versions reached are
        recorded when the lock is let go (`highwater`)."""
        self.committed = True
        self._commits.wrote(*tables)

    def check_lease(self) -> None:
        """Call just before each commit under `write_lock`: on an object store, `LeaseLost`
        when this process's write lease may have passed to another writer since it was taken
        (paused, or cut off from the store, past the lease's time); nothing when it holds."""
        self.location.check_held()

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
        """The memories table whatever model embedded it (`reembed`, a restore's model check,
        `doctor --forget-damaged`)."""
        try:
            return self._open_db().open_table(MEMORIES)
        except (
            ValueError
        ) as exc:  # (gone since this handle opened the store: LanceDB's "not found")
            raise manifest.TableDamaged(
                self.location, MEMORIES, manifest.short_reason(exc)
            ) from exc

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
        rows: list[dict[str, Any]] = scans.scan_arrow(
            self.memories, where, columns, limit
        ).to_pylist()
        return rows

    def scan_arrow(self, where: str, *, columns: Sequence[str] | None = None) -> pa.Table:
        """Rows matching a predicate as an Arrow table (cheap for a few narrow columns)."""
        return scans.scan_arrow(self.memories, where, columns, None)

    def held(self, ids: Sequence[str]) -> set[str]:
        """Which of `ids` the store holds (any scope, any state)."""
        return scans.held(self.memories, ids)

    def scopes_of(self, ids: Sequence[str]) -> dict[str, str]:
        """The scope of each of `ids` the store holds (any scope, any state)."""
        return self.values_of(ids, "scope")

    def values_of(self, ids: Sequence[str], column: str) -> dict[str, Any]:
        """`column` of each of `ids` the store holds (any scope, any state)."""
        if not ids:
            return {}
        rows = scans.scan_arrow(self.memories, sql_in("id", ids), ["id", column], None)
        return dict(zip(rows["id"].to_pylist(), rows[column].to_pylist(), strict=True))

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

    def note_changes(
        self, *, ids: Sequence[str] = (), edges: Sequence[str] = (), everything: bool = False
    ) -> None:
        """Record what the next commit removes, before it is made (under the write lock; the
        tables are opened afresh: their latest versions, whatever model embedded them)."""
        db = self._open_db()
        versions = {name: int(db.open_table(name).version) for name in (MEMORIES, RELATIONSHIPS)}
        changes.note(self.location, versions, ids=ids, edges=edges, everything=everything)

    def get(
        self, memory_id: str, sight: Sight, field_name: str = "memory_id", *, checked: bool = True
    ) -> Memory:
        """A memory `sight` sees (archived included), or `NotFound` naming `field_name`
        (`checked`: `schema.row_to_memory`)."""
        rows = self.scan(
            f"id = {sql_str(memory_id)} AND {sight.where(include_archived=True)}", limit=1
        )
        if not rows:
            raise NotFound(field_name, invisible(memory_id, sight))
        return schema.row_to_memory(rows[0], checked=checked)

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

    def made(self, name: str) -> bool:
        """Whether this store ever made table `name`: listed, recorded in its manifest, or
        stamped on memories (`manifest.STAMPED_ON`). A recorded table that is gone is damage,
        which opening it names; read as never made, it answers as empty (no forgotten turns,
        no consolidation records)."""
        if name in self._open_db().list_tables().tables:
            return True
        if name in (manifest.recorded(self.location) or set()):
            return True
        return manifest.STAMPED_ON.get(name) == MEMORIES and stamps.stamped(self.memories, name)

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

    @property
    def maintenance_due(self) -> bool:
        """Whether a deferred maintenance pass waits for `maintain_if_due`."""
        return self._maintenance_due

    def drop_handles(self) -> None:
        """Let go of the table handles, so the next use opens the tables again (after a commit
        that made memories anew: an overwrite, a restore)."""
        self._memories = None
        self._relationships = None
        self._pinned_tables = {}

    # The store's other sides, each a module of functions taking the store, as its methods.
    check_commit = commit_checks.check_commit
    check_deletions = commit_checks.check_deletions
    damaged_data = commit_checks.damaged_data
    rows_by_id = by_id.rows_by_id
    get_many = by_id.get_many
    ids_with_prefixes = by_id.ids_with_prefixes
    ids_with_prefix = by_id.ids_with_prefix
    add = writes.add
    require_ends = writes.require_ends
    replace = writes.replace
    set_columns = writes.set_columns
    merge_rows = writes.merge_rows
    delete = writes.delete
    forget_damaged = writes.forget_damaged
    overwrite_memories = writes.overwrite_memories
    record_access = writes.record_access
    count_kept_access = accessed.count_kept_access
    keep_access = accessed.keep_access
    kept_access = accessed.kept_access
    held_relationships = edges.held_relationships
    relationships_version = edges.relationships_version
    all_relationships = edges.all_relationships
    relationship_batches = edges.relationship_batches
    damaged_links = edges.damaged_links
    sources_to = edges.sources_to
    sources_of = edges.sources_of
    relationships_of = edges.relationships_of
    add_relationships = edges.add_relationships
    link_once = edges.link_once
    links_held = edges.links_held
    delete_relationships = edges.delete_relationships
    unlink = edges.unlink
    drop_dangling_edges = dangling.drop_dangling_edges
    drop_self_links = self_links.drop_self_links
    compact = upkeep.compact
    reindex = upkeep.reindex
    maintain_if_due = upkeep.maintain_if_due
    versions_on_disk = timeline.versions_on_disk
    version_fingerprint = timeline.version_fingerprint
    history = timeline.history
    restore = timeline.restore
