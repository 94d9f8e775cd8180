"""Consolidation: sleep passes over near-duplicates, goal closing, unconsolidate, archiving.

Every consolidation commits in the same order, under the store's write lock:

1. a `pending` record in the consolidation log (what will change, and the exact old values);
2. the new edges (`consolidated_from` parent → member; they dangle, invisibly, until step 3);
3. ONE merge commit to `memories`: the parent inserted or updated and every member flipped to
   `consolidated` — readers see the whole cluster or none of it;
4. the record marked `done`.

A sleep pass runs these four steps once per batch of up to `COMMIT_BATCH` clusters (records,
edges, rows and statuses of the whole batch in each commit), so a pass over a thousand clusters
is a few dozen commits; the guarantees below hold per batch as they do per cluster.

A process killed anywhere leaves no half-consolidated cluster visible: before step 3 nothing a
reader sees has changed, after it everything has. The next consolidation, of any scope, first
`repair`s what a killed one left: a pending record whose memory commit landed is marked done,
one whose commit did not land is rolled back (its edges deleted). Unconsolidate mirrors this
with a `reverting` status and is idempotent, so a killed revert is simply finished.

Members keep their row, scope, embedding and text; only `state`, `importance`,
`pre_consolidation_importance` and `updated_at` change, and the log keeps their previous values
bit for bit (float32 as stored), so `unconsolidate` restores them exactly.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from octobrain.config import Config
from octobrain.embed.base import Embedder
from octobrain.errors import InvalidInput
from octobrain.kernels import decay
from octobrain.kernels.clustering import cosine_clusters, unit_rows
from octobrain.memory import conflicts
from octobrain.memory.conflicts import Conflict, Statement
from octobrain.memory.summary import summarise
from octobrain.models import (
    MAX_FILES,
    MAX_TAGS,
    Memory,
    MemoryType,
    Relationship,
    RelationshipType,
    Source,
    State,
    utcnow,
)
from octobrain.store import MemoryStore, NotFound
from octobrain.store.consolidations import (
    DONE,
    PENDING,
    REVERTED,
    REVERTING,
    ConsolidationLog,
    ConsolidationRecord,
)
from octobrain.store.memories import sql_in, sql_str
from octobrain.store.schema import memory_to_row, row_to_memory

ABANDONED = "abandoned"  # a pending record whose memory commit never landed, rolled back


COMMIT_BATCH = 64  # clusters per commit set: a pass over thousands of clusters costs tens of
# commits, not thousands (each commit rewrites a manifest; compaction follows every 64)


def _checkpoint(step: str) -> None:
    """A named point between two commits. Does nothing; crash tests replace it to kill the
    process exactly there."""


@dataclass
class Consolidation:
    """One consolidation: done, or only planned (dry run, `record_id` empty)."""

    kind: str  # "sleep" | "goal"
    parent: Memory
    members: list[Memory]
    synthesised: bool
    description: str
    record_id: str = ""


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


@dataclass(frozen=True)
class Unconsolidation:
    """What `unconsolidate` undid."""

    parent_id: str
    restored: list[str]
    parent_removed: bool


def f32(value: float) -> float:
    """`value` rounded to float32, as the store keeps it."""
    return float(np.float32(value))


class Consolidator:
    """Consolidation over one store; scope rules come from the caller (`Brain`)."""

    def __init__(self, store: MemoryStore, embedder: Embedder, config: Config) -> None:
        self.store = store
        self.embedder = embedder
        self.config = config
        self.log = ConsolidationLog(store)

    # ---- crash repair ---------------------------------------------------------------------

    def repair(self) -> int:
        """Finish or roll back what a killed process left half-way. Returns records fixed."""
        fixed = 0
        for record in self.log.unfinished():
            with self.store.write_lock():
                if record.status == REVERTING:
                    self._revert(record, utcnow())
                elif self._landed(record):
                    self.log.set_status(DONE, record.id)
                else:
                    edges = sql_in("id", record.edge_ids)
                    if record.parent_prev_updated_at is None:  # the parent never existed
                        pid = sql_str(record.parent_id)
                        edges += f" OR source_id = {pid} OR target_id = {pid}"
                    self.store.delete_relationships(edges)
                    self.log.set_status(ABANDONED, record.id)
            fixed += 1
        return fixed

    def _landed(self, record: ConsolidationRecord) -> bool:
        ids = [*record.member_ids, record.parent_id]
        rows = self.store.scan(sql_in("id", ids), columns=["id", "state", "updated_at"])
        for row in rows:
            if row["id"] == record.parent_id:
                if record.parent_prev_updated_at is None or row["updated_at"] == record.stamp:
                    return True
            elif row["state"] == State.CONSOLIDATED.value and row["updated_at"] == record.stamp:
                return True
        return False

    # ---- the commit sequence --------------------------------------------------------------

    def commit(
        self,
        records: Sequence[ConsolidationRecord],
        rows: list[dict[str, Any]],
        edges: Sequence[Relationship],
    ) -> None:
        """Steps 1–4 of the module docstring for one or more consolidations at once (four
        commits in all, whatever their number); call with the write lock held."""
        self.log.add(*records)
        _checkpoint("record")
        self.store.add_relationships(list(edges))
        _checkpoint("edges")
        self.store.merge_rows(rows)
        _checkpoint("memories")
        self.log.set_status(DONE, *(record.id for record in records))
        for record in records:
            record.status = DONE

    def flip_members(
        self, members: list[dict[str, Any]], stamp: datetime
    ) -> tuple[list[dict[str, Any]], dict[str, list[Any]]]:
        """Member rows turned `consolidated` (damped importance), and their previous values."""
        factor = np.float32(self.config.consolidation.member_importance_factor)
        before: dict[str, list[Any]] = {"imp": [], "pre": [], "state": [], "updated": []}
        out = []
        for row in members:
            before["imp"].append(row["importance"])
            before["pre"].append(row["pre_consolidation_importance"])
            before["state"].append(row["state"])
            before["updated"].append(row["updated_at"])
            new = dict(row)
            new["pre_consolidation_importance"] = row["importance"]
            new["importance"] = float(np.float32(row["importance"]) * factor)
            new["state"] = State.CONSOLIDATED.value
            new["updated_at"] = stamp
            out.append(new)
        return out, before

    def new_record(
        self,
        kind: str,
        parent: Memory,
        synthesised: bool,
        before: dict[str, list[Any]],
        member_ids: list[str],
        stamp: datetime,
        edges: Sequence[Relationship],
        description: str,
        *,
        parent_prev: tuple[float, datetime] | None = None,
        goal_id: str = "",
    ) -> ConsolidationRecord:
        return ConsolidationRecord(
            kind=kind,
            scope=parent.scope,
            parent_id=parent.id,
            parent_synthesised=synthesised,
            member_ids=member_ids,
            member_prev_importance=before["imp"],
            member_prev_pre=before["pre"],
            member_prev_state=before["state"],
            member_prev_updated_at=before["updated"],
            stamp=stamp,
            description=description,
            parent_prev_importance=None if parent_prev is None else parent_prev[0],
            parent_prev_updated_at=None if parent_prev is None else parent_prev[1],
            goal_id=goal_id,
            edge_ids=[e.id for e in edges],
        )

    def member_edges(
        self, parent: Memory, member_ids: Sequence[str], description: str
    ) -> list[Relationship]:
        return [
            Relationship(
                parent.id, mid, RelationshipType.CONSOLIDATED_FROM, 1.0, description, parent.scope
            )
            for mid in member_ids
        ]

    def boosted(self, importances: Sequence[float]) -> float:
        boost = self.config.consolidation.goal_parent_boost
        return f32(min(1.0, max(importances) * boost))

    # ---- sleep ----------------------------------------------------------------------------

    def sleep(
        self,
        scope: str,
        *,
        threshold: float,
        min_size: int,
        max_age_days: float,
        now: datetime,
        dry_run: bool = False,
    ) -> SleepReport:
        """Cluster `scope`'s recent working memories by true cosine and merge each cluster."""
        _check_sleep_args(threshold, min_size, max_age_days)
        self.store.refresh()  # another machine's latest writes are this pass's candidates
        if not dry_run:
            self.repair()
        cutoff = now - timedelta(days=max_age_days)
        where = f"{_statements(scope)} AND created_at >= timestamp {sql_str(cutoff.isoformat())}"
        rows = self.store.scan(where)
        # Findings of a goal wait for the goal to be closed.
        excluded = self.log.not_to_cluster(scope) | self._achievers([r["id"] for r in rows])
        rows = [r for r in rows if r["id"] not in excluded]
        # Every working statement of the scope as it stands before this pass merges anything
        # (only when there is something recent to compare it with).
        pool = (
            self.store.scan(
                _statements(scope), columns=["id", "content", "embedding", "source", "created_at"]
            )
            if rows and self.config.consolidation.detect_conflicts
            else []
        )
        report = SleepReport(scope, len(rows), dry_run=dry_run)
        groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for row in sorted(rows, key=lambda r: (r["created_at"], r["id"])):
            groups.setdefault((row["source"], row["role"]), []).append(row)  # never mix tiers
        linkage = self.config.consolidation.linkage
        planned: list[tuple[Consolidation, list[dict[str, Any]]]] = []
        for key in sorted(groups):
            group = groups[key]
            if len(group) < min_size:
                continue
            vectors = np.stack([np.asarray(r["embedding"], dtype=np.float32) for r in group])
            for cluster in _compatible_clusters(vectors, group, threshold, min_size, linkage):
                members = [group[i] for i in cluster]
                sims = _cosines(vectors[cluster])
                planned.append((self._plan_cluster(members, sims, threshold, now), members))
        if dry_run:
            report.consolidations = [p for p, _ in planned]
        else:
            for start in range(0, len(planned), COMMIT_BATCH):
                for done in self._commit_clusters(planned[start : start + COMMIT_BATCH], now):
                    if done is None:
                        report.skipped += 1
                    else:
                        report.consolidations.append(done)
        if pool:
            report.conflicts, report.disagreements = self._conflicts(
                scope, rows, pool, report.consolidations, threshold, cutoff, dry_run=dry_run
            )
        return report

    def _conflicts(
        self,
        scope: str,
        recent: list[dict[str, Any]],
        pool: list[dict[str, Any]],
        merged: Sequence[Consolidation],
        threshold: float,
        window_start: datetime,
        *,
        dry_run: bool,
    ) -> tuple[list[Conflict], list[tuple[str, str]]]:
        """Record which of two conflicting statements prevails (module `conflicts`): this
        pass's recent rows against every working statement of the scope, a member merged by
        this pass standing for its parent. Returns the conflicts recorded (found, when dry) and
        the disagreements left open. Pairs already linked are left alone, so a pass repeated
        (or resumed after a crash) adds nothing twice."""
        pairs = conflicts.conflicting_pairs(recent, pool, threshold)
        if not pairs:
            return [], []
        statement_of: dict[str, Statement] = {}
        for c in merged:
            stated = Statement(
                c.parent.id, c.parent.source.trust, max(m.created_at for m in c.members)
            )
            statement_of.update((m.id, stated) for m in c.members)
        rows = {r["id"]: r for r in [*pool, *recent]}
        singles = sorted({i for pair in pairs for i in pair} - statement_of.keys())
        edges = self.store.relationships_of(singles)
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
                for r in self.store.scan(sql_in("id", children), columns=["id", "created_at"])
            }
            if children
            else {}
        )
        for i in singles:
            times = [stated_at[m] for m in merged_from.get(i, []) if m in stated_at]
            row = rows[i]
            trust = Source(row["source"]).trust
            statement_of[i] = Statement(i, trust, max(times) if times else row["created_at"])
        found, disagreements = conflicts.resolve(pairs, statement_of, settled, window_start)
        if found and not dry_run:
            self.store.add_relationships(
                [
                    Relationship(
                        c.winner, c.loser, RelationshipType.CONFLICTS, 1.0, c.description, scope
                    )
                    for c in found
                ]
            )
        return found, disagreements

    def _achievers(self, ids: Sequence[str]) -> set[str]:
        rels = self.store.relationships_of(list(ids))
        wanted = set(ids)
        return {
            r.source_id
            for r in rels
            if r.relationship_type is RelationshipType.ACHIEVES and r.source_id in wanted
        }

    def _plan_cluster(
        self, members: list[dict[str, Any]], sims: np.ndarray, threshold: float, now: datetime
    ) -> Consolidation:
        # Most central member first: its wording leads the summary and names the parent.
        centrality = sims.mean(axis=1)
        order = sorted(range(len(members)), key=lambda i: (-centrality[i], i))
        ranked = [row_to_memory(members[i]) for i in order]
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
            tags=list(dict.fromkeys(t for m in ranked for t in m.tags))[:MAX_TAGS],
            related_files=list(dict.fromkeys(f for m in ranked for f in m.related_files))[
                :MAX_FILES
            ],
            importance=self.boosted([float(r["importance"]) for r in members]),
            source=lead.source,
            git_commit=lead.git_commit,
            created_at=now,
            updated_at=now,
            last_accessed=now,
        )
        return Consolidation("sleep", parent, ranked, True, description)

    def _commit_clusters(
        self, batch: Sequence[tuple[Consolidation, list[dict[str, Any]]]], now: datetime
    ) -> list[Consolidation | None]:
        """Commit planned clusters together; None for one whose members changed meanwhile."""
        vectors = self.embedder.embed_documents([p.parent.searchable_text() for p, _ in batch])
        wanted = [m["id"] for _, members in batch for m in members]
        out: list[Consolidation | None] = []
        records: list[ConsolidationRecord] = []
        rows: list[dict[str, Any]] = []
        edges: list[Relationship] = []
        with self.store.write_lock():
            # Re-read under the lock: a member edited or consolidated meanwhile skips its
            # cluster (the next pass sees it afresh) instead of overwriting someone's write.
            current = {r["id"]: r for r in self.store.scan(sql_in("id", wanted))}
            for (planned, members), vector in zip(batch, vectors, strict=True):
                ids = [m["id"] for m in members]
                fresh = [current.pop(i, None) for i in ids]  # popped: one cluster per member
                if any(
                    r is None
                    or r["state"] != State.WORKING.value
                    or r["updated_at"] != m["updated_at"]
                    for r, m in zip(fresh, members, strict=True)
                ):
                    out.append(None)
                    continue
                member_rows, before = self.flip_members([r for r in fresh if r is not None], now)
                links = self.member_edges(planned.parent, ids, "Merged by sleep consolidation")
                record = self.new_record(
                    "sleep", planned.parent, True, before, ids, now, links, planned.description
                )
                records.append(record)
                rows += [memory_to_row(planned.parent, vector), *member_rows]
                edges += links
                planned.record_id = record.id
                out.append(planned)
            if records:
                self.commit(records, rows, edges)
        return out

    # ---- unconsolidate --------------------------------------------------------------------

    def unconsolidate(self, parent_id: str, scopes: Sequence[str]) -> Unconsolidation:
        """Undo the consolidations in force under `parent_id` (visible from `scopes`)."""
        self.repair()
        records = [
            r
            for r in self.log.find(f"parent_id = {sql_str(parent_id)} AND status = {sql_str(DONE)}")
            if r.scope in scopes
        ]
        if not records:
            raise NotFound(
                "parent_id", f"no consolidation in force has parent {parent_id} in this scope"
            )
        restored: list[str] = []
        removed = False
        for record in reversed(records):
            with self.store.write_lock():
                self.log.set_status(REVERTING, record.id)
                _checkpoint("reverting")
                restored += self._revert(record, utcnow())
            removed |= record.parent_synthesised
        return Unconsolidation(parent_id, restored, removed)

    def _revert(self, record: ConsolidationRecord, now: datetime) -> list[str]:
        """Restore members (and a promoted parent) from the record; idempotent."""
        index = {mid: i for i, mid in enumerate(record.member_ids)}
        rows = []
        for row in self.store.scan(sql_in("id", [*record.member_ids, record.parent_id])):
            new = dict(row)
            untouched = row["updated_at"] == record.stamp
            if row["id"] == record.parent_id:
                if record.parent_synthesised or not untouched:
                    continue  # deleted below, or edited since: leave the user's edit alone
                assert record.parent_prev_importance is not None
                new["importance"] = record.parent_prev_importance
                new["updated_at"] = record.parent_prev_updated_at or now
            elif row["state"] == State.CONSOLIDATED.value:
                i = index[row["id"]]
                new["importance"] = record.member_prev_importance[i]
                new["pre_consolidation_importance"] = record.member_prev_pre[i]
                new["state"] = record.member_prev_state[i]
                # The exact old timestamp when nothing touched the row since, so the restored
                # row is the old row; otherwise a fresh one, so every mirror re-reads it.
                new["updated_at"] = record.member_prev_updated_at[i] if untouched else now
            else:
                continue
            rows.append(new)
        delete = f"id = {sql_str(record.parent_id)}" if record.parent_synthesised else None
        if rows or delete:
            self.store.merge_rows(rows, delete_where=delete)
        _checkpoint("restored")
        edges = sql_in("id", record.edge_ids)
        if record.parent_synthesised:
            pid = sql_str(record.parent_id)
            edges += f" OR source_id = {pid} OR target_id = {pid}"
        self.store.delete_relationships(edges)
        _checkpoint("edges_removed")
        self.log.set_status(REVERTED, record.id)
        return [r["id"] for r in rows if r["id"] != record.parent_id]

    # ---- archive --------------------------------------------------------------------------

    def archive(self, scope: str, now: datetime, *, dry_run: bool = False) -> list[str]:
        """Archive `scope`'s memories whose decayed importance has sat at the floor, untouched,
        for `archive_after_days`. Returns their ids."""
        cfg, mcfg = self.config.consolidation, self.config.memory
        anchor = now - timedelta(days=cfg.archive_after_days)
        states = [State.WORKING.value, State.CONSOLIDATED.value]
        where = (
            f"scope = {sql_str(scope)} AND {sql_in('state', states)}"
            f" AND last_accessed <= timestamp {sql_str(anchor.isoformat())}"
            f" AND updated_at <= timestamp {sql_str(anchor.isoformat())}"
        )
        rows = self.store.scan(where, columns=["id", "importance", "last_accessed", "access_count"])
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
            self.store.set_columns(
                f"{sql_in('id', ids)} AND {sql_in('state', states)}",
                {"state": State.ARCHIVED.value, "updated_at": now},
            )
        return ids


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

    def compatible(i: int, k: int) -> bool:
        a, b = conflicts.numbers(rows[i]["content"]), conflicts.numbers(rows[k]["content"])
        return conflicts.compatible(a, b)

    out = []
    for cluster in clusters:
        best: list[int] = []
        for seed in cluster:
            kept = [seed]
            for i in cluster:
                if i != seed and all(compatible(i, k) for k in kept):
                    kept.append(i)
            if len(kept) > len(best):
                best = kept
        if len(best) >= min_size:
            out.append(sorted(best, key=cluster.index))
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
        for cluster in ([pending_of[i] for i in c] for c in found):
            kept = _without_conflicts([cluster], rows, min_size)
            if kept:  # a cluster with nothing mergeable would only come back unchanged
                out += kept
                pending += [i for i in cluster if i not in kept[0]]
    return out


def _cosines(vectors: np.ndarray) -> np.ndarray:
    unit = unit_rows(vectors)
    sims: np.ndarray = unit @ unit.T
    return sims


def _check_sleep_args(threshold: float, min_size: int, max_age_days: float) -> None:
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise InvalidInput("threshold", "must be a number in [0, 1]")
    if not 0.0 <= threshold <= 1.0:
        raise InvalidInput("threshold", f"must be a number in [0, 1], got {threshold}")
    if isinstance(min_size, bool) or not isinstance(min_size, int) or min_size < 2:
        raise InvalidInput("min_size", f"must be an integer >= 2, got {min_size!r}")
    if isinstance(max_age_days, bool) or not isinstance(max_age_days, int | float):
        raise InvalidInput("max_age_days", "must be a positive number of days")
    if not (math.isfinite(max_age_days) and max_age_days > 0):
        raise InvalidInput("max_age_days", f"must be a positive number of days, got {max_age_days}")


__all__ = [
    "ABANDONED",
    "DONE",
    "PENDING",
    "REVERTED",
    "REVERTING",
    "Consolidation",
    "Consolidator",
    "SleepReport",
    "Unconsolidation",
    "f32",
]
