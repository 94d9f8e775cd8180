"""The relationships table's side of the store: which edges it holds, every edge (whole or in
batches), those damaged, the edges of a type or touching some memories, and edges added and
deleted."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from octobrain.models import Relationship, RelationshipType
from octobrain.store import row_sums, schema, stamps
from octobrain.store.link_rules import between, check_link, check_not_self
from octobrain.store.scans import held, scan_arrow, scan_batches
from octobrain.store.sql import sql_in, sql_str
from octobrain.store.writes import append, ends_kept

if TYPE_CHECKING:
    import lancedb

    from octobrain.store.memories import MemoryStore


_LINK = ("source_id", "target_id", "relationship_type")


def held_relationships(store: MemoryStore, ids: Sequence[str]) -> set[str]:
    """Which of the edge ids `ids` the store holds (whatever their ends)."""
    return held(store.relationships, ids)


def relationships_version(store: MemoryStore) -> int:
    """The latest committed version of `relationships`."""
    return int(store.relationships.version)


def all_relationships(store: MemoryStore) -> list[Relationship]:
    """Every edge in the store."""
    return [r for batch in store.relationship_batches(4096) for r in batch]


def relationship_batches(store: MemoryStore, batch_rows: int) -> Iterator[list[Relationship]]:
    """Every edge in the store, at most `batch_rows` at a time, read as they are consumed
    (at the version the first batch reads)."""
    columns = store.relationships.schema.names
    for batch in scan_batches(store.relationships, "true", columns, batch_rows):
        yield [schema.row_to_relationship(r) for r in batch.to_pylist()]


def damaged_links(store: MemoryStore) -> list[str]:
    """The ids of the edges that no longer match their checksum: every row checked, what
    its checksum covers read a batch at a time (`row_sums`)."""
    columns = [*schema.EDGE_CHECKED, schema.CHECKSUM]
    batches = scan_batches(store.relationships, "true", columns, 1 << 16)
    return row_sums.damaged_ids(batches, row_sums.edges_damaged)


def sources_to(store: MemoryStore, target_id: str, relationship_type: str) -> list[str]:
    """The source ids of the edges of one type that point at `target_id` (one narrow read:
    a goal may have tens of thousands of findings)."""
    where = f"target_id = {sql_str(target_id)} AND relationship_type = {sql_str(relationship_type)}"
    rows = scan_arrow(store.relationships, where, ["source_id"], None)
    return list(dict.fromkeys(rows["source_id"].to_pylist()))


def sources_of(store: MemoryStore, relationship_type: str) -> set[str]:
    """The source ids of every edge of one type (read by the type alone: a caller asking
    which of 200,000 ids is one names none of them in the query)."""
    where = f"relationship_type = {sql_str(relationship_type)}"
    return set(scan_arrow(store.relationships, where, ["source_id"], None)["source_id"].to_pylist())


def relationships_of(store: MemoryStore, ids: Sequence[str]) -> list[Relationship]:
    """Every edge touching any of `ids`, in either direction."""
    if not ids:
        return []
    where = f"{sql_in('source_id', ids)} OR {sql_in('target_id', ids)}"
    rows = store.relationships.search().where(where).limit(None).to_list()
    return [schema.row_to_relationship(r) for r in rows]


def add_relationships(
    store: MemoryStore, rels: Sequence[Relationship], *, ends_held: bool = False
) -> None:
    """Append edges (one commit); with `ends_held`, only while both ends of each are held
    (`NotFound` otherwise). Consolidations write a parent's edges before its row. A link from
    a memory to itself is refused (`check_not_self`)."""
    check_not_self(rels, "target_id")
    if rels:
        with store.write_lock():
            if ends_held:
                store.require_ends(rels, set())
            store.check_commit()
            append(store, store.relationships, [schema.relationship_to_row(r) for r in rels])
            if ends_held:
                ends_kept(store, rels, set())


def links_held(store: MemoryStore, rels: Sequence[Relationship]) -> set[tuple[str, str, str]]:
    """The links (source id, target id, type) of `rels` the store already holds, under any
    edge id (their sources read 256 at a time)."""
    wanted = {(r.source_id, r.target_id, r.relationship_type.value) for r in rels}
    sources = sorted({r.source_id for r in rels})
    held_links: set[tuple[str, str, str]] = set()
    for i in range(0, len(sources), 256):
        where = sql_in("source_id", sources[i : i + 256])
        rows = scan_arrow(store.relationships, where, _LINK, None).to_pylist()
        held_links.update(k for k in (tuple(r[c] for c in _LINK) for r in rows) if k in wanted)
    return held_links


def link_once(
    store: MemoryStore, rel: Relationship, field: str = "target_id"
) -> tuple[Relationship, list[Relationship]]:
    """Add the edge `rel` while both its ends are held (`NotFound` otherwise), unless the
    store already links them with its type: then that edge (the first made) is the answer and
    nothing is written. Looked for under the write lock, so a link made again (a retry after
    an unknown outcome) or by two processes at once is one edge, as in one `memorize`. A link
    that contradicts those between the two memories is refused (`check_link`, naming
    `field`); a `supersedes` link replaces the `conflicts` edges between them (either way),
    deleted once it is written. Returns the edge and the `conflicts` edges it replaced (a
    dispute it settled: the caller says so). A link from a memory to itself is refused."""
    check_not_self([rel], field)
    same = (
        f"source_id = {sql_str(rel.source_id)} AND target_id = {sql_str(rel.target_id)} "
        f"AND relationship_type = {sql_str(rel.relationship_type.value)}"
    )
    with store.write_lock():
        store.require_ends([rel], set())
        store.check_commit()  # (a damaged table named before the look reads it)
        columns = store.relationships.schema.names
        there = scan_arrow(store.relationships, same, columns, None).to_pylist()
        if there:
            first = min(map(schema.row_to_relationship, there), key=lambda r: (r.created_at, r.id))
            return first, []
        check_link(store, rel, field)
        _stamp(store, "links", rel.source_id, rel.target_id, [rel.relationship_type.value])
        append(store, store.relationships, [schema.relationship_to_row(rel)])
        ends_kept(store, [rel], set())
        disputes = []
        if rel.relationship_type is RelationshipType.SUPERSEDES:
            disputes = [
                e
                for e in between(store, rel.source_id, rel.target_id)
                if e.relationship_type is RelationshipType.CONFLICTS
            ]
            if disputes:  # (after the supersession is written: a crash between keeps both)
                ids = [e.id for e in disputes]
                delete_found(store, sql_in("id", ids), ids)
    return rel, disputes


def unlink(
    store: MemoryStore, source_id: str, target_id: str, kinds: Sequence[str], scope: str
) -> list[Relationship]:
    """Delete the edges from `source_id` to `target_id` of the types `kinds` kept in `scope`
    (one commit, under the write lock); the edges deleted, none when there were none."""
    where = (
        f"source_id = {sql_str(source_id)} AND target_id = {sql_str(target_id)} "
        f"AND scope = {sql_str(scope)} AND {sql_in('relationship_type', kinds)}"
    )
    with store.write_lock():
        rows = scan_arrow(store.relationships, where, store.relationships.schema.names, None)
        if rows.num_rows:
            store.check_commit()
            _stamp(store, "unlinks", source_id, target_id, rows.column("relationship_type"))
            delete_found(store, where, rows.column("id").to_pylist())
    return sorted(map(schema.row_to_relationship, rows.to_pylist()), key=lambda r: r.created_at)


def _stamp(store: MemoryStore, what: str, source: str, target: str, kinds: Any) -> None:
    """A memories version for a link made or removed alone (`stamps.stamp_links`), so
    `history` lists it and `restore` can go back to either side of it."""
    types = ", ".join(sorted(set(map(str, kinds))))
    stamps.stamp_links(store.memories, f"{what} {source[:8]} → {target[:8]} ({types})")
    store.wrote(store.memories)


def delete_relationships(store: MemoryStore, where: str) -> None:
    """Delete the edges matching a predicate (one commit)."""
    with store.write_lock():
        found = store.relationships.search().where(where).select(["id"]).limit(None)
        delete_found(store, where, found.to_arrow().column("id").to_pylist())


def delete_found(
    store: MemoryStore, where: str, ids: list[str], table: lancedb.table.Table | None = None
) -> None:
    """Delete the edges matching `where`, whose ids (read under the held write lock) are
    `ids`: noted as changed for the mirrors, then one commit. `table`: the edge table as
    opened by a repair that checks no model (`store.relationships` when None)."""
    edges = store.relationships if table is None else table
    store.check_lease()
    store.note_changes(edges=ids)
    edges.delete(where)
    store.wrote(edges)
