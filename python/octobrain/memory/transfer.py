"""Moving memories in: JSONL import of what `export.export_jsonl` writes, and re-embedding a
store with another model.

Import keeps every field (ids, scopes, times, access counts), skips ids the store already has
(so importing twice is harmless) and reuses the file's embeddings only when they come from the
same model. The whole file is checked before anything is written (`import_check`).
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np
import numpy.typing as npt

from octobrain.memory import sweep
from octobrain.memory.brain import Brain
from octobrain.memory.export import BATCH, Progress, no_progress
from octobrain.memory.import_check import KEPT_BY_RECORDS, Checked, check_import
from octobrain.models import Memory, Relationship
from octobrain.scope import GLOBAL_SCOPE
from octobrain.store import import_marks, link_rules, schema
from octobrain.store.consolidations import ConsolidationLog, ConsolidationRecord
from octobrain.store.failures import WriteFailed
from octobrain.store.memories import MemoryStore
from octobrain.store.pinned import Pinned
from octobrain.store.schema import DONE, PENDING, REVERTING
from octobrain.store.sql import sql_in
from octobrain.times import utcnow


@dataclass(frozen=True)
class ImportReport:
    """What an import did."""

    imported: int
    skipped_existing: int
    relationships: int
    reembedded: int
    consolidations: int = 0  # consolidation records stored
    consolidations_not_brought: int = 0  # records naming memories this import did not write
    # new edges not stored, for one of four reasons (the next four, which add up to it)
    relationships_not_stored: int = 0
    scopes: dict[str, int] = field(default_factory=dict)  # memories written, by their scope
    relationships_existing: int = 0  # edges the store held (by id, or the same link)
    consolidations_existing: int = 0  # records the store held
    relationships_missing_end: int = 0  # an end the store does not hold
    relationships_across_projects: int = 0  # ends in two projects
    relationships_unrecorded: int = 0  # a consolidation's edge without its record stored
    # against the links between its two memories (`store.link_rules`): a `supersedes` cycle,
    # a `conflicts` link beside a `supersedes`, a one-way link backwards, a second goal closed
    relationships_contradicting: int = 0


def import_jsonl(
    brain: Brain,
    source: Iterable[str | bytes],
    *,
    progress: Progress = no_progress,
    given: str = "",
) -> ImportReport:
    """Check the whole file first (nothing is written if any line is bad, or if `given`, the
    scope the caller chose, is not the file's project), then import (`check_import`, then
    `write_import`)."""
    with tempfile.TemporaryFile(prefix="octobrain-import-") as spool:
        checked = check_import(brain, source, spool, given=given)
        return write_import(brain, checked, progress=progress)


def write_import(
    brain: Brain,
    checked: Checked,
    *,
    progress: Progress = no_progress,
    name: str = "the file",
) -> ImportReport:
    """Store the checked memories batch by batch (those whose id the store has are skipped),
    then the edges between memories the store holds (those whose id or link it has are
    skipped), then the consolidation records whose memories and edges this import wrote.
    `progress` is told of each batch of memories.

    A record names memories and edges that a sleep pass or an undo will change or delete, so
    one that names any the store held before (or that the file does not hold) is not stored:
    a file cannot reach, through its journal, what it did not bring. What a run of the same
    file cut short wrote counts as this import's (`import_marks`: the store records an import
    until it ends), so running it again finishes it, records included."""
    store = brain.store
    mark, again = import_marks.begin(store, checked.key, name, checked.count)
    same_model = (
        checked.header.get("embedding_model") == brain.embedder.model_id
        and checked.header.get("dim") == brain.embedder.dim
    )
    # ids of this import's memories and edges that records name (a cut-short run's included)
    wrote = import_marks.written_before(store, mark, sorted(checked.named)) if again else set()
    imported = reembedded = 0
    scopes: Counter[str] = Counter()
    keys: dict[str, list[sweep.Key]] = {}  # the oldest and newest row imported, per scope
    edges = records = skipped = 0
    held = Counter[str]()  # edges and records the store held
    refused = Counter[str]()  # edges not stored, by why (`_refusal`)
    try:
        for batch in checked.spool.batches("memory"):
            fresh = _absent(store, batch)
            if fresh:
                reuse = same_model and all(
                    e is not None and len(e) == brain.embedder.dim for _, e in fresh
                )
                if reuse:
                    vectors = np.stack([e for _, e in fresh if e is not None])
                else:
                    vectors = brain.embedder.embed_documents([m.embedded_text() for m, _ in fresh])
                # Checked again under the write lock (the embedding is done before it), so two
                # processes importing one file store each memory once.
                with store.write_lock():
                    still = {m.id for m, _ in _absent(store, fresh)}
                    keep = [i for i, (m, _) in enumerate(fresh) if m.id in still]
                    if keep:
                        store.add([fresh[i][0] for i in keep], vectors[keep])
                imported += len(keep)
                scopes.update(fresh[i][0].scope for i in keep)
                for i in keep:
                    m = fresh[i][0]
                    key = sweep.key_of({"created_at": m.created_at, "id": m.id})
                    span = keys.setdefault(m.scope, [key, key])
                    span[:] = [min(span[0], key), max(span[1], key)]
                reembedded += 0 if reuse else len(keep)
                wrote.update(fresh[i][0].id for i in keep if fresh[i][0].id in checked.named)
            progress(len(batch))
        # Rows with times a sleep pass has passed are still for its conflict check to reach.
        floor = sweep.floor_of(utcnow() - timedelta(days=brain.config.consolidation.max_age_days))
        for scope, (low, high) in keys.items():
            sweep.reopen(store.location, scope, low, high, floor)
        wrote |= _written_beside(store, mark, checked, wrote)
        for rels in checked.spool.batches("relationship"):
            # The edges and memories present are read where edges are added.
            with store.write_lock():
                end_ids = {r.source_id for r in rels} | {r.target_id for r in rels}
                ends = _ends_seen(brain, sorted(end_ids))
                have = store.held_relationships([r.id for r in rels])
                # A link held under another edge id (or named twice in the file) is held.
                linked = store.links_held(rels)
                unheld = []
                for r in rels:
                    link = (r.source_id, r.target_id, r.relationship_type.value)
                    if r.id not in have and link not in linked:
                        linked.add(link)
                        unheld.append(r)
                gone = _members_gone(store, unheld, checked, wrote)
                new = []
                for r in unheld:
                    why = _refusal(r, ends) or ("" if _recorded(r, checked, wrote, gone) else UNREC)
                    refused[why] += bool(why)
                    if not why:
                        new.append(r)
                new, ruled, replaced = link_rules.sift(store, new)
                refused[RULED] += ruled
                store.add_relationships(new)
                if replaced:  # (the conflicts a supersession written settles)
                    store.delete_relationships(sql_in("id", replaced))
            edges += len(new)
            held["relationships"] += len(rels) - len(unheld)
            wrote.update(r.id for r in new if r.id in checked.named)
        wrote |= _written_beside(store, mark, checked, wrote)
        for journal in checked.spool.batches("consolidation"):
            with store.write_lock():
                log = ConsolidationLog(store)
                have = {r.id for r in log.find(sql_in("id", [r.id for r in journal]))}
                new_records = [r for r in journal if r.id not in have]
                gone = _gone(store, new_records, wrote)
                new_records = [r for r in new_records if _brought(r, wrote, gone)]
                if new_records:
                    log.add(*new_records)
            records += len(new_records)
            held["consolidations"] += len(have)
            skipped += sum(r.id not in have for r in journal) - len(new_records)
    except WriteFailed as failed:
        if not (imported or edges or records):
            raise
        # Each batch is a commit of its own: the store keeps what was imported before.
        done = (
            f"{imported} of {checked.spool.count['memory']} memories, {edges} edges and "
            f"{records} consolidation records were imported before it (running the same import "
            "again finishes it)"
        )
        raise failed.after(done) from failed
    import_marks.finish(store, mark)
    return ImportReport(
        imported,
        checked.count - imported,
        edges,
        reembedded,
        records,
        skipped,
        refused.total(),
        dict(scopes.most_common()),
        held["relationships"],
        held["consolidations"],
        refused[MISSING_END],
        refused[ACROSS],
        refused[UNREC],
        refused[RULED],
    )


def _written_beside(
    store: MemoryStore, mark: import_marks.ImportMark, checked: Checked, wrote: set[str]
) -> set[str]:
    """The ids records name that another run of this import wrote since the mark (one running
    beside this one, killed or not): this import's, as the rows this run wrote. Counted only
    as its own, a record naming rows of both runs was stored by neither."""
    others = sorted(checked.named - wrote)
    return import_marks.written_before(store, mark, others) if others else set()


def _ends_seen(brain: Brain, ids: list[str]) -> dict[str, str]:
    """The scope of each of `ids` the store holds that `brain`'s role sees (any scope): a
    role's import links none of its memories to another role's, and learns no such id is
    held (it counts as an end the store does not hold)."""
    ends = brain.store.scopes_of(ids)
    if brain.sight.roles is None:
        return ends
    roles = brain.store.values_of(sorted(ends), "role")
    return {i: scope for i, scope in ends.items() if roles.get(i) in brain.sight.roles}


# why not stored
MISSING_END, ACROSS, UNREC, RULED = "missing_end", "across_projects", "unrecorded", "ruled_out"


def _refusal(rel: Relationship, ends: dict[str, str]) -> str:
    """Why `rel` is not stored ("" when it may be): the store lacks an end (`MISSING_END`), or
    the edge joins two projects (`ACROSS`: its own scope and its ends' are not one project's
    or global), which no edge `relate` and the store's own passes make does; it would hand one
    project's memories to the other's graph."""
    if rel.source_id not in ends or rel.target_id not in ends:
        return MISSING_END
    if len({rel.scope, ends[rel.source_id], ends[rel.target_id]} - {GLOBAL_SCOPE}) > 1:
        return ACROSS
    return ""


def _members_gone(
    store: MemoryStore, rels: list[Relationship], checked: Checked, wrote: set[str]
) -> set[str]:
    """The memories the records naming `rels` (those `KEPT_BY_RECORDS`) name that the store
    does not hold."""
    ids = {
        i
        for rel in rels
        if rel.relationship_type in KEPT_BY_RECORDS
        for _, named in checked.recorded.get(rel.id, ())
        for i in named
    } - wrote
    return ids - store.held(sorted(ids))


def _recorded(rel: Relationship, checked: Checked, wrote: set[str], gone: set[str]) -> bool:
    """Whether `rel` is an edge octobrain keeps for a consolidation record (`KEPT_BY_RECORDS`)
    only when a record naming it is stored by this import too (`_brought`): it wrote the
    record's parent and every member (of one in force, every member the store holds: `gone`
    are those it holds nowhere). Otherwise the edge would stand without the record that undoes
    it (a file bringing a consolidation of memories the store holds unconsolidated)."""
    if rel.relationship_type not in KEPT_BY_RECORDS:
        return True
    return any(
        ids[0] in wrote and all(i in wrote or (status == DONE and i in gone) for i in ids[1:])
        for status, ids in checked.recorded.get(rel.id, ())
    )


UNFINISHED_STATUSES = (PENDING, REVERTING)


def _gone(store: MemoryStore, records: list[ConsolidationRecord], wrote: set[str]) -> set[str]:
    """The memory and edge ids `records` name that the store does not hold (this import's
    rows written): a member forgotten since its merge, with its edge; an undone merge's
    edges and synthesised parent."""
    memories = {i for r in records for i in (r.parent_id, *r.member_ids)} - wrote
    edges = {i for r in records for i in r.edge_ids} - wrote
    return (memories - store.held(sorted(memories))) | (
        edges - store.held_relationships(sorted(edges))
    )


def _brought(record: ConsolidationRecord, wrote: set[str], gone: set[str]) -> bool:
    """Whether this import wrote every memory and edge `record` names. A record in force or
    settled (undone, rolled back: what keeps a sleep pass from merging again what the user
    undid) may also name ones the store holds nowhere (`gone`), which the source had forgotten
    or undone; its parent in force, never. A record left half-way is finished or undone by the
    next pass: every id it names is this import's."""
    named = (record.parent_id, *record.member_ids, *record.edge_ids)
    if record.status in UNFINISHED_STATUSES:
        return all(i in wrote for i in named)
    if record.status == DONE and record.parent_id not in wrote:
        return False
    return all(i in wrote or i in gone for i in named)


def _absent(
    store: MemoryStore, batch: list[tuple[Memory, npt.NDArray[np.float32] | None]]
) -> list[tuple[Memory, npt.NDArray[np.float32] | None]]:
    """The entries of `batch` whose id the store does not hold."""
    held = store.held([m.id for m, _ in batch])
    return [(m, e) for m, e in batch if m.id not in held]


def reembed(brain: Brain, *, progress: Progress = no_progress) -> int:
    """Re-embed every memory with the brain's configured model, in one atomic commit.

    The new table version replaces the old one in a single LanceDB overwrite commit (older
    versions stay on disk until compaction), under the store's write lock: a crash at any point
    leaves either the old store or the new one, never a mix. Returns the number of rows.
    """
    probe = brain.store
    columns = [c for c in schema.memories_schema("", 1).names if c != "embedding"]
    with probe.write_lock(check_model=False):
        table = probe.open_memories_unchecked()
        total = int(table.count_rows())

        def batches() -> Iterator[list[dict[str, Any]]]:
            # Read as the new version is written, a batch at a time: the store is never held.
            for rows in Pinned(table).scan_batches("true", columns=columns, batch_rows=BATCH):
                batch = [schema.row_to_memory(r) for r in rows.to_pylist()]
                vectors = brain.embedder.embed_documents([m.embedded_text() for m in batch])
                yield [schema.memory_to_row(m, v) for m, v in zip(batch, vectors, strict=True)]
                progress(len(batch))

        probe.overwrite_memories(batches())
    return total


__all__ = [
    "ImportReport",
    "import_jsonl",
    "reembed",
    "write_import",
]
