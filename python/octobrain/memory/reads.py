"""`Brain`'s read path: `remember` (hybrid search over the mirror, graph and session
neighbours, access counting off the request path) and listings that never count as accesses."""

from __future__ import annotations

import copy
import threading
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from octobrain.errors import InvalidInput, OctobrainError, as_json
from octobrain.field_checks import check_flag, check_id_ref, check_limit, check_strings, check_unit
from octobrain.memory import snapshot_reads, temporal
from octobrain.memory.access import AccessQueue
from octobrain.memory.corpus_io import LIGHT_COLUMNS
from octobrain.memory.query import parse_filters, parse_queries
from octobrain.memory.search import Empty, Hit
from octobrain.models import Memory, Relationship, RelationshipType, State, parse_memory_type
from octobrain.store import MemoryStore, NotFound
from octobrain.store.memories import invisible
from octobrain.store.schema import CHECKED, CHECKSUM, first_damaged, row_to_memory
from octobrain.store.sql import sql_str
from octobrain.times import utcnow

if TYPE_CHECKING:
    from octobrain.memory.corpus import Corpus

from octobrain.memory.core import MAX_PREFIX_CANDIDATES, BrainBase

ACCESS_WINDOW = timedelta(minutes=10)
_QUEUES: weakref.WeakKeyDictionary[MemoryStore, AccessQueue] = weakref.WeakKeyDictionary()
_QUEUES_LOCK = threading.Lock()
MAX_NEIGHBOURS = 3
# Edges of one type looked at per result for its neighbours: enough to find three past the
# ones skipped (other results, other scopes, archived), not the thousands a hub may have.
EDGES_PER_KIND = 64


@dataclass(frozen=True)
class Neighbour:
    """A memory one edge away from a result."""

    memory: Memory
    relationship_type: RelationshipType
    outgoing: bool  # True: result → neighbour; False: neighbour → result
    strength: float
    via: str  # id of the result it hangs off


@dataclass(frozen=True)
class Recall:
    """What `remember` returns: ranked hits plus graph context."""

    hits: list[Hit]
    neighbours: list[Neighbour]
    scope: str
    empty: Empty = Empty.NONE  # without hits: what excluded the candidates


class Reads(BrainBase):
    """Finding memories: search, neighbours, listings, the graph."""

    def remember(
        self,
        query: str | Iterable[str],
        *,
        memory_types: Iterable[str] | None = None,
        tags: Iterable[str] | None = None,
        related_files: Iterable[str] | None = None,
        created_after: str | datetime | None = None,
        created_before: str | datetime | None = None,
        min_relevance: float | None = None,
        limit: int | None = None,
        record_access: bool = True,
        include_archived: bool = False,
    ) -> Recall:
        """Hybrid search; only memories at least `min_relevance` relevant come back.
        Archived memories are searched only with `include_archived=True`."""
        queries = parse_queries(query)
        filters = parse_filters(memory_types, tags, related_files, created_after, created_before)
        archived = check_flag("include_archived", include_archived)
        filters = replace(filters, include_archived=archived)
        record_access = check_flag("record_access", record_access)
        limit = check_limit(
            self.config.search.default_limit if limit is None else limit,
            maximum=self.config.search.max_results,
        )
        threshold = (
            self.config.search.min_relevance
            if min_relevance is None
            else check_unit("min_relevance", min_relevance)
        )
        now = utcnow()
        hits = self.retriever.search(
            queries, self.sight, filters, limit=limit, min_relevance=threshold, now=now
        )
        if not hits:
            empty = self.retriever.why_empty(
                queries, self.sight, filters, min_relevance=threshold, now=now
            )
            return Recall([], [], self.scope, empty)
        corpus = self.retriever.corpus
        # One pass over the edges for every result, shared by both neighbour passes.
        edges = corpus.edges_by_node([h.memory.id for h in hits], EDGES_PER_KIND)
        neighbours = self._neighbours(hits, edges, include_archived=filters.include_archived)
        if self.config.brief.session_neighbour and hits:
            neighbours += self._session_neighbour(hits, edges, neighbours)
        due = corpus.due_for_access([h.memory.id for h in hits], now, ACCESS_WINDOW)
        if record_access and due:
            self.count_access(due, now)
        return Recall(hits, neighbours, self.scope)

    def count_access(self, ids: Iterable[str], now: datetime) -> None:
        """Count one access to each of `ids` (committed off the caller's path, as
        `remember`'s are) at `now`, a timezone-aware time."""
        ids = check_strings("ids", ids)
        if not isinstance(now, datetime) or now.tzinfo is None:
            raise InvalidInput("now", f"must be a timezone-aware datetime, got {now!r}")
        self._access_queue().add(ids, now, self.retriever.corpus)

    def flush(self, *, keep: bool = False) -> None:
        """Commit the access counts `remember` queued (`memory.access`) now, instead of
        within the next second; also done when the process exits. `keep`: leave them for the
        next process that opens the tables instead, where this one may (`AccessQueue.flush`)."""
        keep = check_flag("keep", keep)
        with _QUEUES_LOCK:
            queue = _QUEUES.get(self.store)
        if queue is not None:
            queue.flush(keep=keep)

    def _let_go(self) -> None:
        """(`Closable`) The access counts queued committed and the queue's thread ended first."""
        if self._store is not None:
            with _QUEUES_LOCK:
                queue = _QUEUES.get(self._store)
            if queue is not None:
                queue.stop()
        super()._let_go()

    def _access_queue(self) -> AccessQueue:
        with _QUEUES_LOCK:  # one queue per store, shared by every scope's Brain on it
            queue = _QUEUES.get(self.store)
            if queue is None:
                queue = _QUEUES[self.store] = AccessQueue(self.store, ACCESS_WINDOW)
            return queue

    def _neighbours(
        self,
        hits: list[Hit],
        edges: dict[str, list[Relationship]],
        *,
        include_archived: bool = False,
    ) -> list[Neighbour]:
        """Up to 3 one-hop neighbours of the results, best results first, from the mirror
        (`edges`: the edges touching each result, `Corpus.edges_by_node`)."""
        corpus = self.retriever.corpus
        result_ids = {h.memory.id for h in hits}
        out: list[Neighbour] = []
        taken: set[str] = set()
        for hit in hits:
            for rel in edges.get(hit.memory.id, ()):
                if rel.relationship_type is RelationshipType.SAME_SESSION:
                    continue  # at most one, added by _session_neighbour
                outgoing = rel.source_id == hit.memory.id
                other = rel.target_id if outgoing else rel.source_id
                pos = corpus.pos_of.get(other)
                if other in result_ids or other in taken or pos is None:
                    continue
                memory = copy.copy(corpus.memory(pos))
                if not self.sight.sees(memory.scope, memory.role) or (
                    memory.state is State.ARCHIVED and not include_archived
                ):
                    continue
                taken.add(other)
                out.append(
                    Neighbour(memory, rel.relationship_type, outgoing, rel.strength, hit.memory.id)
                )
                if len(out) == MAX_NEIGHBOURS:
                    return out
        return out

    def _session_neighbour(
        self, hits: list[Hit], edges: dict[str, list[Relationship]], shown: list[Neighbour]
    ) -> list[Neighbour]:
        """At most one memory from the same session as a result, labelled `same_session`."""
        ids = [h.memory.id for h in hits]
        found = temporal.same_session_partner(
            self.retriever.corpus,
            edges,
            ids,
            set(ids) | {n.memory.id for n in shown},
            self.sight,
        )
        if found is None:
            return []
        rel, memory, via = found
        outgoing = rel.source_id == via
        return [Neighbour(copy.copy(memory), rel.relationship_type, outgoing, rel.strength, via)]

    def forget_targets(self, memory_ids: Sequence[str]) -> tuple[list[Memory], set[str]]:
        """The memories a forget by id would delete (full ids or unique prefixes), and which
        of them no longer match their checksum: forgetting one is its repair, so it is taken
        unchecked, and its text is for no one to show (`schema.DAMAGED_TITLE`).

        However many ids, two reads: one of every prefix's candidates, one of the memories
        (`store.by_id.ID_BATCH` ids a read); an id is refused as `get` refuses it, the first in
        order."""
        from octobrain.store.schema import RowDamaged

        refs: list[tuple[str, bool] | OctobrainError] = []
        for memory_id in memory_ids:
            try:
                refs.append(check_id_ref(memory_id))
            except InvalidInput as exc:
                refs.append(exc)
        prefixes = sorted({ref[0] for ref in refs if isinstance(ref, tuple) and not ref[1]})
        candidates = self.store.ids_with_prefixes(prefixes, self.sight)
        ids = [
            ref if isinstance(ref, OctobrainError) else self._one(ref, candidates) for ref in refs
        ]
        rows = self.store.rows_by_id([i for i in ids if isinstance(i, str)], self.sight)
        targets, damaged = [], set()
        for resolved in ids:
            if isinstance(resolved, OctobrainError):
                raise resolved
            memory_id = resolved
            if memory_id not in rows:
                raise NotFound("memory_id", invisible(memory_id, self.sight))
            try:
                targets.append(row_to_memory(rows[memory_id]))
            except RowDamaged:
                targets.append(row_to_memory(rows[memory_id], checked=False))
                damaged.add(memory_id)
        return targets, damaged

    def _one(
        self, ref: tuple[str, bool], candidates: dict[str, list[tuple[str, str]]]
    ) -> str | OctobrainError:
        """The full id `ref` names, or the error `resolve_id` would raise for it."""
        value, full = ref
        if full:
            return value
        try:
            return self.one_candidate(value, candidates[value], "memory_id")
        except OctobrainError as exc:
            return exc

    def forget_preview(
        self,
        query: str | Iterable[str],
        *,
        memory_types: Iterable[str] | None = None,
        tags: Iterable[str] | None = None,
        limit: int | None = None,
        min_relevance: float | None = None,
    ) -> list[Memory]:
        """The memories a query-mode forget would delete: exactly what `remember` returns."""
        recall = self.remember(
            query,
            memory_types=memory_types,
            tags=tags,
            limit=limit or self.config.search.max_results,
            min_relevance=min_relevance,
            record_access=False,
        )
        return [h.memory for h in recall.hits]

    def recent(self, limit: int = 20, memory_type: str | None = None) -> list[Memory]:
        """The newest visible memories, newest first (from the mirror where it serves them:
        `memory.snapshot_reads.mirrored`)."""
        limit = check_limit(limit, maximum=10_000)
        kind = None if memory_type is None else parse_memory_type(memory_type).value

        def newest(c: Corpus) -> list[Memory]:
            return snapshot_reads.newest(c, self.sight, kind, limit)

        served = snapshot_reads.mirrored(self.retriever.corpus, newest)
        if served is not None:
            return served
        where = self.sight.where()
        if kind is not None:
            where += f" AND memory_type = {sql_str(kind)}"
        # Ordered in Arrow, and only the rows listed made into memories (and checked): making
        # and checking all 10,000 of a scope took a new process 0.3 s of its 0.85 s of CPU.
        rows = self.store.scan_arrow(where, columns=LIGHT_COLUMNS)
        listed = rows.take(snapshot_reads.newest_first(rows, limit))
        return [row_to_memory(r) for r in listed.to_pylist()]

    def stats(self) -> dict[str, object]:
        """Counts of the visible memories by scope, type, state and trust tier, each the
        most first, ties by name (the same whichever order the store or the mirror read them
        in), and of the links that no longer match their checksum."""
        # A memory that no longer matches its checksum is counted as damaged, never by what
        # its type or scope reads as (the caller says so and where to look: `doctor`). The
        # links are checked whole, every scope's (from the store ~5 ms at 10,000 memories, from
        # the snapshot under 1); a file of theirs gone or cut fails the read, which names it.
        names = ["id", "scope", "role", "memory_type", "state", "source"]
        counted = snapshot_reads.mirrored(
            self.retriever.corpus, lambda c: snapshot_reads.counted(c, self.sight, names)
        )
        if counted is None:
            read = self.store.scan_arrow(
                self.sight.where(include_archived=True),
                columns=list(dict.fromkeys([*names, *CHECKED, CHECKSUM])),
            )
            counted = read, snapshot_reads.garbled(read), self.store.damaged_links()
        rows, garbled, links = counted
        tally = snapshot_reads.tallied
        return {
            "scope": self.scope,
            "total": rows.num_rows,
            "by_scope": tally(rows, "scope", garbled),
            "role": self.role,
            "by_role": tally(rows, "role", garbled),
            "by_type": tally(rows, "memory_type", garbled),
            "by_state": tally(rows, "state", garbled),
            "by_source": tally(rows, "source", garbled),
            "embedding_model": self.embedder.model_id,
            "store": self.uri,
            "damaged": len(garbled),
            "damaged_ids": first_damaged(str(rows.column("id")[i]) for i in garbled),
            "damaged_links": len(links),
            "damaged_link_ids": first_damaged(links),
        }

    def show(self, memory_id: str) -> Memory:
        """`get` (checked), answered from the mirror as the store would answer it, in a
        process that has not opened LanceDB when a current snapshot serves it, and in one that
        holds the mirror (`memory.snapshot_reads`). Not an access (nor is `recent`)."""
        value, full = check_id_ref(memory_id)

        def read(corpus: Corpus) -> Memory | None:
            found = value
            if not full:
                listed = snapshot_reads.with_prefix(
                    corpus, value, self.sight, MAX_PREFIX_CANDIDATES + 1
                )
                if listed is None:
                    return None
                found = self.one_candidate(value, listed, "memory_id")
            shown = snapshot_reads.memory(corpus, found, self.sight)
            if shown is None:
                raise NotFound("memory_id", invisible(found, self.sight))
            return shown

        shown = snapshot_reads.mirrored(self.retriever.corpus, read)
        return self.get(memory_id) if shown is None else shown

    def graph(self, memory_id: str, depth: int = 2) -> tuple[list[Memory], list[Relationship]]:
        """Memories reachable from `memory_id` within `depth` edges (either direction)."""
        if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= 5:
            raise InvalidInput("depth", f"must be an integer in [1, 5], got {as_json(depth)}")
        start = self.get(memory_id)
        seen = {start.id: start}
        edges: dict[str, Relationship] = {}
        frontier = [start.id]
        for _ in range(depth):
            rels = self.store.relationships_of(frontier)
            at = set(frontier)  # (sets: a list and a merged dict per edge were quadratic)
            others = {r.target_id if r.source_id in at else r.source_id for r in rels}
            found = self.store.get_many([o for o in others if o not in seen], self.sight)
            seen.update(found)
            for rel in rels:
                if rel.source_id in seen and rel.target_id in seen:
                    edges[rel.id] = rel
            frontier = list(found)
            if not frontier:
                break
        return list(seen.values()), sorted(edges.values(), key=lambda r: r.created_at)
