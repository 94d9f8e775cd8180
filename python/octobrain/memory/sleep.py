"""The sleep pass: recent near-duplicates of a scope merged, conflicts recorded, faded
memories archived.

A pass reads the scope's recent working memories, clusters them by true cosine within one trust
tier (`kernels.clustering`), keeps of each cluster its largest set of mutually compatible
members (near-identical wording that quotes other numbers is a conflict, not a duplicate),
plans a synthesised parent per cluster and commits the clusters in batches through the
consolidation protocol of `memory.consolidation`, which keeps a killed pass invisible. It then
records which of two conflicting statements prevails, and archives what has sat at the decay
floor for `archive_after_days`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa

from octobrain.config import MAX_DAYS
from octobrain.errors import InvalidInput, as_json
from octobrain.kernels import decay
from octobrain.kernels.clustering import cosine_clusters, unit_rows
from octobrain.memory import conflicts, sleep_conflicts, sweep
from octobrain.memory.conflicts import Conflict, StatementPool
from octobrain.memory.consolidation import Consolidation, Consolidator, first_of
from octobrain.memory.conversation import CONVERSATION_PREFIX
from octobrain.memory.corpus_io import vectors_of
from octobrain.memory.merged_words import central_first, cosines
from octobrain.memory.summary import summarise
from octobrain.models import (
    MAX_FILES,
    MAX_TAGS,
    Memory,
    MemoryType,
    Relationship,
    RelationshipType,
    State,
)
from octobrain.store.addresses import ADDR
from octobrain.store.consolidations import ConsolidationRecord
from octobrain.store.schema import memories_schema, memory_to_row, row_to_memory, stored_float
from octobrain.store.sql import sql_in, sql_str

COMMIT_BATCH = 64  # clusters per commit set: a pass over thousands of clusters costs tens of
# commits, not thousands (each commit rewrites a manifest; compaction follows every 64)
# Work per pass grows with what a scope gathered, not with any one call, so it is bounded: when
# most rows are alike, clustering costs about n^2.3 (4,000 copies of one note: 31 s, 1.4 GB),
# so rows are clustered `CLUSTER_WINDOW` at a time (oldest first); and a cluster of more than
# `MAX_MEMBERS` becomes several consolidations of consecutive members (even parts), so no
# journal record (nor its export line) grows without end. Each stays undoable on its own, so
# their parents are not merged again (`ConsolidationLog.not_to_cluster`).
CLUSTER_WINDOW = 2_048
MAX_MEMBERS = 256


@dataclass
class SleepReport:
    """What a sleep pass merged (or would merge) and archived."""

    scope: str
    candidates: int
    consolidations: list[Consolidation] = field(default_factory=list)
    archived: list[str] = field(default_factory=list)
    skipped: int = 0  # clusters whose members changed while the pass ran (retried next time)
    dry_run: bool = False
    conflicts: list[Conflict] = field(default_factory=list)  # recorded (or, dry, found)
    disagreements: list[tuple[str, str]] = field(default_factory=list)  # left to a person
    # Recent rows quoting a number that the conflict check has yet to reach: over the pass's
    # budget, left to later passes (`memory.sweep`).
    unchecked: int = 0
    # Of `candidates`, those never merged again: members of an undone consolidation (someone
    # said no), parents of one in force, findings waiting for their goal to be closed.
    held_back: int = 0
    # Damaged consolidation records of other scopes, left as they are (`octobrain doctor`).
    damaged_records: list[str] = field(default_factory=list)

    def damage_said(self) -> str:
        """One line naming `damaged_records` ("" when none)."""
        if not self.damaged_records:
            return ""
        one = len(self.damaged_records) == 1
        return (
            f"consolidation record{'' if one else 's'} {', '.join(self.damaged_records)} of "
            f"another scope no longer match{'es' if one else ''} {'its' if one else 'their'} "
            "checksum (a data file changed on disk): left as "
            f"{'it is' if one else 'they are'}; this scope's pass did not need "
            f"{'it' if one else 'them'}. Run `octobrain doctor` for the repair"
        )


def sleep_pass(
    engine: Consolidator,
    scope: str,
    *,
    threshold: float,
    min_size: int,
    max_age_days: float,
    now: datetime,
    dry_run: bool = False,
    roles: Sequence[str] | None = None,
) -> SleepReport:
    """Cluster `scope`'s recent working memories by true cosine and merge each cluster. The
    pass is the scope's, every role's; its report holds what a reader of `roles` sees
    (`Sight.roles`; None, every role's): a role's pass names no other role's memory."""
    _check_sleep_args(threshold, min_size, max_age_days)
    engine.store.refresh()  # another machine's latest writes are this pass's candidates
    engine.log.passed_over.clear()
    if not dry_run:
        engine.repair([scope])
    cutoff = now - timedelta(days=max_age_days)
    detect = engine.config.consolidation.detect_conflicts
    # Where the conflict check stands: the rows it has yet to reach stay in it past the window.
    before = sweep.load(engine.store.location, scope) if detect else sweep.Sweep()
    where = f"{_statements(scope)} AND {before.read_since(cutoff)}"
    table = _unsaid(engine, where, ALL_COLUMNS)
    rows = table.drop_columns(["embedding"]).to_pylist()
    for row, vector in zip(rows, vectors_of(table), strict=True):
        row["embedding"] = vector  # a row of one float32 matrix, not a list of Python floats
    # Findings of a goal wait for the goal to be closed.
    excluded = engine.log.not_to_cluster(scope) | _achievers(engine, [r["id"] for r in rows])
    rows, late = before.past(rows, cutoff)  # those past the window: checked, never clustered
    shown = _shown(roles)
    candidates = sum(shown(r["role"]) for r in rows)
    held_back = sum(r["id"] in excluded and shown(r["role"]) for r in rows)
    rows = [r for r in rows if r["id"] not in excluded]
    late = [r for r in late if r["id"] not in excluded and conflicts.numbers(r["content"])]
    # Every working statement of the scope as it stands before this pass merges anything
    # (only when there is something recent to compare it with).
    pool = _statement_pool(engine, scope) if (rows or late) and detect else None
    report = SleepReport(scope, candidates, dry_run=dry_run, held_back=held_back)
    report.damaged_records = sorted(engine.log.passed_over)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: (r["created_at"], r["id"])):
        groups.setdefault((row["source"], row["role"]), []).append(row)  # never mix tiers
    linkage = engine.config.consolidation.linkage
    planned: list[tuple[Consolidation, list[dict[str, Any]]]] = []
    for key in sorted(groups):
        for at in range(0, len(groups[key]), CLUSTER_WINDOW):
            group = groups[key][at : at + CLUSTER_WINDOW]
            if len(group) < min_size:
                continue
            vectors = np.stack([np.asarray(r["embedding"], dtype=np.float32) for r in group])
            for cluster in _compatible_clusters(vectors, group, threshold, min_size, linkage):
                members = [group[i] for i in cluster]
                sims = cosines(vectors[cluster])
                planned.append((_plan_cluster(engine, members, sims, threshold, now), members))
    merged = [p for p, _ in planned] if dry_run else []
    batches = (
        []
        if dry_run
        else [planned[at : at + COMMIT_BATCH] for at in range(0, len(planned), COMMIT_BATCH)]
    )
    for batch in batches:
        for (plan, _), done in zip(batch, _commit_clusters(engine, batch, now), strict=True):
            if done is None:
                report.skipped += shown(plan.parent.role)
            else:
                merged.append(done)
    report.consolidations = [c for c in merged if shown(c.parent.role)]
    if pool is not None and len(pool):
        report.conflicts, report.disagreements, report.unchecked = sleep_conflicts.of_pass(
            engine,
            scope,
            rows + late,
            pool,
            merged,
            threshold,
            cutoff,
            before,
            dry_run=dry_run,
        )
        if roles is not None:  # (both statements of a pair seen, a parent for its members)
            role_of = dict(zip(pool.ids, pool.roles or [""] * len(pool), strict=True))
            role_of.update((c.parent.id, c.parent.role) for c in merged)
            seen = {i for i, role in role_of.items() if shown(role)}
            report.conflicts = [c for c in report.conflicts if {c.winner, c.loser} <= seen]
            report.disagreements = [p for p in report.disagreements if set(p) <= seen]
    return report


def _shown(roles: Sequence[str] | None) -> Callable[[str], bool]:
    """Whether a reader of `roles` (None: every role) sees a memory of a role."""
    return (lambda _: True) if roles is None else (lambda role: role in roles)


def _said(tags: pa.ChunkedArray) -> np.ndarray:
    """Which rows of a `tags` column are turns of an ingested conversation (`is_turn`): a
    record of what was said, when, in its place in the conversation. Its repetitions
    ("Thanks, sounds good!" after each of five questions) answer different things, so turns
    are never merged, nor weighed as statements against the scope's facts. Read in Arrow: a
    list per row of 200,000 turns is 60 MB."""
    import pyarrow.compute as pc

    lists = tags.combine_chunks()
    hit = pc.starts_with(pc.list_flatten(lists), CONVERSATION_PREFIX).fill_null(False)
    said = np.zeros(len(lists), dtype=bool)
    said[np.asarray(pc.list_parent_indices(lists))[np.asarray(hit, dtype=bool)]] = True
    return said


def _statement_pool(engine: Consolidator, scope: str) -> StatementPool:
    """Every working statement of `scope` as it stands before this pass merges anything, read
    as Arrow columns (one float32 matrix for the vectors, no dict per row)."""
    columns = ["id", "content", "embedding", "source", "created_at", "role"]
    table = _unsaid(engine, _statements(scope), columns)
    return StatementPool(
        table.column("id").to_pylist(),
        table.column("content").to_pylist(),
        unit_rows(vectors_of(table)),
        table.column("source").to_pylist(),
        table.column("created_at").to_pylist(),
        table.column("role").to_pylist(),
    )


ALL_COLUMNS = tuple(memories_schema("", 1).names)


def _unsaid(engine: Consolidator, where: str, columns: Sequence[str]) -> pa.Table:
    """`columns` of the rows matching `where` that are not turns of an ingested conversation
    (`_said`): their tags are read first, then only the other rows, by their addresses at
    that version. A store of 200,000 turns is mostly rows a pass never merges: read whole,
    with their words and vectors, they were the pass's cost."""
    pinned = engine.store.snapshot(engine.store.version())
    keys = pinned.scan_arrow(where, columns=["tags", ADDR])
    addrs = keys.column(ADDR).to_numpy()[~_said(keys.column("tags"))]
    return pinned.take(np.sort(addrs).tolist(), columns)


def _achievers(engine: Consolidator, ids: Sequence[str]) -> set[str]:
    """Which of `ids` are the source of an `achieves` edge: the edges read by their type, not
    by naming every id (a list of 200,000 ids took the query 33 s and 9 GB)."""
    if not ids:
        return set()
    return engine.store.sources_of(RelationshipType.ACHIEVES.value) & set(ids)


def _plan_cluster(
    engine: Consolidator,
    members: list[dict[str, Any]],
    sims: np.ndarray,
    threshold: float,
    now: datetime,
) -> Consolidation:
    # Most central member first: its wording leads the summary and names the parent.
    ranked = [row_to_memory(members[i]) for i in central_first(sims)]
    lead = ranked[0]
    types = Counter(m.memory_type for m in ranked)
    off_diagonal = sims[~np.eye(len(sims), dtype=bool)]
    description = (
        f"sleep pass: {len(ranked)} memories, pairwise cosine ≥ {float(off_diagonal.min()):.2f}"
        f" (threshold {threshold:.2f})"
    )
    parent = Memory(
        title=lead.title,
        content=summarise([m.content for m in ranked]),
        memory_type=max(types, key=lambda t: (types[t], t == lead.memory_type)),
        scope=lead.scope,
        role=lead.role,
        tags=first_of(m.tags for m in ranked)[:MAX_TAGS],
        related_files=first_of(m.related_files for m in ranked)[:MAX_FILES],
        importance=stored_float(engine.boosted([float(r["importance"]) for r in members])),
        source=lead.source,
        git_commit=lead.git_commit,
        created_at=now,
        updated_at=now,
        last_accessed=now,
    )
    return Consolidation("sleep", parent, ranked, True, description)


def _commit_clusters(
    engine: Consolidator, batch: Sequence[tuple[Consolidation, list[dict[str, Any]]]], now: datetime
) -> list[Consolidation | None]:
    """Commit planned clusters together; None for one whose members changed meanwhile."""
    vectors = engine.embedder.embed_documents([p.parent.searchable_text() for p, _ in batch])
    wanted = [m["id"] for _, members in batch for m in members]
    out: list[Consolidation | None] = []
    records: list[ConsolidationRecord] = []
    rows: list[dict[str, Any]] = []
    read: list[dict[str, Any]] = []
    edges: list[Relationship] = []
    with engine.store.write_lock():
        # Re-read under the lock: a member edited or consolidated meanwhile skips its
        # cluster (the next pass sees it afresh) instead of overwriting someone's write.
        current = {r["id"]: r for r in engine.store.scan(sql_in("id", wanted))}
        for (planned, cluster), vector in zip(batch, vectors, strict=True):
            # Recorded most central first, the order the parent's words were made in, so a
            # rewrite (a member edited or forgotten) makes them the same way.
            by_id = {m["id"]: m for m in cluster}
            members = [by_id[m.id] for m in planned.members]
            ids = [m["id"] for m in members]
            fresh = [current.pop(i, None) for i in ids]  # popped: one cluster per member
            if any(
                r is None or r["state"] != State.WORKING.value or r["updated_at"] != m["updated_at"]
                for r, m in zip(fresh, members, strict=True)
            ):
                out.append(None)
                continue
            read += [r for r in fresh if r is not None]
            member_rows, before = engine.flip_members([r for r in fresh if r is not None], now)
            links = engine.member_edges(planned.parent, ids, "Merged by sleep consolidation")
            record = engine.new_record(
                "sleep", planned.parent, True, before, ids, now, links, planned.description
            )
            records.append(record)
            rows += [memory_to_row(planned.parent, vector), *member_rows]
            edges += links
            planned.record_id = record.id
            out.append(planned)
        if records:
            engine.commit(records, rows, edges, read=read)
    return out


def archive_faded(
    engine: Consolidator,
    scope: str,
    now: datetime,
    *,
    dry_run: bool = False,
    roles: Sequence[str] | None = None,
) -> list[str]:
    """Archive `scope`'s memories whose decayed importance has sat at the floor, untouched,
    for `archive_after_days`. Returns the ids of those a reader of `roles` sees (`sleep_pass`)."""
    cfg, mcfg = engine.config.consolidation, engine.config.memory
    anchor = now - timedelta(days=cfg.archive_after_days)
    states = [State.WORKING.value, State.CONSOLIDATED.value]
    where = (
        f"scope = {sql_str(scope)} AND {sql_in('state', states)}"
        f" AND last_accessed <= timestamp {sql_str(anchor.isoformat())}"
        f" AND updated_at <= timestamp {sql_str(anchor.isoformat())}"
    )
    rows = engine.store.scan(where, columns=["id", "importance", "last_accessed", "access_count"])
    if not rows:
        return []
    # Decayed importance as it was `archive_after_days` ago: at the floor then, and nothing
    # touched since, means it has sat at the floor for the whole window.
    then = decay.decayed_importance(
        [r["importance"] for r in rows],
        [r["last_accessed"].timestamp() for r in rows],
        [r["access_count"] for r in rows],
        anchor,
        half_life_days=mcfg.decay_half_life_days,
        access_boost_factor=mcfg.access_boost_factor,
        min_importance=mcfg.min_importance_threshold,
        enabled=mcfg.decay_enabled,
    )
    floor = mcfg.min_importance_threshold
    ids = [r["id"] for r, v in zip(rows, then, strict=True) if v <= floor + 1e-9]
    if ids and not dry_run:
        # Under the lock, only those still untouched: one edited, promoted or recalled since
        # the read above (by another process) is no longer faded, and its change stands.
        with engine.store.write_lock():
            still = f"{where} AND {sql_in('id', ids)}"
            ids = [r["id"] for r in engine.store.scan(still, columns=["id"])]
            if ids:
                engine.store.set_columns(still, {"state": State.ARCHIVED.value, "updated_at": now})
    if roles is None or not ids:
        return ids
    role_of = engine.store.values_of(ids, "role")
    return [i for i in ids if role_of.get(i) in roles]


def _statements(scope: str) -> str:
    """The rows a sleep pass works on: `scope`'s working memories, goals aside."""
    return (
        f"scope = {sql_str(scope)} AND state = {sql_str(State.WORKING.value)}"
        f" AND memory_type != {sql_str(MemoryType.GOAL.value)}"
    )


def _without_conflicts(
    clusters: list[list[int]], rows: list[dict[str, Any]], min_size: int
) -> list[list[int]]:
    """Split off conflicting members: near-identical wording that quotes disjoint numbers
    ("timeout 30 s" vs "timeout 45 s") is two facts in conflict, not a duplicate, and merging
    them would hide the conflict. Keeps, per cluster, the largest set of mutually compatible
    members (grown greedily from each member in turn; ties go to the earliest seed), so the
    outcome does not depend on the order rows happen to come in; the rest stay working for a
    person or a `supersedes` link."""

    out = []
    for cluster in clusters:
        quoted = [conflicts.numbers(rows[i]["content"]) for i in cluster]  # once per member
        size = len(cluster)
        fits = np.array(
            [[conflicts.compatible(a, b) for b in quoted] for a in quoted], dtype=bool
        ).reshape(size, size)
        best: list[int] = []
        for seed in range(size):  # (nothing conflicts, the usual case: the first seed keeps all)
            kept, open_ = [seed], fits[seed].copy()  # open_: compatible with every kept one
            for j in range(size):
                if j != seed and open_[j]:
                    kept.append(j)
                    open_ &= fits[j]
            if len(kept) > len(best):
                best = kept
            if len(best) == size:
                break
        if len(best) >= min_size:
            out.append([cluster[j] for j in sorted(best)])
    return out


def _compatible_clusters(
    vectors: np.ndarray, rows: list[dict[str, Any]], threshold: float, min_size: int, linkage: str
) -> list[list[int]]:
    """Clusters of mutually compatible near-duplicates (positions in `rows`).

    Cosine alone cannot see that "timeout 30 s" and "timeout 45 s" are two facts, so a cosine
    cluster can hold both sides of a conflict, and only its largest compatible set is merged.
    The members split off are clustered again among themselves, so the other side of the
    conflict still merges with its own restatements instead of staying scattered. Each round
    only re-clusters what the previous one split off, so the rounds shrink to nothing."""
    out: list[list[int]] = []
    pending = list(range(len(rows)))
    while len(pending) >= min_size:
        pending_of = pending
        found = cosine_clusters(vectors[pending], threshold, min_size, linkage)  # type: ignore[arg-type]
        pending = []
        for cluster in (
            [pending_of[i] for i in part] for c in found for part in _even_parts(c, MAX_MEMBERS)
        ):
            kept = _without_conflicts([cluster], rows, min_size)
            if kept:  # a cluster with nothing mergeable would only come back unchanged
                out += kept
                pending += [i for i in cluster if i not in kept[0]]
    return out


def _even_parts(items: list[int], most: int) -> list[list[int]]:
    """`items` cut into the fewest runs of consecutive items of at most `most` each, of sizes
    that differ by one at most (so no part is left too small to merge)."""
    parts = -(-len(items) // most)
    size, extra = divmod(len(items), parts)
    out, at = [], 0
    for k in range(parts):
        end = at + size + (k < extra)
        out.append(items[at:end])
        at = end
    return out


def _check_sleep_args(threshold: float, min_size: int, max_age_days: float) -> None:
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise InvalidInput("threshold", "must be a number in [0, 1]")
    if not 0.0 <= threshold <= 1.0:
        raise InvalidInput("threshold", f"must be a number in [0, 1], got {as_json(threshold)}")
    if isinstance(min_size, bool) or not isinstance(min_size, int) or min_size < 2:
        raise InvalidInput("min_size", f"must be an integer >= 2, got {as_json(min_size)}")
    if isinstance(max_age_days, bool) or not isinstance(max_age_days, int | float):
        raise InvalidInput("max_age_days", "must be a positive number of days")
    if not (math.isfinite(max_age_days) and 0 < max_age_days <= MAX_DAYS):
        raise InvalidInput(
            "max_age_days",
            f"must be a positive number of days, at most {MAX_DAYS:,}, got {as_json(max_age_days)}",
        )


__all__ = ["SleepReport", "archive_faded", "sleep_pass"]
