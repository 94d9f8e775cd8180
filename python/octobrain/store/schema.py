"""Arrow schemas of the LanceDB tables, and row ↔ model conversion."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

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

# Every embedder (`embed.base`) and `memory import` store unit-length vectors: one further from
# it than float32 rounding was changed on disk (Lance keeps no checksum of its data pages, so
# such a byte reads back without an error), and scored as it is, a memory holding it outranks
# every other for any query (a relevance of 1e28).
UNIT_SLACK = 1e-3
REEMBED = "`octobrain memory reembed` embeds every memory again from its text"


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


_TS = pa.timestamp("us", tz="UTC")
CONTEXT = "context"

# The consolidation log's `status` values (`store.consolidations`); a killed process leaves a
# record pending or reverting, which the next consolidation finishes or undoes.
PENDING, DONE, REVERTING, REVERTED = "pending", "done", "reverting", "reverted"
RECORD_STATUSES = (PENDING, DONE, REVERTING, REVERTED)
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
            # Added after schema 1 shipped: stores made before it gain it on open (null = "").
            pa.field(CONTEXT, pa.string(), nullable=True),
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
        ],
        metadata={META_SCHEMA: SCHEMA_VERSION.encode()},
    )


def memory_to_row(memory: Memory, embedding: np.ndarray) -> dict[str, Any]:
    """One `memories` row: every Memory field is a column, plus the embedding."""
    return {**to_plain(memory, iso_times=False), "embedding": np.asarray(embedding, np.float32)}


def stored_float(value: Any) -> float:
    """A float32 column's value as written: rounded, so 0.7 reads back as 0.7, not 0.699999988."""
    return round(float(value), 6)


def row_to_memory(row: dict[str, Any]) -> Memory:
    """A `memories` row (as `to_list` returns it) back to a Memory."""
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


def missing_columns(table_schema: pa.Schema) -> list[pa.Field]:
    """Columns a `memories` table made by an older version lacks (nullable, added on open)."""
    return [] if CONTEXT in table_schema.names else [pa.field(CONTEXT, pa.string(), nullable=True)]


def relationship_to_row(rel: Relationship) -> dict[str, Any]:
    """One `relationships` row."""
    return to_plain(rel, iso_times=False)


def row_to_relationship(row: dict[str, Any]) -> Relationship:
    """A `relationships` row back to a Relationship."""
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
