"""Edges from a memory to itself: what two `memory ingest`s of one export at once left before
94760ef (each session's first turn linked to itself as the turn said before it).

No writer makes one now (`link_rules.check_not_self`, on every edge the store appends), but a
store written before holds them for good: `graph` showed `A --same_session--> A`, and `relate`
and `unrelate` refuse a pair of one memory, so nothing removed them. `doctor` names them,
`doctor --drop-self-links` and the store's maintenance pass (`upkeep`) delete them (those edges
only; the memories stay).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from octobrain.store.doctor_report import Problem
from octobrain.store.edges import delete_found
from octobrain.store.scans import scan_arrow
from octobrain.store.schema import RELATIONSHIPS
from octobrain.store.sql import DELETE_BATCH, sql_in

if TYPE_CHECKING:
    from collections.abc import Sequence

    import lancedb

    from octobrain.store.doctor_report import TableCheck
    from octobrain.store.memories import MemoryStore

NAMED = 5  # memories a problem names (then a count)
WHERE = "source_id = target_id"
OPTION = "--drop-self-links"
REPAIR = (
    f"`octobrain doctor {OPTION}` deletes those edges (no other edge; the memories stay); "
    "no write makes one any more"
)


@dataclass(frozen=True)
class SelfLinks:
    """The ids of the edges from a memory to itself, and of those memories (sorted, once)."""

    edges: list[str] = field(default_factory=list)
    memories: list[str] = field(default_factory=list)

    def describe(self) -> str:
        """The problem `doctor` states: how many, from which memories."""
        n = len(self.memories)
        more = f" (and {n - NAMED:,} more)" if n > NAMED else ""
        return (
            f"{len(self.edges):,} edge(s) link a memory to itself, of {n:,} "
            f"memor{'y' if n == 1 else 'ies'} ({', '.join(self.memories[:NAMED])}{more}): an "
            "earlier octobrain made them (two `memory ingest`s of one export at once); `graph` "
            "shows each, and `unrelate` cannot remove one"
        )


def find(relationships: lancedb.table.Table) -> SelfLinks:
    """The edges of `relationships` whose source is their target."""
    rows = scan_arrow(relationships, WHERE, ["id", "source_id"], None)
    memories = sorted(set(rows.column("source_id").to_pylist()))
    return SelfLinks(rows.column("id").to_pylist(), memories)


def doctor_check(
    db: lancedb.DBConnection, tables: Sequence[TableCheck], problems: list[Problem]
) -> SelfLinks:
    """`find`, for `doctor`, when the edges read whole: over a damaged table (named already)
    an edge's ends may be what changed on disk. The problem found is added to `problems`
    (after the dangling edges' check, which passes over a table any problem names)."""
    check = next((t for t in tables if t.name == RELATIONSHIPS), None)
    damaged = any(p.table == RELATIONSHIPS and p.damage for p in problems)
    if check is None or not check.opened or damaged:
        return SelfLinks()
    try:
        found = find(db.open_table(RELATIONSHIPS))
    except (ValueError, RuntimeError, OSError):  # (a read the table's checks found failing)
        return SelfLinks()
    if found.edges:
        problems.append(Problem(RELATIONSHIPS, found.describe(), REPAIR, damage=False))
    return found


def drop_self_links(store: MemoryStore) -> int:
    """Delete the edges from a memory to itself, found again under the write lock,
    `DELETE_BATCH` a commit. Returns how many. Edges only: the model is neither checked nor
    used."""
    with store.write_lock(check_model=False):
        edges = store.open_db().open_table(RELATIONSHIPS)
        ids = find(edges).edges
        for at in range(0, len(ids), DELETE_BATCH):
            batch = ids[at : at + DELETE_BATCH]
            delete_found(store, f"{sql_in('id', batch)} AND {WHERE}", batch, edges)
    return len(ids)
