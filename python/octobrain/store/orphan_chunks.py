"""Knowledge chunks no source row names: what an index killed between its commits leaves.

`KnowledgeStore.replace_source` commits a source's new chunks first and its source row second
(the flip that makes them visible; the other order would show a source with nothing in it, or
hide its old chunks before the new ones exist). A process killed in between, or an MCP client
gone while its search indexed a big file, leaves chunks of a generation no source row names:
searches never show them, yet they stay in the table (thousands of rows for a big file) until
that source is indexed again. `doctor` names them, `doctor --drop-orphan-chunks` and every
knowledge write (an index, a note stored) delete them.

A chunk that no longer matches its checksum is not taken for one: its source id or generation
may be what changed on disk, and it is damage `doctor` names, repaired by indexing its source
again, never deleted unseen. Nor is a chunk of a source row whose own id changed on disk (a row
naming the chunk's uri, scope and session under another id): that row is the damage.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from octobrain.store.schema import (
    CHECKSUM,
    CHUNK_CHECKED,
    CHUNKS,
    SOURCE_NAMING,
    SOURCES,
    chunk_verified,
)
from octobrain.store.sql import DELETE_BATCH, sql_in

if TYPE_CHECKING:
    from collections.abc import Sequence

    import lancedb

    from octobrain.store.doctor_report import TableCheck

_NAMED = 5  # sources a problem names (then a count)
_CHECK_BATCH = 256  # orphan rows (each with its parent text) checked at a time


@dataclass
class Orphans:
    """Chunk ids by the source id they carry, and that source's uri as the chunks give it."""

    chunks: dict[str, list[str]] = field(default_factory=dict)
    uris: dict[str, str] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return sum(map(len, self.chunks.values()))

    def ids(self) -> list[str]:
        return [chunk for chunks in self.chunks.values() for chunk in chunks]

    def describe(self) -> str:
        """The problem `doctor` states: how many, of which sources."""
        named = [f"{sid} ({self.uris[sid]})" for sid in sorted(self.chunks)[:_NAMED]]
        more = len(self.chunks) - len(named)
        rest = f" (and {more:,} more sources)" if more else ""
        sources = f"{len(self.chunks):,} source{'' if len(self.chunks) == 1 else 's'}"
        return (
            f"{self.count:,} chunk(s) of {sources} that no source row names at their "
            f"generation ({', '.join(named)}{rest}): an index killed between its two commits "
            "left them; searches never show them"
        )


REPAIR = (
    "`octobrain doctor --drop-orphan-chunks` deletes them now; so does the next knowledge "
    "write (a source indexed, a note stored)"
)


def may_hold_orphans(sources: lancedb.table.Table, chunks: lancedb.table.Table) -> bool:
    """Whether `chunks` holds more rows than the source rows count as theirs: without orphans
    the two agree (a write ends with its old generation deleted), so a write pays one narrow
    read of the sources for this, not `find_orphans`'s read of every chunk (14 ms at 17,868)."""
    import pyarrow.compute as pc

    counts = sources.search().select(["chunk_count"]).limit(None).to_arrow()
    return int(chunks.count_rows()) != int(pc.sum(counts.column("chunk_count")).as_py() or 0)


def find_orphans(sources: lancedb.table.Table, chunks: lancedb.table.Table) -> Orphans:
    """The chunks of `chunks` whose (source id, generation) no row of `sources` holds, but for
    those that no longer match their checksum. Three narrow columns of every chunk are read;
    the orphans alone are read whole, to check them. Under the knowledge write lock this is
    exact; without it a writer may be between its two commits (`settled_orphans`)."""
    import pyarrow.compute as pc

    held = sources.search().select(["id", "generation", *SOURCE_NAMING]).limit(None).to_arrow()
    rows = chunks.search().select(["id", "source_id", "generation"]).limit(None).to_arrow()
    found = Orphans()
    if rows.num_rows == 0:
        return found
    current = pc.binary_join_element_wise(held.column("id"), held.column("generation"), "/")
    keys = pc.binary_join_element_wise(rows.column("source_id"), rows.column("generation"), "/")
    candidates = rows.filter(pc.invert(pc.is_in(keys, value_set=current)))
    ids = candidates.column("id").to_pylist()
    checked = CHECKSUM in chunks.schema.names
    columns = [*CHUNK_CHECKED, CHECKSUM] if checked else ["id", "source_id", *SOURCE_NAMING]
    named = {tuple(row[k] for k in SOURCE_NAMING): row["id"] for row in held.to_pylist()}
    for at in range(0, len(ids), DELETE_BATCH):
        query = chunks.search().where(sql_in("id", ids[at : at + DELETE_BATCH])).select(columns)
        for batch in query.limit(None).to_batches(_CHECK_BATCH):
            for row in batch.to_pylist():
                if checked and chunk_verified(row) is False:
                    continue  # damage, named as such
                if (
                    named.get(tuple(row[k] for k in SOURCE_NAMING), row["source_id"])
                    != row["source_id"]
                ):
                    continue  # of a source row whose id changed: damage, named as such
                found.chunks.setdefault(row["source_id"], []).append(row["id"])
                found.uris.setdefault(row["source_id"], row["uri"])
    return found


def settled_orphans(sources: lancedb.table.Table, chunks: lancedb.table.Table) -> Orphans:
    """`find_orphans` read without the write lock: a chunk counts only when a second read,
    after the first found it, finds it too (an index between its commits flips its source
    row, or a re-index deletes its old generation, a moment later)."""
    first = find_orphans(sources, chunks)
    if not first.count:
        return first
    for table in (sources, chunks):
        table.checkout_latest()  # type: ignore[no-untyped-call]
    again = find_orphans(sources, chunks)
    seen = set(first.ids())
    kept = Orphans()
    for sid, ids in again.chunks.items():
        if still := [chunk for chunk in ids if chunk in seen]:
            kept.chunks[sid] = still
    kept.uris = {sid: uri for sid, uri in again.uris.items() if sid in kept.chunks}
    return kept


def doctor_check(db: lancedb.DBConnection, tables: Sequence[TableCheck]) -> Orphans:
    """`settled_orphans` for `doctor`, when both knowledge tables opened and every fragment of
    them read (else the check's own problems say why; nothing is counted)."""
    checked = {t.name: t for t in tables}
    for name in (SOURCES, CHUNKS):
        check = checked.get(name)
        if check is None or not check.opened or check.damaged_fragments or check.unread:
            return Orphans()
    try:
        return settled_orphans(db.open_table(SOURCES), db.open_table(CHUNKS))
    except (ValueError, RuntimeError, OSError):  # a read the table checks found failing
        return Orphans()
