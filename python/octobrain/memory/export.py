"""Moving memories out: the JSONL export `transfer.import_jsonl` reads back.

One JSON object per line: a header, then every visible memory (embedding optional), then the
relationships among them, the consolidation journal, and an end line counting each kind.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any

import numpy as np

from octobrain.errors import json_printable
from octobrain.memory.brain import Brain
from octobrain.memory.render import memory_to_dict, relationship_to_dict
from octobrain.store import schema
from octobrain.store.addresses import ADDR
from octobrain.store.consolidations import ConsolidationLog, ConsolidationRecord
from octobrain.store.memories import MemoryStore
from octobrain.store.schema import CONSOLIDATIONS
from octobrain.store.sql import sql_in
from octobrain.times import iso_z

FORMAT = "octobrain-export"
# v2 ends with an `end` line counting each kind of line, so a file cut short anywhere (after
# its memories, in its edges or its journal) is told from a whole one; v1 files are still read,
# their memories checked against the header's count.
FORMAT_VERSION = 2
BATCH = 256

Progress = Callable[[int], None]


def no_progress(_: int) -> None:
    """What a caller that shows no progress passes."""
    return None


@dataclass(frozen=True)
class Exported:
    """What an export wrote: how many memories, and those written without their damaged
    (non-finite) stored vector, which an import embeds again."""

    count: int
    vectors_left_out: list[str]

    def warning(self) -> str:
        """The line that names the vectors left out ("" when none were)."""
        n = len(self.vectors_left_out)
        if not n:
            return ""
        shown, more = ", ".join(self.vectors_left_out[:5]), n - 5
        whose = "1 memory's stored vector is" if n == 1 else f"{n:,} memories' stored vectors are"
        return (
            f"warning: {whose} damaged (not finite numbers), written without it, for `memory "
            f"import` to embed again: {shown}{f' and {more:,} more' if more > 0 else ''}; "
            "`octobrain doctor` checks the store"
        )


def export_jsonl(
    brain: Brain, out: IO[str], *, embeddings: bool = False, progress: Progress = no_progress
) -> Exported:
    """Write every memory visible from the brain's scope (and their edges).

    The memories are those of one committed version, oldest first, read `BATCH` at a time by
    their row addresses: a store of any size is written without being held, and a writer
    committing meanwhile changes neither the rows nor their order."""
    import pyarrow.compute as pc

    store = brain.store
    names = schema.memories_schema("", 1).names
    columns = names if embeddings else [c for c in names if c != "embedding"]
    pinned = store.snapshot(store.version())
    keys = pinned.scan_arrow(
        brain.sight.where(include_archived=True), columns=["id", "created_at", ADDR]
    )
    order = pc.sort_indices(keys, sort_keys=[("created_at", "ascending"), ("id", "ascending")])
    addrs = keys.column(ADDR).take(order).to_pylist()
    ids = set(keys.column("id").to_pylist())
    del keys, order
    header = {
        "kind": "header",
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "embedding_model": brain.embedder.model_id,
        "dim": brain.embedder.dim,
        "scope": brain.scope,
        "count": len(addrs),
    }
    out.write(json_printable(header) + "\n")
    left_out: list[str] = []
    for start in range(0, len(addrs), BATCH):
        wanted = addrs[start : start + BATCH]
        by_addr = {r[ADDR]: r for r in pinned.take(wanted, [*columns, ADDR]).to_pylist()}
        for row in (by_addr[a] for a in wanted):
            line = json_printable({"kind": "memory", **memory_to_dict(schema.row_to_memory(row))})
            if embeddings and np.isfinite(np.asarray(row["embedding"], np.float32)).all():
                line = f'{line[:-1]}, "embedding": [{_floats(row["embedding"])}]}}'
            elif embeddings:  # `nan` is no JSON: the line would make the whole file unreadable
                left_out.append(row["id"])
            out.write(line + "\n")
        progress(len(wanted))
    # The edges between them: the whole edge table read a batch at a time (asking for the edges
    # of every exported id at once is one SQL string of all of them: 38 s to plan at 1M ids).
    # Only those of a scope the export holds: a project's link between two global memories
    # (one an import stored) is that project's, and an import refuses it in another's file.
    edges, scopes = 0, set(brain.sight.scopes)
    for rels in store.relationship_batches(BATCH * 16):
        for rel in rels:
            if rel.source_id in ids and rel.target_id in ids and rel.scope in scopes:
                line = json_printable({"kind": "relationship", **relationship_to_dict(rel)})
                out.write(line + "\n")
                edges += 1
    # The consolidation journal, so an imported store can still undo its consolidations.
    journal = _journal(store, sql_in("scope", brain.sight.scopes))
    if brain.role:  # (a role's export holds the consolidations of what it sees)
        journal = [r for r in journal if r.parent_id in ids]
    for record in journal:
        entry = {"kind": "consolidation", "record": _journal_line(record)}
        out.write(json_printable(entry) + "\n")
    end = {"kind": "end", "memory": len(addrs), "relationship": edges}
    out.write(json.dumps({**end, "consolidation": len(journal)}) + "\n")
    return Exported(len(addrs), left_out)


def _floats(vector: Sequence[float]) -> str:
    """A stored (float32) vector as JSON numbers: nine significant digits read back to the
    same float32, where a float64's shortest form takes up to seventeen."""
    return ", ".join(map(_FLOAT32.format, vector))


_FLOAT32 = "{:.9g}"


def _journal(store: MemoryStore, where: str) -> list[ConsolidationRecord]:
    """Consolidation records matching `where`; none when the store never consolidated (and
    without creating the table, so exporting a read-only store works). A journal the store
    made and lost is `TableDamaged`: a backup without it would not say so."""
    if not store.made(CONSOLIDATIONS):
        return []
    return ConsolidationLog(store).find(where)


def _iso(value: object) -> object:
    if isinstance(value, datetime):
        return iso_z(value)
    if isinstance(value, list):
        return [_iso(v) for v in value]
    return value


def _journal_line(record: ConsolidationRecord) -> dict[str, Any]:
    return {k: _iso(v) for k, v in record.__dict__.items()}
