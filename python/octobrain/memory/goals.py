"""Goal-anchored consolidation: a memory that `closes` a goal becomes the parent of the goal's
findings (memories that `achieves` it, in the parent's scope), through the same recorded,
crash-safe commit sequence as sleep passes (see `octobrain.memory.consolidation`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np

from octobrain.errors import InvalidInput
from octobrain.memory import consolidation
from octobrain.memory.consolidation import DONE, Consolidation, Consolidator, f32
from octobrain.memory.summary import summarise
from octobrain.models import MAX_TAGS, Memory, MemoryType, Relationship, RelationshipType, State
from octobrain.store.schema import memory_to_row, row_to_memory
from octobrain.store.sql import sql_in, sql_str

__all__ = ["close_goal", "close_goal_with_new", "goal_sources"]


def goal_sources(
    c: Consolidator, goal_id: str, scope: str, exclude: str = ""
) -> list[dict[str, Any]]:
    """Working memories of `scope` that `achieves` the goal (full rows)."""
    ids = [
        r.source_id
        for r in c.store.relationships_of([goal_id])
        if r.relationship_type is RelationshipType.ACHIEVES and r.target_id == goal_id
    ]
    ids = [i for i in dict.fromkeys(ids) if i != exclude]
    if not ids:
        return []
    where = (
        f"{sql_in('id', ids)} AND scope = {sql_str(scope)}"
        f" AND state = {sql_str(State.WORKING.value)}"
    )
    return sorted(c.store.scan(where), key=lambda r: (r["created_at"], r["id"]))


def close_goal_with_new(
    c: Consolidator,
    goal: Memory,
    note: Memory,
    vector: np.ndarray,
    links: Sequence[Relationship],
) -> tuple[Memory, list[Relationship]]:
    """Write `note` (which `closes` the goal) as the parent of the goal's sources, in the
    same commit that consolidates them. Without sources, just write the note."""
    c.repair()
    with c.store.write_lock():
        sources = goal_sources(c, goal.id, note.scope)
        if not sources:
            c.store.add([note], vector[None, :], links)
            return note, list(links)
        own = note.importance
        note.importance = max(f32(own), c.boosted([s["importance"] for s in sources]))
        ids = [s["id"] for s in sources]
        rows, before = c.flip_members(sources, note.updated_at)
        edges = c.member_edges(note, ids, f"Achieved goal {goal.id}, closed by this memory")
        description = f"goal {goal.title!r} closed: {len(ids)} findings under the closing note"
        record = c.new_record(
            "goal", note, False, before, ids, note.updated_at, edges, description,
            goal_id=goal.id,
        )  # fmt: skip
        record.parent_prev_importance = f32(own)  # restored on unconsolidate; kept
        c.log.add(record)
        consolidation._checkpoint("record")
        c.store.add_relationships([*links, *edges])
        consolidation._checkpoint("edges")
        c.store.merge_rows([memory_to_row(note, vector), *rows])
        consolidation._checkpoint("memories")
        c.log.set_status(DONE, record.id)
    return note, [*links, *edges]


def close_goal(c: Consolidator, goal: Memory, scope: str, now: datetime) -> Consolidation:
    """Consolidate a goal's sources under the newest memory that `closes` it (promoted),
    or under a synthesised parent summarising them."""
    c.repair()
    closers = [
        r.source_id
        for r in c.store.relationships_of([goal.id])
        if r.relationship_type is RelationshipType.CLOSES and r.target_id == goal.id
    ]
    closer_rows = c.store.scan(f"{sql_in('id', closers)} AND scope = {sql_str(scope)}")
    closer_rows.sort(key=lambda r: (r["created_at"], r["id"]), reverse=True)
    closer = closer_rows[0] if closer_rows else None
    with c.store.write_lock():
        sources = goal_sources(c, goal.id, scope, exclude=closer["id"] if closer else "")
        if not sources:
            raise InvalidInput(
                "goal_id", f"no working memory of this scope achieves goal {goal.id}"
            )
        members = [row_to_memory(s) for s in sources]
        ids = [m.id for m in members]
        boosted = c.boosted([s["importance"] for s in sources])
        rows, before = c.flip_members(sources, now)
        if closer is not None:
            parent_row = dict(closer)
            parent_row["importance"] = max(closer["importance"], boosted)
            parent_row["updated_at"] = now
            parent = row_to_memory(parent_row)
            parent_prev = (closer["importance"], closer["updated_at"])
            extra: list[Relationship] = []
        else:
            parent = Memory(
                title=f"Goal reached: {goal.title}"[:200],
                content=summarise([m.content for m in members]),
                memory_type=MemoryType.INSIGHT,
                scope=scope,
                role=goal.role,
                tags=list(dict.fromkeys(t for m in members for t in m.tags))[:MAX_TAGS],
                importance=boosted,
                # A summary is only as trustworthy as its least trusted source.
                source=min((m.source for m in members), key=lambda s: s.trust),
                created_at=now,
                updated_at=now,
                last_accessed=now,
            )
            vector = c.embedder.embed_documents([parent.searchable_text()])[0]
            parent_row = memory_to_row(parent, vector)
            parent_prev = None
            extra = [
                Relationship(
                    parent.id, goal.id, RelationshipType.CLOSES, 1.0, "Goal reached", scope
                )
            ]
        edges = [*extra, *c.member_edges(parent, ids, f"Achieved goal {goal.id}")]
        description = f"goal {goal.title!r} closed: {len(ids)} findings consolidated"
        record = c.new_record(
            "goal", parent, closer is None, before, ids, now, edges, description,
            parent_prev=parent_prev, goal_id=goal.id,
        )  # fmt: skip
        c.commit([record], [parent_row, *rows], edges)
    return Consolidation("goal", parent, members, closer is None, description, record.id)
