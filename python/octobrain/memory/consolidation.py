"""Consolidation: the commit protocol every consolidation follows (the sleep pass in
`memory.sleep`, goal closing in `memory.goals`), its crash repair, and unconsolidate.

Every consolidation commits in the same order, under the store's write lock:

1. a `pending` record in the consolidation log (what will change, and the exact old values);
2. the new edges (`consolidated_from` parent → member; they dangle, invisibly, until step 3);
3. ONE merge commit to `memories`: the parent inserted or updated and every member flipped to
   `consolidated` — readers see the whole cluster or none of it;
4. the record marked `done`.

A sleep pass (`memory.sleep`) runs these four steps once per batch of up to `COMMIT_BATCH`
clusters (records, edges, rows and statuses of the whole batch in each commit), so a pass over a
thousand clusters is a few dozen commits; the guarantees below hold per batch as they do per
cluster.

A process killed anywhere leaves no half-consolidated cluster visible: before step 3 nothing a
reader sees has changed, after it everything has. The next consolidation, of any scope, first
`repair`s what a killed one left: a pending record whose memory commit landed is marked done,
one whose commit did not land is rolled back (its edges deleted). Unconsolidate mirrors this
with a `reverting` status and is idempotent, so a killed revert is simply finished.

Members keep their row, scope, embedding and text; only `state`, `importance`,
`pre_consolidation_importance` and `updated_at` change, and the log keeps their previous values
bit for bit (float32 as stored), so `unconsolidate` restores them exactly; an importance the user
set since (on a member or a promoted parent) stays.

What a synthesised parent says is made from its members (`Consolidator.made`), so it is known
which of its fields the user edited since: those are theirs, never written over when a member is
edited or forgotten, and a parent the user edited is kept as an ordinary memory by
`unconsolidate` instead of deleted (nothing is lost).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import numpy as np

from octobrain.config import Config
from octobrain.embed.base import Embedder
from octobrain.memory import merged_words
from octobrain.memory.merged_words import first_of
from octobrain.models import Memory, Relationship, RelationshipType, State
from octobrain.store import MemoryStore, NotFound
from octobrain.store.consolidations import ConsolidationLog, ConsolidationRecord
from octobrain.store.schema import (
    ABANDONED,
    CONSOLIDATIONS,
    DONE,
    PENDING,
    REVERTED,
    REVERTING,
    row_to_memory,
    stored_float,
)
from octobrain.store.sql import sql_in, sql_str
from octobrain.times import utcnow


def _checkpoint(step: str) -> None:
    """A named point between two commits. Does nothing; crash tests replace it to kill the
    process exactly there."""


@dataclass
class Consolidation:
    """One consolidation: done, or only planned (dry run, `record_id` empty)."""

    kind: str  # "sleep" | "goal"
    parent: Memory
    members: list[Memory]
    synthesised: bool
    description: str
    record_id: str = ""


@dataclass
class Released:
    """What a forget or an edit changed in the consolidations it touched."""

    restored: list[str] = field(default_factory=list)  # members on their own again
    rewritten: list[str] = field(default_factory=list)  # synthesised parents written again
    removed: list[str] = field(default_factory=list)  # synthesised parents the undo deleted
    # Synthesised parents whose words the user edited since the merge: left as the user wrote
    # them (they may still say what an edited or forgotten member said).
    kept: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Unconsolidation:
    """What `unconsolidate` undid."""

    parent_id: str
    restored: list[str]
    parent_removed: bool
    # A synthesised parent the user edited since the merge: kept as an ordinary memory.
    parent_kept: bool = False


def f32(value: float) -> float:
    """`value` rounded to float32, as the store keeps it."""
    return float(np.float32(value))


class Consolidator:
    """Consolidation over one store; scope rules come from the caller (`Brain`)."""

    def __init__(self, store: MemoryStore, embedder: Embedder, config: Config) -> None:
        self.store = store
        self.embedder = embedder
        self.config = config
        self.log = ConsolidationLog(store)

    # ---- crash repair ---------------------------------------------------------------------

    def repair(self, scopes: Collection[str] = ()) -> int:
        """Finish or roll back what a killed process left half-way. Returns records fixed.
        For the caller's `scopes`: a damaged record known to be another scope's is left to
        it (named in `log.passed_over`)."""
        fixed = 0
        for record in self.log.unfinished(scopes):
            with self.store.write_lock():
                if record.status == REVERTING:
                    self._revert(record, utcnow())
                elif self._landed(record):
                    self.log.set_status(DONE, record.id)
                else:
                    edges = sql_in("id", record.edge_ids)
                    if record.parent_prev_updated_at is None:  # the parent never existed
                        pid = sql_str(record.parent_id)
                        edges += f" OR source_id = {pid} OR target_id = {pid}"
                    self.store.delete_relationships(edges)
                    self.log.set_status(ABANDONED, record.id)
            fixed += 1
        return fixed

    def settle_restored(self) -> int:
        """After `restore`: an unconsolidate's first commit marks its record `reverting`, before
        the memory commit that undoes it. Restored to a moment between the two, the journal says
        `reverting` while the rows hold the consolidation in force, and the next repair would
        finish an undo the restore took back: such a record is `done` again. Returns how many.
        (Call under the write lock.)"""
        if not self.store.made(CONSOLIDATIONS):
            return 0
        in_force = [
            record.id
            for record in self.log.find(f"status = {sql_str(REVERTING)}")
            if any(
                row["state"] == State.CONSOLIDATED.value
                for row in self.store.scan(sql_in("id", record.member_ids), columns=["state"])
            )
        ]
        if in_force:
            self.log.set_status(DONE, *in_force)
        return len(in_force)

    def _landed(self, record: ConsolidationRecord) -> bool:
        ids = [*record.member_ids, record.parent_id]
        rows = self.store.scan(sql_in("id", ids), columns=["id", "state", "updated_at"])
        for row in rows:
            if row["id"] == record.parent_id:
                if record.parent_prev_updated_at is None or row["updated_at"] == record.stamp:
                    return True
            elif row["state"] == State.CONSOLIDATED.value and row["updated_at"] == record.stamp:
                return True
        return False

    # ---- the commit sequence --------------------------------------------------------------

    def commit(
        self,
        records: Sequence[ConsolidationRecord],
        rows: list[dict[str, Any]],
        edges: Sequence[Relationship],
        *,
        read: Sequence[dict[str, Any]],
    ) -> None:
        """Steps 1–4 of the module docstring for one or more consolidations at once (four
        commits in all, whatever their number); call with the write lock held. `read`: the
        rows as read that `rows` write back changed (`MemoryStore.merge_rows`)."""
        self.log.add(*records)
        _checkpoint("record")
        self.store.add_relationships(list(edges))
        _checkpoint("edges")
        self.store.merge_rows(rows, read=read)
        _checkpoint("memories")
        self.log.set_status(DONE, *(record.id for record in records))
        for record in records:
            record.status = DONE

    def _damped(self, importance: float) -> float:
        """The importance `flip_members` gives a member that had `importance` (as stored)."""
        factor = np.float32(self.config.consolidation.member_importance_factor)
        return float(np.float32(importance) * factor)

    def flip_members(
        self, members: list[dict[str, Any]], stamp: datetime
    ) -> tuple[list[dict[str, Any]], dict[str, list[Any]]]:
        """Member rows turned `consolidated` (damped importance), and their previous values."""
        before: dict[str, list[Any]] = {"imp": [], "pre": [], "state": [], "updated": []}
        out = []
        for row in members:
            before["imp"].append(row["importance"])
            before["pre"].append(row["pre_consolidation_importance"])
            before["state"].append(row["state"])
            before["updated"].append(row["updated_at"])
            new = dict(row)
            new["pre_consolidation_importance"] = row["importance"]
            new["importance"] = self._damped(row["importance"])
            new["state"] = State.CONSOLIDATED.value
            new["updated_at"] = stamp
            out.append(new)
        return out, before

    def new_record(
        self,
        kind: str,
        parent: Memory,
        synthesised: bool,
        before: dict[str, list[Any]],
        member_ids: list[str],
        stamp: datetime,
        edges: Sequence[Relationship],
        description: str,
        *,
        parent_prev: tuple[float, datetime] | None = None,
        goal_id: str = "",
    ) -> ConsolidationRecord:
        return ConsolidationRecord(
            kind=kind,
            scope=parent.scope,
            parent_id=parent.id,
            parent_synthesised=synthesised,
            member_ids=member_ids,
            member_prev_importance=before["imp"],
            member_prev_pre=before["pre"],
            member_prev_state=before["state"],
            member_prev_updated_at=before["updated"],
            stamp=stamp,
            description=description,
            parent_prev_importance=None if parent_prev is None else parent_prev[0],
            parent_prev_updated_at=None if parent_prev is None else parent_prev[1],
            goal_id=goal_id,
            edge_ids=[e.id for e in edges],
        )

    def member_edges(
        self, parent: Memory, member_ids: Sequence[str], description: str
    ) -> list[Relationship]:
        return [
            Relationship(
                parent.id, mid, RelationshipType.CONSOLIDATED_FROM, 1.0, description, parent.scope
            )
            for mid in member_ids
        ]

    def boosted(self, importances: Sequence[float]) -> float:
        boost = self.config.consolidation.goal_parent_boost
        return f32(min(1.0, max(importances) * boost))

    # ---- unconsolidate --------------------------------------------------------------------

    def unconsolidate(self, parent_id: str, scopes: Sequence[str]) -> Unconsolidation:
        """Undo the consolidations in force under `parent_id` (visible from `scopes`)."""
        self.repair(scopes)
        records = [
            r
            for r in self.log.find(f"parent_id = {sql_str(parent_id)} AND status = {sql_str(DONE)}")
            if r.scope in scopes
        ]
        if not records:
            raise NotFound(
                "parent_id", f"no consolidation in force has parent {parent_id} in this scope"
            )
        restored: list[str] = []
        removed = kept = False
        for record in reversed(records):
            members, parent_kept = self._undo(record)
            restored += members
            kept |= parent_kept
            removed |= record.parent_synthesised and not parent_kept
        return Unconsolidation(parent_id, restored, removed, kept)

    def _undo(self, record: ConsolidationRecord) -> tuple[list[str], bool]:
        """Undo one consolidation (journaled `reverting` first): the members restored, and
        whether its synthesised parent was kept (edited by the user since)."""
        with self.store.write_lock():
            self.log.set_status(REVERTING, record.id)
            _checkpoint("reverting")
            return self._revert(record, utcnow())

    # ---- a member or a parent forgotten, a member edited ----------------------------------

    def release(self, ids: Sequence[str], scopes: Collection[str] = ()) -> Released:
        """Before `ids` are deleted: the consolidations in force they take part in are made to
        hold without them. One whose parent is among them is undone (its members are on their
        own again, as `unconsolidate` leaves them), so no member stays consolidated into
        nothing; a synthesised parent of some of them is written again from the members it
        keeps, so a forgotten memory's words leave the merged one (undone when fewer than two
        are left), except the fields the user edited since the merge, which stay as written
        (`Released.kept`). Each is its own commit, made before the delete: a process killed
        between leaves the memories to forget present and their words already out of every
        parent. A store that never consolidated is not asked (nor given a journal by the
        asking). `scopes`: the caller's, as `repair` takes them."""
        if not self.store.made(CONSOLIDATIONS):
            return Released()
        self.repair(scopes)
        gone = set(ids)
        released = Released()
        for record in self.log.in_force_with(ids):
            if record.parent_id in gone:
                restored, kept = self._undo(record)
                released.restored += restored
                if record.parent_synthesised and not kept:
                    released.removed.append(record.parent_id)
            elif record.parent_synthesised:
                self._rewrite(record, gone, released)
        return released

    def edited(self, before: Memory) -> Released:
        """After a member's text, tags or files were edited (`before`: as it was): the
        synthesised parents it is merged into say what their members say now (the old words
        would otherwise still answer, above the edit), in the fields the user has not edited
        on the parent itself."""
        released = Released()
        for record in self.log.in_force_with([before.id]):
            if record.parent_synthesised and before.id in record.member_ids:
                self._rewrite(record, set(), released, before=before)
        return released

    def _rewrite(
        self,
        record: ConsolidationRecord,
        gone: set[str],
        released: Released,
        before: Memory | None = None,
    ) -> None:
        """A synthesised parent made again from its members but `gone`, in the record's order;
        undone instead when fewer than two are left. A field says what the members make it say
        now only when it said what they made it say before (`before`: an edited member as it
        was); one the user edited since stays theirs."""
        with self.store.write_lock():
            rows = {
                r["id"]: r
                for r in self.store.scan(sql_in("id", [record.parent_id, *record.member_ids]))
            }
            if record.parent_id not in rows:
                return
            present = [row_to_memory(rows[m]) for m in record.member_ids if m in rows]
            members = [m for m in present if m.id not in gone]
            if len(members) < 2:
                restored, kept = self._undo(record)
                released.restored += restored
                if kept:
                    released.kept.append(record.parent_id)
                return
            if before is not None:
                present = [before if m.id == before.id else m for m in present]
            parent = row_to_memory(rows[record.parent_id])
            theirs = merged_words.users_fields(
                record, parent, merged_words.said(record, present, rows, self.boosted)
            )
            if theirs & set(merged_words.TEXT_FIELDS):
                released.kept.append(parent.id)
            changes: dict[str, Any] = {
                name: stored_float(value) if name == "importance" else value
                for name, value in merged_words.made(record, members, self.boosted).items()
                if name not in theirs and value is not None
            }
            new = replace(parent, **changes)
            if new == parent:
                return
            new = replace(new, updated_at=utcnow())
            vector = self.embedder.embed_documents([new.searchable_text()])[0]
            self.store.replace(new, vector, read=parent)
            released.rewritten.append(parent.id)

    def _revert(self, record: ConsolidationRecord, now: datetime) -> tuple[list[str], bool]:
        """Restore members (and a promoted parent) from the record; idempotent. Returns the
        members restored and whether the synthesised parent was kept: one the user edited
        since holds their words, so it stays, an ordinary memory, instead of being deleted."""
        index = {mid: i for i, mid in enumerate(record.member_ids)}
        found = {
            r["id"]: r
            for r in self.store.scan(sql_in("id", [*record.member_ids, record.parent_id]))
        }
        keep = (
            record.parent_synthesised
            and record.parent_id in found
            and merged_words.edited_by_user(record, found, self.boosted)
        )
        rows, read = [], []
        for row in found.values():
            new = dict(row)
            untouched = row["updated_at"] == record.stamp
            if row["id"] == record.parent_id:
                if record.parent_synthesised:
                    continue  # deleted below, or kept (the user's words)
                assert record.parent_prev_importance is not None
                given = max(
                    record.parent_prev_importance, self.boosted(record.member_prev_importance)
                )
                if not (untouched or merged_words.same_importance(row["importance"], given)):
                    continue  # an importance the user set since: theirs
                new["importance"] = record.parent_prev_importance
                new["updated_at"] = (record.parent_prev_updated_at or now) if untouched else now
            elif row["state"] == State.CONSOLIDATED.value:
                i = index[row["id"]]
                # The importance the consolidation gave it goes back; one set since (an
                # acknowledged `update`) stays.
                if untouched or merged_words.same_importance(
                    row["importance"], self._damped(record.member_prev_importance[i])
                ):
                    new["importance"] = record.member_prev_importance[i]
                new["pre_consolidation_importance"] = record.member_prev_pre[i]
                new["state"] = record.member_prev_state[i]
                # The exact old timestamp when nothing touched the row since, so the restored
                # row is the old row; otherwise a fresh one, so every mirror re-reads it.
                new["updated_at"] = record.member_prev_updated_at[i] if untouched else now
            else:
                continue
            rows.append(new)
            read.append(row)
        drop = record.parent_synthesised and not keep
        delete = f"id = {sql_str(record.parent_id)}" if drop else None
        if rows or delete:
            self.store.merge_rows(rows, delete_where=delete, read=read)
        _checkpoint("restored")
        edges = sql_in("id", record.edge_ids)
        if drop:
            pid = sql_str(record.parent_id)
            edges += f" OR source_id = {pid} OR target_id = {pid}"
        self.store.delete_relationships(edges)
        _checkpoint("edges_removed")
        self.log.set_status(REVERTED, record.id)
        return [r["id"] for r in rows if r["id"] != record.parent_id], keep


__all__ = [
    "ABANDONED",
    "DONE",
    "PENDING",
    "REVERTED",
    "REVERTING",
    "Consolidation",
    "Consolidator",
    "Released",
    "Unconsolidation",
    "f32",
    "first_of",
]
