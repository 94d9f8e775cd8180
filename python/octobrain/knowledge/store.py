"""`KnowledgeStore`: indexed documents in the memories' LanceDB database.

Two tables:

- `knowledge_sources`: one row per (scope, session, uri): title, type, the extracted text (for
  `match`), its content hash, the chunker settings, and the **current generation** id, with
  the CRC-32 of them (`schema.source_checksum`).
- `knowledge_chunks`: child chunks with their parent text, section path and embedding, each
  tagged with the generation that wrote it and carrying the CRC-32 of what a search shows of it
  (`schema.chunk_checksum`). The model id and dimension live in its metadata.

A chunk is visible only while its generation is the one its source row names. Re-indexing
writes the new chunks under a new generation (commit 1, invisible), flips the source row to it
(commit 2, the switch) and deletes the old generation (commit 3, cleanup). A process killed
before the flip leaves the old chunks searchable; killed after it, the new ones; stray rows of a
dead generation (of a new source: chunks with no source row at all) are invisible, named by
`doctor` and swept by the next write of sources (`store.orphan_chunks`). Writes hold a
cross-process file lock of their own, so indexing never blocks memory writes.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from octobrain.errors import OctobrainError, StorageError
from octobrain.knowledge import respell
from octobrain.store import forked, manifest
from octobrain.store.columns import check_later_columns, dim_damage
from octobrain.store.failures import ModelMismatch, io_failure
from octobrain.store.highwater import Commits
from octobrain.store.location import StoreLocation
from octobrain.store.orphan_chunks import find_orphans, may_hold_orphans
from octobrain.store.schema import (
    CHECKSUM,
    CHECKSUM_FIELD,
    CHUNK_CHECKED,
    CHUNKS,
    META_DIM,
    META_MODEL,
    META_SCHEMA,
    SOURCE_CHECKED,
    SOURCE_NAMING,
    SOURCES,
    check_knowledge,
    chunk_checksum,
    embedded_with,
    source_checksum,
    stamps,
)
from octobrain.store.sql import DELETE_BATCH, sql_in, sql_str

if TYPE_CHECKING:
    import lancedb
    import pyarrow as pa

log = logging.getLogger(__name__)

SCHEMA_VERSION = "1"
LOCK_TIMEOUT_S = 300.0
KEEP_VERSIONS_FOR = timedelta(minutes=10)
# Rows read at a time by the pass that adds their checksums (a source row holds its text).
STAMP_BATCH = {SOURCES: 64, CHUNKS: 4_096}
CHECK_BATCH = 16  # source rows (each with its text, up to `max_source_bytes`) checked at a time
CHUNK_CHECK_BATCH = 256  # chunk rows (each with its parent text) checked at a time

SOURCE_LIGHT = [
    "id", "uri", "scope", "session_id", "title", "doc_type", "content_hash", "chunker",
    "generation", "chunk_count", "size_bytes", "mtime", "indexed_at", "last_checked",
]  # fmt: skip
CHUNK_LIGHT = [
    "id", "source_id", "generation", "uri", "scope", "session_id", "title", "chunk_index",
    "section_path", "content", "parent_content", "byte_start", "byte_end", "indexed_at",
    CHECKSUM,
]  # fmt: skip


def source_id(uri: str, scope: str, session_id: str) -> str:
    """The deterministic id of a source row: one row per (scope, session, uri)."""
    return hashlib.sha256(f"{scope}\n{session_id}\n{uri}".encode()).hexdigest()[:32]


def _ts() -> pa.DataType:
    import pyarrow as pa

    return pa.timestamp("us", tz="UTC")


def sources_schema() -> pa.Schema:
    """Schema of `knowledge_sources`."""
    import pyarrow as pa

    s, i, f = pa.string(), pa.int64(), pa.float64()
    fields = [("id", s), ("uri", s), ("scope", s), ("session_id", s), ("title", s),
              ("doc_type", s), ("content_hash", s), ("chunker", s), ("text", s),
              ("generation", s), ("chunk_count", i), ("size_bytes", i), ("mtime", f),
              ("indexed_at", _ts()), ("last_checked", _ts())]  # fmt: skip
    return pa.schema(
        # The checksum came after schema 1 shipped: an older table gains it with its first
        # write (`KnowledgeStore.write_lock`).
        [*(pa.field(name, typ, nullable=False) for name, typ in fields), CHECKSUM_FIELD],
        metadata={META_SCHEMA: SCHEMA_VERSION.encode()},
    )


def chunks_schema(model_id: str, dim: int) -> pa.Schema:
    """Schema of `knowledge_chunks`; the metadata records which model made the embeddings."""
    import pyarrow as pa

    s = pa.string()
    fields = [("id", s), ("source_id", s), ("generation", s), ("uri", s), ("scope", s),
              ("session_id", s), ("title", s), ("chunk_index", pa.int32()),
              ("section_path", pa.list_(s)), ("content", s), ("parent_content", s),
              ("byte_start", pa.int64()), ("byte_end", pa.int64()), ("indexed_at", _ts()),
              ("embedding", pa.list_(pa.float32(), dim))]  # fmt: skip
    return pa.schema(
        # The checksum came after schema 1 shipped: an older table gains it with its first
        # write (`KnowledgeStore.write_lock`).
        [*(pa.field(name, typ, nullable=False) for name, typ in fields), CHECKSUM_FIELD],
        metadata={
            META_MODEL: model_id.encode(),
            META_DIM: str(dim).encode(),
            META_SCHEMA: SCHEMA_VERSION.encode(),
        },
    )


def table_schemas() -> dict[str, pa.Schema]:
    """The knowledge tables' schemas, by name (what `octobrain doctor` holds them to: the
    store's own layer does not know them)."""
    return {SOURCES: sources_schema(), CHUNKS: chunks_schema("", 1)}


class KnowledgeStore:
    """The two knowledge tables of the LanceDB database at `uri`."""

    def __init__(self, uri: str | Path | StoreLocation, model_id: str, dim: int) -> None:
        self.location = uri if isinstance(uri, StoreLocation) else StoreLocation(uri)
        self.model_id = model_id
        self.dim = dim
        self._db: lancedb.DBConnection | None = None
        self._sources: lancedb.table.Table | None = None
        self._chunks: lancedb.table.Table | None = None
        self._lock: Any = None
        self._commits = Commits(self.location.high_water)  # versions recorded per `write_lock`

    def _connect(self) -> None:
        self._lock = self.location.lock("knowledge", LOCK_TIMEOUT_S)
        db = self.location.connect()
        try:  # (creating the tables on a read-only disk was a traceback from the lock file)
            manifest.adopt_if_new(db, self.location)
            sources = manifest.open_or_create(
                db, self.location, SOURCES, sources_schema, self._lock
            )
            chunks = manifest.open_or_create(
                db,
                self.location,
                CHUNKS,
                lambda: chunks_schema(self.model_id, self.dim),
                self._lock,
            )
        except OSError as exc:  # (a damaged table, LanceDB's RuntimeError, is said as one)
            raise StorageError(io_failure(self.location, exc)) from exc
        stored_model, stored_dim = embedded_with(chunks.schema)
        damaged = dim_damage(self.location, CHUNKS, chunks.schema, manifest.repair_hint(CHUNKS))
        if damaged is not None:  # (not another model: deleting the sources would not help)
            raise ModelMismatch(damaged)
        if stored_model != self.model_id or stored_dim != str(self.dim):
            raise ModelMismatch(
                f"the knowledge index at {self.location} was embedded with {stored_model!r} "
                f"(dim {stored_dim}), but the configured model is {self.model_id!r} "
                f"(dim {self.dim}); delete its sources (`octobrain knowledge delete-source`) "
                "and index them again, or set embedding.model back"
            )
        self._db, self._sources, self._chunks = db, sources, chunks
        respell.bring_up(self, source_id)  # (a store an earlier version wrote)

    @property
    def sources(self) -> lancedb.table.Table:
        forked.check(self.location)
        if self._sources is None:
            self._connect()
        assert self._sources is not None
        return self._sources

    @property
    def chunks(self) -> lancedb.table.Table:
        forked.check(self.location)
        if self._chunks is None:
            self._connect()
        assert self._chunks is not None
        return self._chunks

    def started_over(self) -> bool:
        """Whether another process started the knowledge tables over (`doctor --recreate
        knowledge`) since this one opened them; if so the handles are let go, and the next use
        opens (or makes) the tables again. Ask when a use failed: one LIST a table on an
        object store."""
        if self._sources is None or not any(map(self.location.table_gone, (SOURCES, CHUNKS))):
            return False
        self._db = self._sources = self._chunks = None
        return True

    @contextlib.contextmanager
    def write_lock(self) -> Iterator[None]:
        """The cross-process knowledge write lock (re-entrant within a process)."""
        _ = self.chunks
        try:
            with self._lock:
                self.location.to_latest(self._sources, self._chunks)  # see MemoryStore.write_lock
                manifest.check_before_write(self.location, self._sources, self._chunks)
                with self._commits.held():
                    for table in (self._sources, self._chunks):
                        if table is not None and _unstamped(table):
                            self._add_checksums(table)
                    yield
        except OctobrainError:
            raise
        except (OSError, RuntimeError) as exc:  # a full disk, a read-only directory
            # A table whose files a write read and found damaged is damage, not a full disk:
            # said as one, the user went looking for free space and never at `doctor`.
            damage = manifest.read_failure(exc)
            raise StorageError(damage or io_failure(self.location, exc)) from exc

    def _add_checksums(self, table: lancedb.table.Table) -> None:
        """Under the write lock: give a knowledge table made before checksums the column,
        then each row without one its checksum as the row is now (one more commit, made by
        a later write when this one was cut short): the rows are taken as sound as they are.
        Until then they are shown unchecked."""
        checked, sum_of = _CHECKED_BY[table.name]
        self.location.check_held()
        if CHECKSUM not in table.schema.names:
            known = table_schemas()[table.name].names
            check_later_columns(self.location, table, [CHECKSUM], known)
            table.add_columns([CHECKSUM_FIELD])
            self._commits.wrote(table)
        query = table.search().where(f"{CHECKSUM} IS NULL").select(list(checked))
        data = stamps(query.limit(None).to_batches(STAMP_BATCH[table.name]), sum_of)
        if data.num_rows:
            self.location.check_held()
            table.merge_insert("id").when_matched_update_all().execute(data)
            self._commits.wrote(table)
        log.info("%s: %d rows stamped with their checksums", table.name, data.num_rows)

    def wrote(self, table: lancedb.table.Table) -> None:
        """Call right after a commit to `table` under `write_lock` (`MemoryStore.wrote`)."""
        self._commits.wrote(table)

    def versions(self) -> tuple[int, int]:
        """(sources version, chunks version): change on every commit by anyone."""
        return int(self.sources.version), int(self.chunks.version)

    # ---- reads ----------------------------------------------------------------------------

    def scan_sources(
        self, where: str = "true", *, with_text: bool = False, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """Source rows matching `where` (the text column, and the checksum to check it by
        before it is shown, `schema.check_knowledge`, only when asked for)."""
        columns = [*SOURCE_LIGHT, "text"] if with_text else SOURCE_LIGHT
        if with_text and CHECKSUM in self.sources.schema.names:
            columns = [*columns, CHECKSUM]
        rows: list[dict[str, Any]] = (
            self.sources.search().where(where).select(columns).limit(limit).to_list()
        )
        return rows

    def check_sources(self, ids: Sequence[str]) -> None:
        """`RowDamaged` naming the first of the sources `ids` that no longer matches its
        checksum: read with their texts, which it covers, `CHECK_BATCH` at a time."""
        for at in range(0, len(ids), CHECK_BATCH):
            for row in self.scan_sources(sql_in("id", ids[at : at + CHECK_BATCH]), with_text=True):
                check_knowledge(row, SOURCES)

    def damaged_sources(self, where: str) -> set[str]:
        """The ids of the sources matching `where` that no longer match their checksum: read
        in one pass with their texts, which it covers, `CHECK_BATCH` rows at a time."""
        if CHECKSUM not in self.sources.schema.names:
            return set()
        from octobrain.store import row_sums  # (every row of a batch at once)

        query = self.sources.search().where(where).select([*SOURCE_CHECKED, CHECKSUM])
        batches = query.limit(None).to_batches(CHECK_BATCH)
        return set(row_sums.damaged_ids(batches, row_sums.sources_damaged))

    def damaged(self, source: Mapping[str, Any]) -> bool:
        """Whether the source row `source` (as listed, its text not read) or any chunk of it,
        of any generation, no longer matches its checksum, read with what the checksums cover:
        an unchanged source is checked before it is left as it is, so that `knowledge index`
        repairs what `doctor` names."""
        from octobrain.store import row_sums  # (every row of a batch at once)

        sid = sql_str(source["id"])
        if self.damaged_sources(f"id = {sid}"):
            return True
        if CHECKSUM not in self.chunks.schema.names:
            return False
        # A chunk whose source id changed on disk is still this source's by what names it.
        query = self.chunks.search().where(f"source_id = {sid} OR ({_named_as(source)})")
        batches = query.select([*CHUNK_CHECKED, CHECKSUM]).limit(None).to_batches(CHUNK_CHECK_BATCH)
        return bool(row_sums.damaged_ids(batches, row_sums.chunks_damaged))

    def scan_chunks(self, where: str, columns: Sequence[str] = CHUNK_LIGHT) -> list[dict[str, Any]]:
        """Chunk rows matching `where` (a table made before the checksum column: without it)."""
        names = self.chunks.schema.names
        present = [c for c in columns if c in names]
        rows: list[dict[str, Any]] = (
            self.chunks.search().where(where).select(present).limit(None).to_list()
        )
        return rows

    def chunk_ids(self) -> list[str]:
        """Ids of every chunk row (a narrow scan for the mirror's diff)."""
        table = self.chunks.search().select(["id"]).limit(None).to_arrow()
        ids: list[str] = table.column("id").to_pylist()
        return ids

    def count_chunks(self, where: str | None = None) -> int:
        """Chunk rows matching `where` (stale generations included)."""
        return int(self.chunks.count_rows(where))

    # ---- writes ---------------------------------------------------------------------------

    def replace_source(
        self,
        source_row: dict[str, Any],
        chunk_rows: list[dict[str, Any]],
        check: Callable[[], None] | None = None,
    ) -> None:
        """Make `chunk_rows` the chunks of `source_row` atomically (see the module docstring).
        All chunk rows must carry `source_row["generation"]`. `check` runs first under the
        write lock, seeing every commit before it: what it raises stops the write, nothing
        written (a cap checked before it, and so before the embedding, let each of N writers
        at once pass it)."""
        sid, gen = sql_str(source_row["id"]), sql_str(source_row["generation"])
        # A row of this source whose id (a source row's) or source id (a chunk's) changed on
        # disk reads as another source's, which no delete by id reaches: it goes too, so that
        # indexing again is the repair `doctor` names for it.
        same = _named_as(source_row)
        with self.write_lock():
            if check is not None:
                check()
            self.location.check_held()
            if chunk_rows:
                self.chunks.add(_stamped(chunk_rows, chunk_checksum))
                self._commits.wrote(self.chunks)
            self._flip(source_row)
            if self.sources.count_rows(f"{same} AND id != {sid}"):
                self.sources.delete(f"{same} AND id != {sid}")
                self._commits.wrote(self.sources)
            self.chunks.delete(
                f"(source_id = {sid} AND generation != {gen}) OR ({same} AND source_id != {sid})"
            )
            self._commits.wrote(self.chunks)
            self._sweep()  # what another index, killed between its commits, left

    def add_sources(
        self, source_rows: list[dict[str, Any]], chunk_rows: list[dict[str, Any]]
    ) -> None:
        """Bulk import of new sources: all chunks in one commit, then all source rows in one
        (the commit that makes them visible). An id that already exists is replaced."""
        if not source_rows:
            return
        with self.write_lock():
            replaced = self.scan_sources(sql_in("id", [r["id"] for r in source_rows]))
            self.location.check_held()
            if chunk_rows:
                self.chunks.add(_stamped(chunk_rows, chunk_checksum))
                self._commits.wrote(self.chunks)
            (
                self.sources.merge_insert("id")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute(_stamped(source_rows, source_checksum))
            )
            self._commits.wrote(self.sources)
            for old in replaced:  # the previous generation's chunks of a replaced source
                sid, gen = sql_str(old["id"]), sql_str(old["generation"])
                self.chunks.delete(f"source_id = {sid} AND generation = {gen}")
                self._commits.wrote(self.chunks)
            self._sweep()

    def _flip(self, source_row: dict[str, Any]) -> None:
        """The one commit that switches a source to its new generation."""
        (
            self.sources.merge_insert("id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute(_stamped([source_row], source_checksum))
        )
        self._commits.wrote(self.sources)

    def touch(self, sid: str, last_checked: datetime, mtime: float, size: int) -> None:
        """Record a check that found the content unchanged (no re-embedding), of `size` bytes
        (the same text may be other bytes: a BOM, line ends)."""
        with self.write_lock():
            self.location.check_held()
            self.sources.update(
                where=f"id = {sql_str(sid)}",
                values={"last_checked": last_checked, "mtime": float(mtime), "size_bytes": size},
            )
            self._commits.wrote(self.sources)

    def delete_sources(self, ids: Sequence[str]) -> int:
        """Delete sources and their chunks: the source rows first (their chunks vanish from
        every reader at once), then the chunks. Returns the number of sources deleted."""
        if not ids:
            return 0
        with self.write_lock():
            where = sql_in("id", ids)
            found = int(self.sources.count_rows(where))
            self.location.check_held()
            if found:
                self.sources.delete(where)
                self._commits.wrote(self.sources)
            self.chunks.delete(sql_in("source_id", ids))
            self._commits.wrote(self.chunks)
        return found

    def purge_sessions(self, cutoff: datetime) -> int:
        """Delete session notes indexed before `cutoff`, and their chunks."""
        where = f"session_id != '' AND indexed_at < timestamp {sql_str(cutoff.isoformat())}"
        with self.write_lock():
            expired = [r["id"] for r in self.scan_sources(where)]
            self.location.check_held()
            if expired:
                self.sources.delete(sql_in("id", expired))
                self._commits.wrote(self.sources)
                self.chunks.delete(sql_in("source_id", expired))
                self._commits.wrote(self.chunks)
        return len(expired)

    def _sweep(self) -> int:
        """Under the write lock: delete the chunks whose generation no source row names (an
        index killed between its commits, `store.orphan_chunks`), `DELETE_BATCH` a commit;
        how many. Every write of sources ends with it (a look at the counts when none is
        left, `may_hold_orphans`)."""
        if not may_hold_orphans(self.sources, self.chunks):
            return 0
        ids = find_orphans(self.sources, self.chunks).ids()
        for at in range(0, len(ids), DELETE_BATCH):
            self.location.check_held()
            self.chunks.delete(sql_in("id", ids[at : at + DELETE_BATCH]))
            self._commits.wrote(self.chunks)
        if ids:
            log.info("%s: %d chunks of no source generation deleted", CHUNKS, len(ids))
        return len(ids)

    def drop_orphans(self) -> int:
        """Delete the chunks no source row names (`doctor --drop-orphan-chunks`); how many."""
        with self.write_lock():
            return self._sweep()

    def compact(self) -> None:
        """Merge small fragments and drop old versions of both tables."""
        with self.write_lock():
            self.location.check_held()
            for table in (self.sources, self.chunks):
                table.optimize(cleanup_older_than=KEEP_VERSIONS_FOR)
                self._commits.wrote(table)


def _unstamped(table: lancedb.table.Table) -> bool:
    """Whether a knowledge table lacks the checksum column, or has rows without one: made
    before it by an older octobrain, or left by a first stamping pass cut short (a count
    over one column, under a millisecond at 8,460 chunks)."""
    return CHECKSUM not in table.schema.names or bool(table.count_rows(f"{CHECKSUM} IS NULL"))


def _named_as(source: Mapping[str, Any]) -> str:
    """The rows named as `source` is (`schema.SOURCE_NAMING`), whatever id they read as."""
    return " AND ".join(f"{k} = {sql_str(source[k])}" for k in SOURCE_NAMING)


# The checksummed columns of each knowledge table, and their sum.
_CHECKED_BY = {SOURCES: (SOURCE_CHECKED, source_checksum), CHUNKS: (CHUNK_CHECKED, chunk_checksum)}


def _stamped(
    rows: list[dict[str, Any]], sum_of: Callable[[Mapping[str, Any]], int]
) -> list[dict[str, Any]]:
    """`rows` with their checksums set (`sum_of` each; every write of whole rows goes through
    this)."""
    for row in rows:
        row[CHECKSUM] = sum_of(row)
    return rows
