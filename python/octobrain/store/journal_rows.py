"""The rows of the consolidation journal (`store.consolidations`) and their checksum.

Lance keeps no checksum of its data pages, so a bit flipped in a record's member id read back
as another id: `unconsolidate` restored the members it still found and called the group
undone, leaving the other consolidated for good. Each record therefore carries the CRC-32 of
what it was written with (`schema.checksum`'s encoding, field by field), checked wherever a
record is read and by `doctor`. Not its status, which each step of the journal sets by SQL
(an older octobrain too): a status is checked against the statuses there are instead. A
record is never rewritten, so all 64 bits of its checksum (the CRC beside its `created_at`, a
memory's layout) must match; a journal made before the column gains it, each record's
computed, with the next write (`upkeep`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from octobrain.store import row_sums
from octobrain.store.schema import (
    CHECKSUM,
    CHECKSUM_FIELD,
    RECORD_STATUSES,
    RowDamaged,
    checksum,
)

_TS = pa.timestamp("us", tz="UTC")


def consolidations_schema() -> pa.Schema:
    """Schema of the `consolidations` table."""
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("kind", pa.string(), nullable=False),  # sleep | goal
            pa.field("status", pa.string(), nullable=False),
            pa.field("scope", pa.string(), nullable=False),
            pa.field("parent_id", pa.string(), nullable=False),
            pa.field("parent_synthesised", pa.bool_(), nullable=False),
            pa.field("parent_prev_importance", pa.float32(), nullable=True),
            pa.field("parent_prev_updated_at", _TS, nullable=True),
            pa.field("goal_id", pa.string(), nullable=False),
            pa.field("member_ids", pa.list_(pa.string()), nullable=False),
            pa.field("member_prev_importance", pa.list_(pa.float32()), nullable=False),
            pa.field("member_prev_pre", pa.list_(pa.float32()), nullable=False),
            pa.field("member_prev_state", pa.list_(pa.string()), nullable=False),
            pa.field("member_prev_updated_at", pa.list_(_TS), nullable=False),
            pa.field("edge_ids", pa.list_(pa.string()), nullable=False),
            pa.field("stamp", _TS, nullable=False),  # updated_at this consolidation wrote
            pa.field("description", pa.string(), nullable=False),
            pa.field("created_at", _TS, nullable=False),
            # Added later: a journal made before it gains it with its next write.
            CHECKSUM_FIELD,
        ]
    )


# What a record's checksum covers: everything it was written with but its status.
RECORD_FIELDS = (
    ("id", "kind", "scope", "parent_id", "goal_id", "description"),
    ("member_ids", "member_prev_importance", "member_prev_pre", "member_prev_state",
     "member_prev_updated_at", "edge_ids"),
    ("parent_synthesised", "parent_prev_importance"),
    ("parent_prev_updated_at", "stamp", "created_at"),
)  # fmt: skip
RECORD_CHECKED = (*(name for group in RECORD_FIELDS for name in group), "status")


def record_checksum(row: Mapping[str, Any]) -> int:
    """The `checksum` of a `consolidations` row: the CRC-32 of its `RECORD_CHECKED` fields but
    its status, beside its `created_at` (`schema.checksum`; never rewritten, so never
    restamped: `record_verified` compares the whole value)."""
    return checksum(row, RECORD_FIELDS, "created_at")


def record_verified(row: Mapping[str, Any]) -> bool | None:
    """Whether a `consolidations` row matches its checksum and holds a status there is; None
    when it has no checksum (written before the column, or by an older octobrain)."""
    stored = row.get(CHECKSUM)
    if stored is None:
        return None
    return row["status"] in RECORD_STATUSES and stored == record_checksum(row)


def records_damaged(rows: pa.Table) -> npt.NDArray[np.bool_]:
    """Of each row of `rows` (its `RECORD_CHECKED` fields and checksum), whether
    `record_verified` is False, every row at once."""
    import pyarrow.compute as pc  # (40 ms of every new process's start when imported above)

    stamped = row_sums.flags(rows.column(CHECKSUM).is_valid())
    known = row_sums.flags(pc.is_in(rows.column("status"), pa.array(RECORD_STATUSES)))
    return row_sums.damaged(rows, RECORD_FIELDS, "created_at") | (stamped & ~known)


def journal_damaged(row_id: str, table: str) -> RowDamaged:
    """`RowDamaged` for a journal row (a consolidation record, a forgotten turn): one is read
    only by a write or an undo, which it stops before anything is written, so the line says
    so rather than a read's "it is not shown"."""
    return RowDamaged(row_id, table, "nothing was changed")
