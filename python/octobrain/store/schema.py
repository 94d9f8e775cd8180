"""Arrow schemas of the LanceDB tables, and row ↔ model conversion."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa

from octobrain.errors import StorageError
from octobrain.models import (
    Memory,
    MemoryType,
    Relationship,
    RelationshipType,
    Source,
    State,
    to_plain,
)
from octobrain.store.sql import sql_in

SCHEMA_VERSION = "1"
META_MODEL = b"octobrain.embedding_model"
META_DIM = b"octobrain.embedding_dim"
META_SCHEMA = b"octobrain.schema_version"
# The store's tables (the consolidation journal lives beside the memories and their edges).
MEMORIES = "memories"
RELATIONSHIPS = "relationships"
CONSOLIDATIONS = "consolidations"

REEMBED = "`octobrain memory reembed` embeds every memory again from its text"


def embedded_with(table_schema: pa.Schema) -> tuple[str, str]:
    """The model and dimension a table's metadata says embedded it (`"", "0"` when unsaid),
    as written: what a handle's configured model is compared with."""
    meta = table_schema.metadata or {}
    return meta.get(META_MODEL, b"").decode(), meta.get(META_DIM, b"0").decode()


_TS = pa.timestamp("us", tz="UTC")
CONTEXT = "context"
CHECKSUM = "checksum"
CHUNKS = "knowledge_chunks"
SOURCES = "knowledge_sources"

# What a row's checksum covers: every field a user wrote or a command shows, not the counters
# each recall bumps by SQL (`access_count`, `last_accessed`) nor the embedding (checked for
# unit length instead; the mirror holds no rows of it).
CHECKED_TEXT = (
    "id", "scope", "role", "memory_type", "title", "content", "source", "state", "git_commit",
    CONTEXT,
)  # fmt: skip
CHECKED_LISTS = ("tags", "related_files")
CHECKED_FLOATS = ("importance", "pre_consolidation_importance")
CHECKED_TIMES = ("created_at", "updated_at")
CHECKED = (*CHECKED_TEXT, *CHECKED_LISTS, *CHECKED_FLOATS, *CHECKED_TIMES)
_LATER = {
    CONTEXT: pa.field(CONTEXT, pa.string(), nullable=True),
    CHECKSUM: pa.field(CHECKSUM, pa.int64(), nullable=True),
}
CHECKSUM_FIELD = _LATER[CHECKSUM]
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)
_STAMP_BITS = 0x7FFFFFFF
# The way out of a row that no longer matches its checksum: every version since it was written
# reads the same data file, so `memory restore` does not bring the row back as it was.
GARBLED_REPAIR = (
    "`octobrain memory forget <id> --yes` removes such a memory (`octobrain doctor "
    "--forget-damaged`: every one, whatever scope it reads as), and `octobrain memory import` "
    "of an export made before the damage stores it again as it was; otherwise restore the store "
    "directory from a backup"
)


# What a listing shows for a memory whose row no longer matches its checksum, in place of its
# title (`Brain.forget_targets`, an ambiguous id prefix's candidates).
DAMAGED_TITLE = "(damaged: no longer matches its checksum; not shown)"
DAMAGED_NAMED = 5  # damaged rows a `stats` answer names by id (the rest: counted)


def first_damaged(ids: Iterable[str]) -> list[str]:
    """The damaged rows' ids a `stats` answer names: the first `DAMAGED_NAMED` in id order."""
    return sorted(ids)[:DAMAGED_NAMED]


class RowDamaged(StorageError):
    """A memory row (or an edge) no longer matches the checksum written with it: a data file
    changed on disk (Lance keeps no checksum of its pages, so a flipped bit reads back as other
    text). `outcome`: what became of the call that read it (a read's row is not shown; a
    journal row, read only by a write or an undo, stops it before anything is written)."""

    def __init__(
        self, row_id: str, table: str = "memories", outcome: str = "it is not shown"
    ) -> None:
        super().__init__(
            f"store: table {table!r} is damaged: {describe_garbled([row_id], 1, table)}; "
            f"{outcome}. Run `octobrain doctor` for details"
        )
        self.row_id, self.table = row_id, table


# How the report names the rows of each checksummed table: one, several, what may read changed.
_ROW_WORDS = {
    "memories": ("memory", "memories", "text, tags or times"),
    "relationships": ("link", "links", "ends, type, strength, description or time"),
    CHUNKS: ("a chunk of", "chunks", "text, section, title or source"),
    SOURCES: ("source", "sources", "text, title or settings"),
    "forgotten_turns": ("forgotten turn", "forgotten turns", "ids, scopes or times"),
    CONSOLIDATIONS: (
        "consolidation record",
        "consolidation records",
        "member ids, earlier importances, states or times",
    ),
}


def describe_garbled(
    ids: Sequence[str], count: int, table: str = "memories", sources: int = 0
) -> str:
    """What the store says of the `count` rows of `table` that no longer match their
    checksum, the first of them named by `ids` (as they read now; chunks by the `sources`
    they are of)."""
    one, many, what = _ROW_WORDS[table]
    more = f" (and {count - len(ids):,} more)" if count > len(ids) else ""
    if table == CHUNKS and count > 1:  # named by their sources, several chunks to one
        more = f" (and {sources - len(ids):,} more sources)" if sources > len(ids) else ""
        ids = [f"of {ids[0]}", *ids[1:]]
    if count == 1:
        return (
            f"{one} {ids[0]} no longer matches the checksum written with it: a data file "
            f"changed on disk (its {what} read back changed)"
        )
    return (
        f"{count:,} {many} ({', '.join(ids)}{more}) no longer match the checksum written "
        f"with them: a data file changed on disk (their {what} read back changed)"
    )


def _micros(value: datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - _EPOCH) // _MICRO


def _crc(row: Mapping[str, Any], fields: tuple[tuple[str, ...], ...] | None = None) -> int:
    """CRC-32 of the checked fields of `row` (a row as written or as read back; `fields`: its
    text, list, float and time fields, by default a memory's), each length-prefixed so no two
    rows share an encoding."""
    text, lists, floats, times = fields or (
        CHECKED_TEXT,
        CHECKED_LISTS,
        CHECKED_FLOATS,
        CHECKED_TIMES,
    )
    # Summed part by part, never joined: a source's text is up to `max_source_bytes`, and a
    # join copied it once more (a 46 MB text: 65 ms a check, 37-39 ms part by part).
    crc = 0
    for name in text:
        raw = _bytes(row.get(name) or "")
        crc = zlib.crc32(raw, zlib.crc32(len(raw).to_bytes(4, "little"), crc))
    for name in lists:
        items = row.get(name) or ()
        crc = zlib.crc32(len(items).to_bytes(4, "little"), crc)
        for item in items:
            raw = _bytes(item)
            crc = zlib.crc32(raw, zlib.crc32(len(raw).to_bytes(4, "little"), crc))
    for name in (*floats, *times):
        crc = zlib.crc32(_bytes(row[name] if name in times else row.get(name)), crc)
    return crc


def _bytes(value: Any) -> bytes:
    """What a checksum takes of one value (a field, or an item of a list): text as UTF-8, a
    time as its microseconds, a number (or a flag) as the float32 stored, nothing as `-`."""
    if value is None:
        return b"-"
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    if isinstance(value, datetime):
        return _micros(value).to_bytes(8, "little", signed=True)
    return struct.pack("<f", float(value))


def checksum(
    row: Mapping[str, Any],
    fields: tuple[tuple[str, ...], ...] | None = None,
    at: str = "updated_at",
) -> int:
    """The `checksum` column of `row`: the CRC-32 of its checked fields (low 32 bits; `fields`,
    by default a memory's) and the low 31 bits of the time `at` it was made for. A row an
    older octobrain rewrote keeps the column it had (Lance keeps a column a write does not
    name) beside another time: that row is read unverified until it is stamped again."""
    return (_micros(row[at]) & _STAMP_BITS) << 32 | _crc(row, fields)


def stamped(row: dict[str, Any]) -> dict[str, Any]:
    """`row` with its `checksum` set (every write of a whole row goes through this)."""
    row[CHECKSUM] = checksum(row)
    return row


def stamps(
    batches: Iterable[pa.RecordBatch], sum_of: Callable[[Mapping[str, Any]], int]
) -> pa.Table:
    """The `id` and `checksum` (`sum_of` the row) of each row of `batches`: what a stamping
    pass merges into its table by id."""
    sums: dict[str, int] = {}
    for batch in batches:
        sums.update((row["id"], sum_of(row)) for row in batch.to_pylist())
    return pa.table(
        {"id": pa.array(list(sums), pa.string()), CHECKSUM: pa.array(sums.values(), pa.int64())}
    )


def unstamped(row: Mapping[str, Any], at: str = "updated_at") -> bool:
    """Whether `row` (its time `at` and `checksum`) has no checksum made for it: written
    before the column, or since by an older octobrain."""
    stored = row.get(CHECKSUM)
    return stored is None or stored >> 32 != _micros(row[at]) & _STAMP_BITS


def unstamped_mask(rows: pa.Table) -> pa.ChunkedArray:
    """`unstamped` of each row of `rows` (its `updated_at` and `checksum` columns) at once."""
    import pyarrow.compute as pc

    stored = rows[CHECKSUM]
    made_for = pc.bit_wise_and(pc.cast(rows["updated_at"], pa.int64()), _STAMP_BITS)
    other = pc.not_equal(pc.shift_right(stored, 32), made_for)
    return pc.or_kleene(pc.is_null(stored), pc.fill_null(other, True))


def verified(
    row: Mapping[str, Any],
    fields: tuple[tuple[str, ...], ...] | None = None,
    at: str = "updated_at",
) -> bool | None:
    """Whether `row` (holding the `CHECKED` fields, or `fields` and `at`) matches its checksum;
    None when it has none to check (`unstamped`)."""
    if unstamped(row, at):
        return None
    return bool(row[CHECKSUM] & 0xFFFFFFFF == _crc(row, fields))


def shown_title(row: Mapping[str, Any]) -> str:
    """The title a listing shows of a memory row (its `CHECKED` fields): `DAMAGED_TITLE`
    when the row no longer matches its checksum, never the title as it reads back."""
    return DAMAGED_TITLE if verified(row) is False else str(row["title"])


def check_row(row: Mapping[str, Any]) -> None:
    """`RowDamaged` when `row` does not match its checksum."""
    if verified(row) is False:
        raise RowDamaged(str(row["id"]))


# The consolidation log's `status` values (`store.consolidations`); a killed process leaves a
# record pending or reverting, which the next consolidation finishes or undoes (a pending one
# whose memory commit never landed is rolled back: abandoned).
PENDING, DONE, REVERTING, REVERTED = "pending", "done", "reverting", "reverted"
ABANDONED = "abandoned"
RECORD_STATUSES = (PENDING, DONE, REVERTING, REVERTED, ABANDONED)
# Records nothing acts on again: their edges are gone (a synthesised parent too, unless edited).
SETTLED = (REVERTED, ABANDONED)
UNFINISHED = sql_in("status", [PENDING, REVERTING])


def memories_schema(model_id: str, dim: int) -> pa.Schema:
    """Schema of `memories`; the metadata records which model made the embeddings."""
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("scope", pa.string(), nullable=False),
            pa.field("role", pa.string(), nullable=False),
            pa.field("memory_type", pa.string(), nullable=False),
            pa.field("title", pa.string(), nullable=False),
            pa.field("content", pa.string(), nullable=False),
            pa.field("tags", pa.list_(pa.string()), nullable=False),
            pa.field("related_files", pa.list_(pa.string()), nullable=False),
            pa.field("importance", pa.float32(), nullable=False),
            pa.field("pre_consolidation_importance", pa.float32(), nullable=True),
            pa.field("source", pa.string(), nullable=False),
            pa.field("state", pa.string(), nullable=False),
            pa.field("created_at", _TS, nullable=False),
            pa.field("updated_at", _TS, nullable=False),
            pa.field("last_accessed", _TS, nullable=False),
            pa.field("access_count", pa.int64(), nullable=False),
            pa.field("git_commit", pa.string(), nullable=False),
            pa.field("embedding", pa.list_(pa.float32(), dim), nullable=False),
            # Added after schema 1 shipped: stores made before them gain them with their first
            # write (`missing_columns`; context null = "", each checksum computed then).
            *_LATER.values(),
        ],
        metadata={
            META_MODEL: model_id.encode(),
            META_DIM: str(dim).encode(),
            META_SCHEMA: SCHEMA_VERSION.encode(),
        },
    )


def relationships_schema() -> pa.Schema:
    """Schema of `relationships`: directed, typed edges."""
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("source_id", pa.string(), nullable=False),
            pa.field("target_id", pa.string(), nullable=False),
            pa.field("relationship_type", pa.string(), nullable=False),
            pa.field("strength", pa.float32(), nullable=False),
            pa.field("description", pa.string(), nullable=False),
            pa.field("scope", pa.string(), nullable=False),
            pa.field("created_at", _TS, nullable=False),
            # Added after schema 1 shipped (`missing_checksum_column`): the CRC-32 of every field
            # (`edge_checksum`; an edge is never rewritten, so it needs no stamp).
            _LATER[CHECKSUM],
        ],
        metadata={META_SCHEMA: SCHEMA_VERSION.encode()},
    )


def memory_to_row(memory: Memory, embedding: np.ndarray) -> dict[str, Any]:
    """One `memories` row: every Memory field is a column, plus the embedding."""
    return {**to_plain(memory, iso_times=False), "embedding": np.asarray(embedding, np.float32)}


def stored_float(value: Any) -> float:
    """A float32 column's value as written: rounded, so 0.7 reads back as 0.7, not 0.699999988."""
    return round(float(value), 6)


def row_to_memory(row: dict[str, Any], *, checked: bool = True) -> Memory:
    """A `memories` row (as `to_list` returns it) back to a Memory; `RowDamaged` when it
    holds a checksum it no longer matches (unless not `checked`: a `forget` of it)."""
    if checked:
        check_row(row)
    pre = row.get("pre_consolidation_importance")
    return Memory(
        id=row["id"],
        scope=row["scope"],
        role=row["role"],
        memory_type=MemoryType(row["memory_type"]),
        title=row["title"],
        content=row["content"],
        tags=list(row["tags"] or []),
        related_files=list(row["related_files"] or []),
        importance=stored_float(row["importance"]),
        pre_consolidation_importance=None if pre is None else stored_float(pre),
        source=Source(row["source"]),
        state=State(row["state"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        last_accessed=row["last_accessed"],
        access_count=int(row["access_count"]),
        git_commit=row["git_commit"],
        context=row.get(CONTEXT) or "",
    )


def first_columns(table_schema: pa.Schema) -> list[str]:
    """The columns of `table_schema` (a table's, as octobrain writes it) that a table of any
    age holds: not those added since schema 1 shipped, which a store made before them gains
    with its next write (`missing_columns`)."""
    return [name for name in table_schema.names if name not in _LATER]


def missing_columns(table_schema: pa.Schema) -> list[pa.Field]:
    """Columns a `memories` table made by an older version lacks (nullable, added on open)."""
    return [field for name, field in _LATER.items() if name not in table_schema.names]


EDGE_FIELDS = (
    ("id", "source_id", "target_id", "relationship_type", "description", "scope"),
    (),
    ("strength",),
    ("created_at",),
)
EDGE_CHECKED = tuple(name for group in EDGE_FIELDS for name in group)  # (every field)


def edge_checksum(row: Mapping[str, Any]) -> int:
    """The `checksum` of a `relationships` row: the CRC-32 of all its fields."""
    return _crc(row, EDGE_FIELDS)


def missing_checksum_column(table_schema: pa.Schema) -> list[pa.Field]:
    """The column a table whose rows are never rewritten (`relationships`, `consolidations`,
    `forgotten_turns`) lacks when an older version made it: its checksum (added, each row's
    computed, by the first write)."""
    return [] if CHECKSUM in table_schema.names else [CHECKSUM_FIELD]


def relationship_to_row(rel: Relationship) -> dict[str, Any]:
    """One `relationships` row, with its checksum."""
    row = to_plain(rel, iso_times=False)
    row[CHECKSUM] = edge_checksum(row)
    return row


def _matches(row: Mapping[str, Any], sum_of: Callable[[Mapping[str, Any]], int]) -> bool | None:
    """Whether a row never rewritten matches its checksum (`sum_of` it); None when it has none
    (written before the column, or by an older octobrain)."""
    stored = row.get(CHECKSUM)
    return None if stored is None else stored == sum_of(row)


def edge_verified(row: Mapping[str, Any]) -> bool | None:
    """Whether a `relationships` row matches its checksum; None when it has none (written
    before the column, or by an older octobrain)."""
    return _matches(row, edge_checksum)


def row_to_relationship(row: dict[str, Any]) -> Relationship:
    """A `relationships` row back to a Relationship; `RowDamaged` when it holds a checksum it
    no longer matches."""
    if edge_verified(row) is False:
        raise RowDamaged(str(row["id"]), "relationships")
    return Relationship(
        id=row["id"],
        source_id=row["source_id"],
        target_id=row["target_id"],
        relationship_type=RelationshipType(row["relationship_type"]),
        strength=stored_float(row["strength"]),
        description=row["description"],
        scope=row["scope"],
        created_at=row["created_at"],
    )


# What a knowledge chunk's checksum covers: what a search shows of it (its text, parent text,
# section path, title and source) and what decides who sees it (scope, session, generation).
# Not its embedding (`doctor` checks it for unit length) nor its position in the document
# (chunk index and byte range), which nothing shows.
CHUNK_FIELDS = (
    ("id", "source_id", "generation", "uri", "scope", "session_id", "title", "content",
     "parent_content"),
    ("section_path",),
    (),
    ("indexed_at",),
)  # fmt: skip
CHUNK_CHECKED = tuple(name for group in CHUNK_FIELDS for name in group)
# What a knowledge source's checksum covers: its extracted text (`match` and `read` show it)
# and what names and finds it. Not the check times and counts (`last_checked` and `mtime` are
# updated by SQL when a check finds it unchanged; the counts and size are shown, not read).
SOURCE_FIELDS = (
    ("id", "uri", "scope", "session_id", "title", "doc_type", "content_hash", "chunker", "text",
     "generation"),
    (),
    (),
    ("indexed_at",),
)  # fmt: skip
SOURCE_CHECKED = tuple(name for group in SOURCE_FIELDS for name in group)
# What a knowledge source's id is made of, and its chunks carry too: a row whose id changed on
# disk is still that source's by them.
SOURCE_NAMING = ("uri", "scope", "session_id")


def chunk_checksum(row: Mapping[str, Any]) -> int:
    """The `checksum` of a `knowledge_chunks` row: the CRC-32 of its `CHUNK_CHECKED` fields (a
    chunk is never rewritten, so it needs no stamp)."""
    return _crc(row, CHUNK_FIELDS)


def source_checksum(row: Mapping[str, Any]) -> int:
    """The `checksum` of a `knowledge_sources` row: the CRC-32 of its `SOURCE_CHECKED` fields
    beside the `indexed_at` it was made for (a memory's way, `checksum`): a source an older
    octobrain indexed again keeps the checksum it had beside another `indexed_at`, and reads
    unchecked."""
    return checksum(row, SOURCE_FIELDS, "indexed_at")


def chunk_verified(row: Mapping[str, Any]) -> bool | None:
    """Whether a `knowledge_chunks` row matches its checksum; None when it has none (indexed
    before the column, or by an older octobrain)."""
    return _matches(row, chunk_checksum)


def source_verified(row: Mapping[str, Any]) -> bool | None:
    """Whether a `knowledge_sources` row (with its text) matches its checksum; None when it
    has none made for it."""
    return verified(row, SOURCE_FIELDS, "indexed_at")


_KNOWLEDGE_VERIFIED = {CHUNKS: chunk_verified, SOURCES: source_verified}


def check_knowledge(row: Mapping[str, Any], table: str) -> None:
    """`RowDamaged` (naming the row's source) when a row of the knowledge table `table` about
    to be shown does not match its checksum."""
    if _KNOWLEDGE_VERIFIED[table](row) is False:
        raise RowDamaged(str(row["uri"]), table)
