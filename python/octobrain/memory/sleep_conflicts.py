"""The sleep pass's conflicts: which of two statements that disagree on a number prevails
(`memory.conflicts`), weighed for the pass's recent rows against every working statement of
the scope, and recorded as `conflicts` edges; the sweep (`memory.sweep`) keeps where a pass's
budget stopped."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from octobrain.memory import conflicts, sweep
from octobrain.memory.conflicts import Conflict, Statement, StatementPool
from octobrain.memory.consolidation import Consolidation, Consolidator
from octobrain.models import Relationship, RelationshipType, Source, State
from octobrain.store.sql import sql_in


def of_pass(
    engine: Consolidator,
    scope: str,
    recent: list[dict[str, Any]],
    pool: StatementPool,
    merged: Sequence[Consolidation],
    threshold: float,
    window_start: datetime,
    before: sweep.Sweep,
    *,
    dry_run: bool,
) -> tuple[list[Conflict], list[tuple[str, str]], int]:
    """Record which of two conflicting statements prevails (module `conflicts`): this
    pass's recent rows (and those past the window no pass has reached) against every working
    statement of the scope, a member merged by this pass standing for its parent. Returns the
    conflicts recorded (found, when dry), the disagreements left open and how many of those
    rows the sweep (`memory.sweep`: where the last pass's budget stopped, `before`, kept
    between passes, never moved by a dry run) has yet to reach. Pairs already linked are left
    alone, so a pass repeated (or resumed after a crash) adds nothing twice."""
    keys = {at: sweep.key_of(r) for at, r in enumerate(recent) if conflicts.numbers(r["content"])}
    order = before.order(keys)
    pairs, unchecked = conflicts.conflicting_pairs(recent, pool, threshold, order=order)
    floor = sweep.floor_of(window_start)
    progress, waiting = before.after(keys, order, len(order) - unchecked, floor)
    found, disagreements = _settle(
        engine, scope, recent, pool, merged, pairs, window_start, dry_run
    )
    if progress != before and not dry_run:
        sweep.save(engine.store.location, scope, progress, before)  # after the conflicts
    return found, disagreements, waiting


def _settle(
    engine: Consolidator,
    scope: str,
    recent: list[dict[str, Any]],
    pool: StatementPool,
    merged: Sequence[Consolidation],
    pairs: list[tuple[str, str]],
    window_start: datetime,
    dry_run: bool,
) -> tuple[list[Conflict], list[tuple[str, str]]]:
    """The conflicts recorded (found, when dry) and the disagreements left of `pairs`."""
    if not pairs:
        return [], []
    statement_of: dict[str, Statement] = {}
    for c in merged:
        stated = Statement(c.parent.id, c.parent.source.trust, max(m.created_at for m in c.members))
        statement_of.update((m.id, stated) for m in c.members)
    stated_as = {pool.ids[k]: (pool.sources[k], pool.created[k]) for k in range(len(pool))}
    stated_as.update((r["id"], (r["source"], r["created_at"])) for r in recent)
    singles = sorted({i for pair in pairs for i in pair} - statement_of.keys())
    edges = engine.store.relationships_of(singles)
    # A parent of an earlier pass counts as stated when its newest member was.
    merged_from: dict[str, list[str]] = {}
    settled: set[frozenset[str]] = set()
    for e in edges:
        if e.relationship_type is RelationshipType.CONSOLIDATED_FROM:
            merged_from.setdefault(e.source_id, []).append(e.target_id)
        elif e.relationship_type in (RelationshipType.CONFLICTS, RelationshipType.SUPERSEDES):
            settled.add(frozenset((e.source_id, e.target_id)))
    children = [m for i in singles for m in merged_from.get(i, [])]
    stated_at = (
        {
            r["id"]: r["created_at"]
            for r in engine.store.scan(sql_in("id", children), columns=["id", "created_at"])
        }
        if children
        else {}
    )
    for i in singles:
        times = [stated_at[m] for m in merged_from.get(i, []) if m in stated_at]
        source, created = stated_as[i]
        statement_of[i] = Statement(i, Source(source).trust, max(times) if times else created)
    found, disagreements = conflicts.resolve(pairs, statement_of, settled, window_start)
    if found and not dry_run:
        found = _record_conflicts(engine, scope, found)
    return found, disagreements


def _record_conflicts(engine: Consolidator, scope: str, found: list[Conflict]) -> list[Conflict]:
    """Write a `conflicts` edge per conflict, under the write lock, but for those whose
    statement was forgotten or merged into a parent (by a pass running beside this one: the
    next pass weighs the parent), or that such a pass linked, since this pass read the store.
    Returns the conflicts written."""
    store = engine.store
    with store.write_lock():
        ends = sorted({i for c in found for i in (c.winner, c.loser)})
        states = store.values_of(ends, "state")
        held = {i for i, state in states.items() if state == State.WORKING.value}
        linked = {
            frozenset((e.source_id, e.target_id))
            for e in store.relationships_of(ends)
            if e.relationship_type in (RelationshipType.CONFLICTS, RelationshipType.SUPERSEDES)
        }
        found = [
            c
            for c in found
            if {c.winner, c.loser} <= held and frozenset((c.winner, c.loser)) not in linked
        ]
        if found:
            store.add_relationships(
                [
                    Relationship(
                        c.winner, c.loser, RelationshipType.CONFLICTS, 1.0, c.description, scope
                    )
                    for c in found
                ]
            )
    return found
