"""The consolidation log: one row per consolidation, the record that makes it reversible.

Each record keeps what the consolidation changed, exactly as it was before (importance as the
stored float32, state, pre-consolidation importance, updated_at of every member, and of a promoted
parent), the edges it added, and a status that doubles as a write-ahead journal:

    pending   → written first; the memories are not touched yet
    done      → the members and the parent were committed together
    reverting → unconsolidate started
    reverted  → unconsolidate finished (kept as the audit trail)

A process killed between steps leaves a `pending` or `reverting` record, which `repair` finishes
or rolls back the next time anyone consolidates.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from octobrain.store.journal_rows import (
    RECORD_CHECKED,
    consolidations_schema,
    journal_damaged,
    record_checksum,
    record_verified,
    records_damaged,
)
from octobrain.store.memories import MemoryStore
from octobrain.store.schema import CHECKSUM, CONSOLIDATIONS, DONE, PENDING, REVERTED, UNFINISHED
from octobrain.store.sql import sql_in, sql_str
from octobrain.times import utcnow

if TYPE_CHECKING:
    import lancedb

RECORD_KINDS = ("sleep", "goal")


@dataclass
class ConsolidationRecord:
    """What one consolidation changed, and how to undo it."""

    kind: str
    scope: str
    parent_id: str
    parent_synthesised: bool
    member_ids: list[str]
    member_prev_importance: list[float]
    member_prev_pre: list[float | None]
    member_prev_state: list[str]
    member_prev_updated_at: list[datetime]
    stamp: datetime
    description: str
    parent_prev_importance: float | None = None
    parent_prev_updated_at: datetime | None = None
    goal_id: str = ""
    edge_ids: list[str] = field(default_factory=list)
    status: str = PENDING
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    created_at: datetime = field(default_factory=utcnow)


class ConsolidationLog:
    """The `consolidations` table of one store (writes hold the store's write lock)."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        # Damaged records a read for one scope left alone, known to be another scope's (see
        # `_pass_over`): their ids, for the pass to name.
        self.passed_over: set[str] = set()

    @property
    def table(self) -> lancedb.table.Table:
        # The store keeps the handle: its write lock brings a journal made before the checksum
        # up to the current columns, and opens again one another process started over.
        return self.store.open_table(CONSOLIDATIONS, consolidations_schema())

    def add(self, *records: ConsolidationRecord) -> None:
        """Append records, each with its checksum (one commit)."""
        _ = self.table  # (opened first, so that the write lock brings it up to date)
        with self.store.write_lock():
            self.store.check_commit()
            rows = [{**record.__dict__} for record in records]
            for row in rows:
                row[CHECKSUM] = record_checksum(row)
            self.table.add(rows)
            self.store.wrote(self.table)

    def set_status(self, status: str, *record_ids: str) -> None:
        """Move records to `status` (one commit)."""
        with self.store.write_lock():
            self.store.check_commit()
            self.table.update(where=sql_in("id", list(record_ids)), values={"status": status})
            self.store.wrote(self.table)

    def find(self, where: str, scopes: Collection[str] = ()) -> list[ConsolidationRecord]:
        """Records matching a predicate, oldest first; `RowDamaged` naming the first damaged
        one, unless `scopes` are given (the caller's) and it is known to be another scope's
        (`_pass_over`)."""
        records = []
        for r in self.table.search().where(where).limit(None).to_list():
            if record_verified(r) is False:
                self._pass_over(r, scopes)
            else:
                records.append(ConsolidationRecord(**{k: r[k] for k in _RECORD_NAMES}))
        records.sort(key=lambda r: (r.created_at, r.id))
        return records

    def in_force_with(self, ids: Sequence[str]) -> list[ConsolidationRecord]:
        """The consolidations in force (`done`) with any of `ids` as parent or member."""
        if not ids or not self.store.made(CONSOLIDATIONS):
            return []
        listed = ", ".join(sql_str(i) for i in ids)
        return self.find(
            f"status = {sql_str(DONE)} AND "
            f"({sql_in('parent_id', list(ids))} OR array_has_any(member_ids, [{listed}]))"
        )

    def unfinished(self, scopes: Collection[str] = ()) -> list[ConsolidationRecord]:
        """Records a killed process left half-way (pending or reverting); for `scopes`, as
        `find` says."""
        return self.find(UNFINISHED, scopes)

    def not_to_cluster(self, scope: str) -> set[str]:
        """Ids a sleep pass must leave alone in `scope`: parents of consolidations in force (a
        record stays undoable on its own) and members of undone ones (someone said no).
        Every record is read and checked first (`RowDamaged` naming the first damaged one,
        nothing merged): one whose status or scope changed on disk was not selected, and
        the members someone had separated were merged again without a word. One known to be
        another scope's is left to it (`_pass_over`)."""
        import pyarrow.compute as pc

        table = self.table
        checked = CHECKSUM in table.schema.names
        columns = (
            [*RECORD_CHECKED, CHECKSUM]
            if checked
            else ["scope", "status", "parent_id", "member_ids"]
        )
        rows = table.search().select(columns).limit(None).to_arrow()
        if checked:
            for at in np.flatnonzero(records_damaged(rows)):
                self._pass_over(rows.slice(int(at), 1).to_pylist()[0], [scope])
        records = rows.filter(pc.equal(rows.column("scope"), scope)).to_pylist()
        out = {r["parent_id"] for r in records if r["status"] == DONE}
        out.update(m for r in records if r["status"] == REVERTED for m in r["member_ids"])
        return out

    def _pass_over(self, row: dict[str, Any], scopes: Collection[str]) -> None:
        """A damaged record (`row`) met by a read for `scopes`: left out, noted in
        `passed_over`, when it is known to be another scope's: it names a memory at least, and
        every one it names that the store holds reads the scope it reads as (a record's parent
        and members are of its scope; rows are never re-stamped). Else `RowDamaged`, naming it:
        one of `scopes`, or one whose scope or ids changed on disk, which may be anyone's
        (and any, when no scopes are given). (A project's damaged record stopped every
        project's sleep pass, and a pending one every forget.)"""
        named = [row["parent_id"], *(row["member_ids"] or ())]
        if scopes and row["scope"] not in scopes:
            held = self.store.scopes_of([str(i) for i in named]).values()
            if held and all(found == row["scope"] for found in held):
                self.passed_over.add(str(row["id"]))
                return
        raise journal_damaged(str(row["id"]), CONSOLIDATIONS)


_RECORD_NAMES = [name for name in consolidations_schema().names if name != CHECKSUM]
