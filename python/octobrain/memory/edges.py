"""`EdgeMirror`: the mirror's copy of `relationships`, one Arrow table caught up in O(changes).

Edges are only ever added or deleted. Added ones are the rows in fragments above the highest
fragment the mirror holds (`octobrain.memory.catchup`); deleted ones are those the store's
change record names (by edge id, or by a forgotten memory they touch), checked against the
table. The result must hold as many edges as the table does at that version, or the whole
table is read. A snapshot keeps the table, so opening one reads no edge from the store.

Finding the edges of a search's candidates scans both id columns: O(edges) per search, and a
conversation store has an edge per turn. A table read that way `SCANS_BEFORE_INDEX` times is
indexed (`kernels.idindex`, ids hashed and sorted: about three scans' work), and is then
answered in O(ids asked); a table that changes between searches is never worth indexing.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from octobrain.kernels.idindex import IdIndex, rows_holding
from octobrain.memory.catchup import ADDR, above, fragment_mark
from octobrain.memory.corpus_io import int64s
from octobrain.models import Relationship
from octobrain.store import MemoryStore, row_sums
from octobrain.store.pinned import Pinned
from octobrain.store.schema import relationships_schema, row_to_relationship

COLUMNS = [*relationships_schema().names, ADDR]
ENDS = ["source_id", "target_id"]
# Building the index costs about as much as three scans of the table (measured: 12–20 ms
# against 6 ms at 100k edges, 118–141 ms against 42–57 ms at 1M), so a table is indexed at
# its third scan: never more than about twice the work of the best choice made in hindsight.
SCANS_BEFORE_INDEX = 3
INDEX_FROM_ROWS = 20_000  # below this a scan takes about a millisecond


class EdgeMirror:
    """Every edge of the store at `version`, with its row address."""

    def __init__(self, table: pa.Table | None = None, version: int = -1, mark: int = -1) -> None:
        self.table, self.version, self.mark = table, version, mark
        self.last_catch_up = ""  # as `Corpus.last_catch_up`
        # The last lookup (`_touching`): the table it read, the ids asked, the rows found.
        self._near: tuple[pa.Table, frozenset[str], pa.Table] | None = None
        self._scans = 0  # full scans of `table` so far
        self._index: IdIndex | None = None  # of `table`, once it was scanned often enough

    def refresh(self, store: MemoryStore, version: int) -> None:
        """Catch up with `version` of `relationships` (a no-op when unchanged)."""
        if version == self.version:
            return
        pinned = store.pinned_relationships(version)
        table = None
        if self.table is not None and 0 <= self.version < version:
            table = self._cheap(store, pinned)
        self.last_catch_up = "changes" if table is not None else "every row"
        if table is None:
            table = pinned.scan_arrow("true", columns=COLUMNS)
            self.mark = fragment_mark(int64s(table.column(ADDR)))
        self.table, self.version = table, version
        self._near = None  # (its rows are of the table before)
        self._scans, self._index = 0, None

    def _cheap(self, store: MemoryStore, pinned: Pinned) -> pa.Table | None:
        assert self.table is not None
        removed = store.changes_since("relationships", self.version)
        if removed.everything:
            return None
        held = self.table
        maybe = None
        asked: list[str] = []
        if removed.ids or removed.edges:
            nodes = pa.array(sorted(removed.ids), pa.string())
            maybe = pc.or_(
                pc.is_in(held.column("id"), value_set=pa.array(sorted(removed.edges), pa.string())),
                pc.or_(
                    pc.is_in(held.column("source_id"), value_set=nodes),
                    pc.is_in(held.column("target_id"), value_set=nodes),
                ),
            )
            asked = held.column("id").filter(maybe).to_pylist()
        sample = [0, len(held) - 1] if len(held) else []
        sampled = {int(held.column(ADDR)[i].as_py()): held.column("id")[i].as_py() for i in sample}
        addrs, count, left, placed = pinned.changes(
            above(self.mark), ids=asked, addrs=list(sampled)
        )
        new = pinned.take(addrs, COLUMNS) if addrs else held.slice(0, 0)
        if len(new) != len(addrs):
            return None
        drop = pc.is_in(held.column("id"), value_set=new.column("id").combine_chunks())
        if maybe is not None and asked:  # noted before its commit: edges still there stay
            still = pa.array(sorted(left), pa.string())
            gone = pc.and_(maybe, pc.invert(pc.is_in(held.column("id"), value_set=still)))
            drop = pc.or_(drop, gone)
        kept = held.filter(pc.invert(drop))
        stay = set(kept.column("id").to_pylist()) if sampled else set()
        if any(placed.get(a) != e for a, e in sampled.items() if e in stay):
            return None  # not where the mirror holds it: a re-created table
        table = pa.concat_tables([kept, new.cast(kept.schema)]) if len(new) else kept
        if len(table) != count:
            return None
        self.mark = fragment_mark(int64s(new.column(ADDR)), self.mark)
        return table

    def touching(self, ids: Sequence[str]) -> list[Relationship]:
        """Edges touching any of `ids` (each once), in the order of `ids`."""
        seen: dict[str, Relationship] = {}
        for rels in self.by_node(ids).values():
            for rel in rels:
                seen.setdefault(rel.id, rel)
        return list(seen.values())

    def into(
        self, ids: Sequence[str], kinds: Sequence[str]
    ) -> tuple[list[str], list[str], list[str]]:
        """The edges of the relationship types `kinds` that point at any of `ids` (their
        target), as three columns: source ids, target ids, types. The search asks this of its
        candidates, whose other edges (a session's chain, above all) it has no use for; a
        memory thousands of others supersede makes thousands of edges, so no `Relationship`
        is built for them."""
        return self._of_kinds(ids, kinds, "target_id")

    def by_node(
        self, ids: Sequence[str], per_kind: int | None = None
    ) -> dict[str, list[Relationship]]:
        """The edges touching each of `ids`, in the order of `ids` (an id no edge touches is
        left out; an edge between two of them is under both). One pass over the table,
        however many ids: a caller walking its results asks once, not once per result.
        `per_kind`: at most that many edges of each type per id, the oldest (a memory linked
        from thousands gave thousands of `Relationship`s to a search that shows three)."""
        order = list(dict.fromkeys(ids))
        rows = self._touching(order)
        if per_kind is not None:
            rows = _first_per_kind(rows, order, per_kind)
        by_node: dict[str, list[Relationship]] = {}
        for row in rows.to_pylist():
            rel = row_to_relationship(row)
            by_node.setdefault(rel.source_id, []).append(rel)
            if rel.target_id != rel.source_id:
                by_node.setdefault(rel.target_id, []).append(rel)
        return {mid: by_node[mid] for mid in order if mid in by_node}

    def of_kinds(self, kinds: Sequence[str]) -> tuple[list[str], list[str], list[str]]:
        """Sources, targets and types of every edge of the types `kinds`, read as columns. A
        briefing asks this once for all the memories it ranks: a filter on the type column
        alone, however many memories that is (naming 100,000 working ones cost it 80 ms)."""
        table = self.table
        if table is None or not len(table) or not kinds:
            return [], [], []
        wanted = pa.array(list(kinds), pa.string())
        found = table.filter(pc.is_in(table.column("relationship_type"), value_set=wanted))
        return _columns(found)

    def damaged(self) -> list[str]:
        """The ids of the edges that no longer match their checksum (`store.edges.
        damaged_links`, of the edges held here)."""
        table = self.table
        if table is None:
            return []
        return row_sums.damaged_ids(table.to_batches(), row_sums.edges_damaged)

    def _of_kinds(
        self, ids: Sequence[str], kinds: Sequence[str], end: str
    ) -> tuple[list[str], list[str], list[str]]:
        """Sources, targets and types of the edges of types `kinds` whose `end` is one of
        `ids`, filtered as columns (`into`)."""
        if not kinds or not ids:
            return [], [], []
        wanted = list(dict.fromkeys(ids))
        rows = self._touching(wanted)
        found = rows.filter(
            pc.and_(
                pc.is_in(rows.column("relationship_type"), value_set=pa.array(kinds, pa.string())),
                pc.is_in(rows.column(end), value_set=pa.array(wanted, pa.string())),
            )
        )
        return _columns(found)

    def _touching(self, ids: list[str]) -> pa.Table:
        """The rows (without their address) of the edges touching any of `ids`.

        Each lookup scans the table, so the last one's rows are kept: a search asks for the
        edges of its candidates, then of its results among them, and the second is answered
        from the first's rows. A lookup of other ids, or of a newer table, scans again."""
        table = self.table
        if table is None or not len(table) or not ids:
            return relationships_schema().empty_table()
        near = self._near
        if near is not None and near[0] is table and near[1].issuperset(ids):
            return rows_holding(near[2], ENDS, ids)  # (the last lookup's rows hold them all)
        if self._index is None and len(table) >= INDEX_FROM_ROWS:
            self._scans += 1
            if self._scans >= SCANS_BEFORE_INDEX:
                self._index = IdIndex(table, ENDS)
        index = self._index
        rows = index.touching(ids) if index is not None else rows_holding(table, ENDS, ids)
        rows = rows.drop_columns([ADDR])
        self._near = (table, frozenset(ids), rows)
        return rows


def _columns(edges: pa.Table) -> tuple[list[str], list[str], list[str]]:
    return (
        edges.column("source_id").to_pylist(),
        edges.column("target_id").to_pylist(),
        edges.column("relationship_type").to_pylist(),
    )


def _first_per_kind(rows: pa.Table, ids: list[str], per_kind: int) -> pa.Table:
    """The rows of `rows` (in their order) that are among the first `per_kind` of their type
    at one of their ends that is in `ids`."""
    if len(rows) <= per_kind:
        return rows
    kinds = pc.dictionary_encode(rows.column("relationship_type")).combine_chunks()
    kind = kinds.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    keep = np.zeros(len(rows), dtype=bool)
    asked = pa.array(ids, pa.string())
    for end in ENDS:
        found = pc.index_in(rows.column(end), value_set=asked)
        mine = pc.is_valid(found).to_numpy(zero_copy_only=False)
        node = pc.fill_null(found, 0).to_numpy(zero_copy_only=False).astype(np.int64)
        at = np.flatnonzero(mine)
        key = node[mine] * len(kinds.dictionary) + kind[mine]
        order = np.argsort(key, kind="stable")
        sorted_key = key[order]
        starts = np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1]])
        rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
        keep[at[order[rank < per_kind]]] = True
    return rows.filter(pa.array(keep))
