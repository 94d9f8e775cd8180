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
from octobrain.memory.consolidation import DONE, Consolidation, Consolidator, f32, first_of
from octobrain.memory.summary import summarise
from octobrain.models import MAX_TAGS, Memory, MemoryType, Relationship, RelationshipType, State
from octobrain.store import NotFound
from octobrain.store.schema import memory_to_row, row_to_memory
from octobrain.store.sql import sql_in, sql_str, visible_scopes

__all__ = ["CLOSE_BATCH", "close_goal", "close_goal_with_new", "findings_left", "goal_sources"]


# Findings one close consolidates, the oldest first: a goal may have gathered tens of
# thousands (each by a bounded `memorize`), and one call that reads, rewrites and links all of
# them took 5–15 s and 1.9 GB at 30,000. The rest stay working; the next close takes the next.
CLOSE_BATCH = 256


def goal_sources(
    c: Consolidator, goal_id: str, scope: str, role: str, exclude: str = ""
) -> tuple[list[dict[str, Any]], int]:
    """The oldest `CLOSE_BATCH` working memories of `scope` and of `role` (exactly: one
    parent never gathers two roles' words) that `achieves` the goal (full rows), and how many
    there are in all."""
    ids = [i for i, _ in _findings(c, goal_id, scope, [role], exclude)]
    if not ids:
        return [], 0
    found = c.store.scan(f"{sql_in('id', ids[:CLOSE_BATCH])} AND {_working(scope, [role])}")
    return sorted(found, key=lambda r: (r["created_at"], r["id"])), len(ids)


def findings_left(
    c: Consolidator, goal_id: str, scope: str, roles: Sequence[str] | None = None
) -> int:
    """How many working memories of `scope` (and of `roles`, None for any) still `achieves`
    the goal."""
    return len(_findings(c, goal_id, scope, roles))


def _working(scope: str, roles: Sequence[str] | None) -> str:
    working = f"scope = {sql_str(scope)} AND state = {sql_str(State.WORKING.value)}"
    return working if roles is None else f"{working} AND {sql_in('role', roles)}"


def _findings(
    c: Consolidator, goal_id: str, scope: str, roles: Sequence[str] | None, exclude: str = ""
) -> list[tuple[str, str]]:
    """(id, role) of the working memories of `scope` (and `roles`) that `achieves` the goal,
    oldest first. The scope's working rows are read by narrow columns and matched to the
    findings here: an `IN` list of thousands of ids is the slower read (0.2 s per 4,096)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ids = [i for i in c.store.sources_to(goal_id, RelationshipType.ACHIEVES.value) if i != exclude]
    if not ids:
        return []
    rows = c.store.scan_arrow(_working(scope, roles), columns=["id", "created_at", "role"])
    rows = rows.filter(pc.is_in(rows["id"], value_set=pa.array(ids, pa.string())))
    columns = (rows[name].to_pylist() for name in ("created_at", "id", "role"))
    return [(i, role) for _, i, role in sorted(zip(*columns, strict=True))]


def close_goal_with_new(
    c: Consolidator,
    goal: Memory,
    note: Memory,
    vector: np.ndarray,
    links: Sequence[Relationship],
) -> tuple[Memory, list[Relationship]]:
    """Write `note` (which `closes` the goal) as the parent of the goal's sources of its role,
    in the same commit that consolidates them. Without sources, just write the note."""
    c.repair(visible_scopes(note.scope))
    with c.store.write_lock():
        links = c.store.require_ends(links, {note.id})  # the goal, or a target, forgotten since
        sources, found = goal_sources(c, goal.id, note.scope, note.role)
        if not sources:
            c.store.add([note], vector[None, :], links)
            return note, list(links)
        own = note.importance
        note.importance = max(f32(own), c.boosted([s["importance"] for s in sources]))
        ids = [s["id"] for s in sources]
        rows, before = c.flip_members(sources, note.updated_at)
        edges = c.member_edges(note, ids, f"Achieved goal {goal.id}, closed by this memory")
        description = f"goal {goal.title!r} closed: {len(ids)} findings under the closing note" + (
            f"; {found - len(ids)} more still working" if found > len(ids) else ""
        )
        record = c.new_record(
            "goal", note, False, before, ids, note.updated_at, edges, description,
            goal_id=goal.id,
        )  # fmt: skip
        record.parent_prev_importance = f32(own)  # restored on unconsolidate; kept
        c.log.add(record)
        consolidation._checkpoint("record")
        c.store.add_relationships([*links, *edges])
        consolidation._checkpoint("edges")
        c.store.merge_rows([memory_to_row(note, vector), *rows], read=sources)
        consolidation._checkpoint("memories")
        c.log.set_status(DONE, record.id)
    return note, [*links, *edges]


def close_goal(
    c: Consolidator,
    goal: Memory,
    scope: str,
    now: datetime,
    roles: Sequence[str] | None,
    prefer: str,
) -> Consolidation:
    """Consolidate a goal's sources of one role under the newest memory of that role that
    `closes` it (promoted), or under a synthesised parent of that role summarising them. The
    role: `prefer` when its findings are among those of `roles` (None: every role's), else
    the oldest finding's; another role's findings stay working for the next close, so no
    parent holds one role's words where another role reads them."""
    c.repair(visible_scopes(scope))
    with c.store.write_lock():
        # Read under the lock: the closing note is written back whole, so an update or a
        # forget of it since would otherwise be undone.
        if not c.store.held([goal.id]):
            raise NotFound("goal_id", f"goal {goal.id} was deleted while this call waited")
        found_roles = [role for _, role in _findings(c, goal.id, scope, roles)]
        if not found_roles:
            raise InvalidInput(
                "goal_id", f"no working memory of this scope achieves goal {goal.id}"
            )
        role = prefer if prefer in found_roles else found_roles[0]
        closers = c.store.sources_to(goal.id, RelationshipType.CLOSES.value)
        closer_rows = c.store.scan(
            f"{sql_in('id', closers)} AND scope = {sql_str(scope)} AND role = {sql_str(role)}"
        )
        closer_rows.sort(key=lambda r: (r["created_at"], r["id"]), reverse=True)
        closer = closer_rows[0] if closer_rows else None
        sources, found = goal_sources(
            c, goal.id, scope, role, exclude=closer["id"] if closer else ""
        )
        if not sources:  # (the closer was the role's only finding)
            raise InvalidInput(
                "goal_id", f"no working memory of this scope achieves goal {goal.id}"
            )
        members = [row_to_memory(s) for s in sources]
        ids = [m.id for m in members]
        # Another role's goal (linked by a reader of every role) keeps its words its own.
        title = f"Goal reached: {goal.title}"[:200] if goal.role in ("", role) else "Goal reached"
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
                title=title,
                content=summarise([m.content for m in members]),
                memory_type=MemoryType.INSIGHT,
                scope=scope,
                role=role,
                tags=first_of(m.tags for m in members)[:MAX_TAGS],
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
        description = f"goal {goal.title!r} closed: {len(ids)} findings consolidated" + (
            f"; {found - len(ids)} more still working (run it again for the next {CLOSE_BATCH})"
            if found > len(ids)
            else ""
        )
        others = sum(r != role for r in found_roles)
        description += f"; {others} of another role still working (closed apart)" if others else ""
        record = c.new_record(
            "goal", parent, closer is None, before, ids, now, edges, description,
            parent_prev=parent_prev, goal_id=goal.id,
        )  # fmt: skip
        c.commit(
            [record], [parent_row, *rows], edges, read=[*sources, *([closer] if closer else [])]
        )
    return Consolidation("goal", parent, members, closer is None, description, record.id)
