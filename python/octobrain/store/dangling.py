"""Edges whose end is no memory: what a `forget` killed between its two commits leaves.

`MemoryStore.delete` commits the memories first and their edges second (restore maps the edge
table by the time of the next memories commit, so the order cannot be swapped). Readers never
show such an edge, and export leaves it out, but it stays in the table for good unless something
removes it: `doctor` names them, and the store's maintenance pass deletes them.

A consolidation left half-way by a killed process also holds edges to a parent that is not (or
no longer) a row; its record names them, and the next consolidation's repair removes or keeps
them, so they are not counted here.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from octobrain.store.edges import delete_found
from octobrain.store.schema import CONSOLIDATIONS, MEMORIES, RELATIONSHIPS, UNFINISHED
from octobrain.store.sql import DELETE_BATCH, sql_in

if TYPE_CHECKING:
    import lancedb

    from octobrain.store.memories import MemoryStore


def sweepable(
    memories: lancedb.table.Table,
    relationships: lancedb.table.Table,
    log: lancedb.table.Table | None,
) -> tuple[list[str], set[str]]:
    """The dangling edges (`dangling_edges`) split in two: those a sweep may delete, and those
    made after the memories table's newest version (`after_newest`), kept."""
    found = dangling_edges(memories, relationships, log)
    later = after_newest(memories, relationships, found)
    return [edge for edge in found if edge not in later], later


def dangling_edges(
    memories: lancedb.table.Table,
    relationships: lancedb.table.Table,
    log: lancedb.table.Table | None,
) -> list[str]:
    """The ids of the edges with an end that is no row of `memories`, but for those of a
    consolidation `log` records as unfinished. Read without the write lock, a writer may commit
    in between (a `forget` between its two commits, a `memorize` whose row lands after the ids
    were read), so an edge counts only when a second read, after the first found it, finds it
    too.
    """
    first = _scan(memories, relationships, log)
    if not first:
        return []
    again = set(_scan(memories, relationships, log))
    return [edge for edge in first if edge in again]


def _scan(
    memories: lancedb.table.Table,
    relationships: lancedb.table.Table,
    log: lancedb.table.Table | None,
) -> list[str]:
    """One read of `dangling_edges`: the memory ids, whole, and three narrow columns of the
    edges."""
    import pyarrow.compute as pc

    held = memories.search().select(["id"]).limit(None).to_arrow().column("id")
    edges = relationships.search().select(["id", "source_id", "target_id"]).limit(None).to_arrow()
    if edges.num_rows == 0:
        return []
    both = pc.and_(
        pc.is_in(edges.column("source_id"), value_set=held),
        pc.is_in(edges.column("target_id"), value_set=held),
    )
    found = edges.filter(pc.invert(both))
    if found.num_rows == 0:
        return []
    spared: set[str] = set()
    if log is not None:
        unfinished = log.search().where(UNFINISHED).select(["parent_id", "edge_ids"])
        for record in unfinished.limit(None).to_list():
            spared.add(record["parent_id"])
            spared.update(record["edge_ids"])
    return [
        row["id"]
        for row in found.to_pylist()
        if not {row["id"], row["source_id"], row["target_id"]} & spared
    ]


def after_newest(
    memories: lancedb.table.Table, relationships: lancedb.table.Table, edges: list[str]
) -> set[str]:
    """Those of `edges` made after the memories table's newest version. An edge is made before
    the commits that write it, so a `forget` (whose commit comes after every edge it leaves)
    never leaves one; memories that lost their newest versions (manifest files deleted) do,
    and those edges are the evidence of what was lost: named apart, never deleted."""
    if not edges:
        return set()
    # LanceDB gives version times as naive local times; edges carry UTC. An edge dated after
    # now came with its time from elsewhere (an import from a clock running ahead): no sign.
    newest = max(v["timestamp"] for v in memories.list_versions()).astimezone()
    now = datetime.now(UTC) + timedelta(minutes=1)
    later: set[str] = set()
    for at in range(0, len(edges), 4096):
        rows = (
            relationships.search()
            .where(sql_in("id", edges[at : at + 4096]))
            .select(["id", "created_at"])
            .limit(None)
            .to_list()
        )
        later.update(row["id"] for row in rows if newest < row["created_at"] <= now)
    return later


def drop_dangling_edges(store: MemoryStore) -> int:
    """Delete the edges with an end that is no memory (`sweepable`: not those made
    after the newest memories version, which show what lost versions held), under the
    write lock, `DELETE_BATCH` a commit. Returns how many. Edges only: the model is
    neither checked nor used."""
    with store.write_lock(check_model=False):
        db = store.open_db()
        log = db.open_table(CONSOLIDATIONS) if store.made(CONSOLIDATIONS) else None
        edges = db.open_table(RELATIONSHIPS)
        ids, _ = sweepable(db.open_table(MEMORIES), edges, log)
        for at in range(0, len(ids), DELETE_BATCH):
            batch = ids[at : at + DELETE_BATCH]
            delete_found(store, sql_in("id", batch), batch, edges)
    return len(ids)
