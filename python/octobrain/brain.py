"""`Brain`: the one facade the CLI, the MCP server, benchmarks and tests go through.

A Brain is bound to a scope. It validates input (errors name the field and the rule), embeds,
writes through the store with the scope rule (rows keep their own scope forever), and runs the
hybrid retrieval pipeline. Heavy objects (LanceDB, the model) load on first use.
"""

from __future__ import annotations

import copy
import logging
import threading
import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from octobrain import goals, temporal
from octobrain.access import AccessQueue
from octobrain.config import Config, load_config, resolve_storage_uri
from octobrain.consolidation import Consolidation, Consolidator, SleepReport, Unconsolidation
from octobrain.corpus import LIGHT_COLUMNS, Corpus
from octobrain.embed import Embedder, embedder_from_config
from octobrain.errors import InvalidInput
from octobrain.models import (
    CONTENT_BYTES,
    MAX_TAGS,
    TITLE_BYTES,
    Link,
    Memory,
    MemoryType,
    Relationship,
    RelationshipType,
    State,
    check_id_ref,
    check_limit,
    check_text,
    check_unit,
    clean_files,
    clean_tags,
    parse_links,
    parse_memory_type,
    parse_relationship_type,
    parse_source,
    utcnow,
)
from octobrain.scope import git_head, validate_scope
from octobrain.search import Hit, Retriever, parse_filters, parse_queries
from octobrain.secrets import screen, screen_each
from octobrain.snapshot import SnapshotDir
from octobrain.snapshot import default_root as snapshot_root
from octobrain.store import MemoryStore, NotFound
from octobrain.store.location import StoreLocation, is_remote, redact
from octobrain.store.memories import StoreVersion, sql_str, visible_scopes, visible_where
from octobrain.store.schema import row_to_memory

if TYPE_CHECKING:
    from octobrain.conversation import Conversation
    from octobrain.ingest import IngestReport

log = logging.getLogger(__name__)
ACCESS_WINDOW = timedelta(minutes=10)
_QUEUES: weakref.WeakKeyDictionary[MemoryStore, AccessQueue] = weakref.WeakKeyDictionary()
_QUEUES_LOCK = threading.Lock()
MAX_NEIGHBOURS = 3
MAX_PREFIX_CANDIDATES = 10  # listed when an id prefix is ambiguous


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


class Brain:
    """Memories of one scope (plus the global ones it can see)."""

    def __init__(
        self,
        scope: str,
        *,
        config: Config | None = None,
        embedder: Embedder | None = None,
        uri: str | Path | None = None,
        workdir: Path | None = None,
        session_id: str = "",
    ) -> None:
        self.scope = validate_scope(scope)
        # Memories written through this Brain are linked to the session's earlier ones.
        self.session_id = session_id
        self.config = config if config is not None else load_config()
        self.embedder = embedder if embedder is not None else embedder_from_config(self.config)
        self.uri = str(uri) if uri is not None else resolve_storage_uri(self.config)
        self.workdir = workdir
        self._store: MemoryStore | None = None
        self._retriever: Retriever | None = None
        self._consolidator: Consolidator | None = None

    @property
    def store(self) -> MemoryStore:
        if self._store is None:
            location = StoreLocation.from_config(self.config, self.uri)
            self._store = MemoryStore(location, self.embedder.model_id, self.embedder.dim)
        return self._store

    @property
    def retriever(self) -> Retriever:
        if self._retriever is None:
            corpus = Corpus(
                self.store,
                snapshots=self._snapshots(),
                snapshot_min_rows=self.config.search.snapshot_min_rows,
            )
            self._retriever = Retriever(self.store, corpus, self.embedder, self.config)
        return self._retriever

    def _snapshots(self) -> SnapshotDir | None:
        """Where this machine keeps the mirror's snapshot of this store (None: not kept)."""
        if self.config.search.snapshot_min_rows <= 0:
            return None
        uri = (
            redact(self.uri) if is_remote(self.uri) else str(Path(self.uri).expanduser().resolve())
        )
        return SnapshotDir(snapshot_root(), uri, self.embedder.model_id, self.embedder.dim)

    @property
    def consolidator(self) -> Consolidator:
        if self._consolidator is None:
            self._consolidator = Consolidator(self.store, self.embedder, self.config)
        return self._consolidator

    def for_scope(
        self, scope: str, *, workdir: Path | None = None, session_id: str | None = None
    ) -> Brain:
        """A Brain for another scope sharing this one's config, embedder, store and index.

        The store and the retriever take the scope per call, so one process (the MCP server)
        can serve many scopes from one LanceDB connection and one in-memory corpus.
        """
        other = Brain(
            scope,
            config=self.config,
            embedder=self.embedder,
            uri=self.uri,
            workdir=workdir,
            session_id=self.session_id if session_id is None else session_id,
        )
        other._store, other._retriever = self.store, self.retriever
        other._consolidator = self._consolidator
        return other

    def warm_up(self) -> None:
        """Load the model and open the store and its mirror now rather than on first use."""
        self.embedder.embed_query("warm up")
        self.retriever.corpus.refresh()

    def _write_scope(self, global_: bool) -> str:
        return "" if global_ else self.scope

    # ---- memorize -------------------------------------------------------------------------

    def memorize(
        self,
        title: str,
        content: str,
        *,
        memory_type: str | MemoryType | None = None,
        importance: float | None = None,
        tags: Sequence[str] | None = None,
        related_files: Sequence[str] | None = None,
        source: str | None = None,
        related_to: Sequence[object] | None = None,
        global_: bool = False,
    ) -> tuple[Memory, list[Relationship]]:
        """Store a memory (and its links, all in the memory's scope). Returns both.

        A `closes` link to a `goal` closes it in the same call: the goal's working findings
        (memories that `achieves` it, in this memory's scope) become `consolidated` under this
        memory, whose importance rises to max(findings) x goal_parent_boost (never lowered);
        the returned links then include the `consolidated_from` edges.
        """
        memory = Memory(
            title=self._text("title", title, TITLE_BYTES),
            content=self._text("content", content, CONTENT_BYTES),
            memory_type=parse_memory_type(memory_type),
            importance=(
                self.config.memory.default_importance
                if importance is None
                else check_unit("importance", importance)
            ),
            tags=self._each("tags", clean_tags(tags)),
            related_files=self._each("related_files", clean_files(related_files)),
            source=parse_source(source),
            scope=self._write_scope(global_),
            git_commit=git_head(self.workdir),
        )
        policy = self.config.memory.secrets
        links = [
            replace(
                link,
                target_id=self.resolve_id(link.target_id, f"related_to[{i}].target_id"),
                description=screen(f"related_to[{i}].description", link.description, policy),
            )
            for i, link in enumerate(parse_links(related_to))
        ]
        targets = self._require_visible([link.target_id for link in links], "related_to")
        previous = self._join_session(memory)
        edges = [
            Relationship(
                memory.id,
                link.target_id,
                link.relationship_type,
                link.strength,
                link.description,
                memory.scope,
            )
            for link in links
        ]
        if previous is not None:
            edges.append(temporal.same_session_link(memory, previous))
        vector = self.embedder.embed_documents([memory.embedded_text()])
        closed = [
            targets[link.target_id]
            for link in links
            if link.relationship_type is RelationshipType.CLOSES
            and targets[link.target_id].memory_type is MemoryType.GOAL
        ]
        if closed:
            return goals.close_goal_with_new(self.consolidator, closed[0], memory, vector[0], edges)
        self.store.add([memory], vector, edges)
        return memory, edges

    def ingest(
        self,
        conversations: Sequence[Conversation],
        *,
        global_: bool = False,
        progress: Callable[[int], None] = lambda _n: None,
    ) -> IngestReport:
        """Store conversations turn by turn (see `octobrain.ingest`); turns already stored are
        skipped, so ingesting a transcript again adds only what is new."""
        from octobrain.ingest import ingest

        return ingest(self, conversations, global_=global_, progress=progress)

    def _join_session(self, memory: Memory) -> Memory | None:
        """Tag `memory` with this Brain's session; return the session's previous memory."""
        tag = temporal.session_tag(self.session_id)
        if not tag or len(memory.tags) >= MAX_TAGS:
            return None  # a memory with a full tag list simply stays unlinked
        previous = temporal.previous_in_session(
            self.retriever.corpus, tag, visible_scopes(self.scope)
        )
        memory.tags.append(tag)
        return previous

    def _text(self, field: str, value: object, bounds: tuple[int, int]) -> str:
        """A checked text field after the `memory.secrets` policy (refuse, redact or allow)."""
        text = screen(field, check_text(field, value, bounds), self.config.memory.secrets)
        return check_text(field, text, bounds)  # a redaction can change the length

    def _each(self, field: str, values: list[str]) -> list[str]:
        """A checked list field after the `memory.secrets` policy."""
        return screen_each(field, values, self.config.memory.secrets)

    def _require_visible(self, ids: Sequence[str], field: str) -> dict[str, Memory]:
        found = self.store.get_many(list(ids), self.scope)
        for i, mid in enumerate(ids):
            if mid not in found:
                raise InvalidInput(
                    f"{field}[{i}].target_id", f"no memory {mid} is visible from this scope"
                )
        return found

    # ---- remember -------------------------------------------------------------------------

    def remember(
        self,
        query: str | Sequence[str],
        *,
        memory_types: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        related_files: Sequence[str] | None = None,
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
        filters = replace(filters, include_archived=bool(include_archived))
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
            queries, self.scope, filters, limit=limit, min_relevance=threshold, now=now
        )
        neighbours = self._neighbours(hits, include_archived=filters.include_archived)
        if self.config.brief.session_neighbour and hits:
            neighbours += self._session_neighbour(hits, neighbours)
        corpus = self.retriever.corpus
        due = corpus.due_for_access([h.memory.id for h in hits], now, ACCESS_WINDOW)
        if record_access and due:
            self._access_queue().add(due, now, corpus)
        return Recall(hits, neighbours, self.scope)

    def flush(self) -> None:
        """Commit the access counts `remember` queued (see `octobrain.access`) now, instead of
        within the next second; also done when the process exits."""
        with _QUEUES_LOCK:
            queue = _QUEUES.get(self.store)
        if queue is not None:
            queue.flush()

    def _access_queue(self) -> AccessQueue:
        with _QUEUES_LOCK:  # one queue per store, shared by every scope's Brain on it
            queue = _QUEUES.get(self.store)
            if queue is None:
                queue = _QUEUES[self.store] = AccessQueue(self.store, ACCESS_WINDOW)
            return queue

    def _neighbours(self, hits: list[Hit], *, include_archived: bool = False) -> list[Neighbour]:
        """Up to 3 one-hop neighbours of the results, best results first, from the mirror."""
        corpus = self.retriever.corpus
        result_ids = {h.memory.id for h in hits}
        scopes = visible_scopes(self.scope)
        out: list[Neighbour] = []
        taken: set[str] = set()
        for hit in hits:
            for rel in corpus.edges([hit.memory.id]):
                if rel.relationship_type is RelationshipType.SAME_SESSION:
                    continue  # at most one, added by _session_neighbour
                outgoing = rel.source_id == hit.memory.id
                other = rel.target_id if outgoing else rel.source_id
                pos = corpus.pos_of.get(other)
                if other in result_ids or other in taken or pos is None:
                    continue
                memory = copy.copy(corpus.memory(pos))
                if memory.scope not in scopes or (
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

    def _session_neighbour(self, hits: list[Hit], shown: list[Neighbour]) -> list[Neighbour]:
        """At most one memory from the same session as a result, labelled `same_session`."""
        ids = [h.memory.id for h in hits]
        found = temporal.same_session_partner(
            self.retriever.corpus,
            ids,
            set(ids) | {n.memory.id for n in shown},
            visible_scopes(self.scope),
        )
        if found is None:
            return []
        rel, memory, via = found
        outgoing = rel.source_id == via
        return [Neighbour(copy.copy(memory), rel.relationship_type, outgoing, rel.strength, via)]

    # ---- forget, update, get --------------------------------------------------------------

    def resolve_id(self, memory_id: object, field_name: str = "memory_id") -> str:
        """The full id meant by `memory_id`: a full UUID as it is, or the one memory visible
        from this scope whose id starts with the given prefix (at least 8 hex digits). No
        match is `NotFound`; several are an error listing them."""
        value, full = check_id_ref(memory_id, field_name=field_name)
        if full:
            return value
        found = self.store.ids_with_prefix(value, self.scope, MAX_PREFIX_CANDIDATES + 1)
        if not found:
            raise NotFound(
                field_name,
                f"no memory id starting with {value} is visible from scope "
                f"{self.scope or '(global)'!r}",
            )
        if len(found) > 1:
            shown = "; ".join(f"{mid} {title}" for mid, title in found[:MAX_PREFIX_CANDIDATES])
            count = (
                f"more than {MAX_PREFIX_CANDIDATES}"
                if len(found) > MAX_PREFIX_CANDIDATES
                else str(len(found))
            )
            raise InvalidInput(
                field_name,
                f"{value} is ambiguous, {count} memories start with it: {shown}; give more digits",
            )
        return found[0][0]

    def get(self, memory_id: str, field_name: str = "memory_id") -> Memory:
        """A memory visible from this scope, by full id or unique prefix."""
        return self.store.get(self.resolve_id(memory_id, field_name), self.scope)

    def forget_preview(
        self,
        query: str | Sequence[str],
        *,
        memory_types: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
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

    def forget(self, memory_ids: Sequence[str], *, confirm: bool) -> int:
        """Delete memories (and their edges). Needs `confirm=True`. They stay in the store's kept
        versions (`history` / `restore`) for `KEEP_VERSIONS_DAYS`.

        Every id must be visible from this scope (the read rule: own scope plus global); an
        invisible or unknown id is an error and nothing is deleted.
        """
        if confirm is not True:
            raise InvalidInput("confirm", "must be true to delete (nothing was deleted)")
        ids = [self.resolve_id(m, f"memory_id[{i}]") for i, m in enumerate(memory_ids)]
        found = self.store.get_many(ids, self.scope)
        for i, mid in enumerate(ids):
            if mid not in found:
                raise NotFound(f"memory_id[{i}]", f"no memory {mid} is visible from this scope")
        return self.store.delete(ids)

    def update(
        self,
        memory_id: str,
        *,
        title: str | None = None,
        content: str | None = None,
        memory_type: str | None = None,
        importance: float | None = None,
        add_tags: Sequence[str] = (),
        remove_tags: Sequence[str] = (),
        add_files: Sequence[str] = (),
        remove_files: Sequence[str] = (),
    ) -> Memory:
        """Edit a memory in place. Its scope never changes; text edits re-embed it.

        Read, edit and write happen under the store's write lock, so a concurrent edit (another
        process's update, a consolidation) is never overwritten by this one.
        """
        with self.store.write_lock():
            return self._update_locked(
                memory_id,
                title,
                content,
                memory_type,
                importance,
                add_tags,
                remove_tags,
                add_files,
                remove_files,
            )

    def _update_locked(
        self,
        memory_id: str,
        title: str | None,
        content: str | None,
        memory_type: str | None,
        importance: float | None,
        add_tags: Sequence[str],
        remove_tags: Sequence[str],
        add_files: Sequence[str],
        remove_files: Sequence[str],
    ) -> Memory:
        current = self.get(memory_id)
        tags = [t for t in current.tags if t not in set(remove_tags)] + list(add_tags)
        files = [f for f in current.related_files if f not in set(remove_files)] + list(add_files)
        updated = replace(
            current,
            title=current.title if title is None else self._text("title", title, TITLE_BYTES),
            content=current.content
            if content is None
            else self._text("content", content, CONTENT_BYTES),
            memory_type=current.memory_type
            if memory_type is None
            else parse_memory_type(memory_type),
            importance=current.importance
            if importance is None
            else check_unit("importance", importance),
            tags=self._each("tags", clean_tags(tags)),
            related_files=self._each("related_files", clean_files(files)),
            updated_at=utcnow(),
        )
        vector = self.embedder.embed_documents([updated.embedded_text()])
        self.store.replace(updated, vector[0])
        return updated

    def relate(
        self,
        source_id: str,
        target_id: str,
        relationship_type: str = "related_to",
        *,
        strength: float = 0.8,
        description: str = "",
    ) -> Relationship:
        """Link two visible memories; the edge lives in the source memory's scope."""
        src, tgt = self.resolve_id(source_id, "source_id"), self.resolve_id(target_id, "target_id")
        found = self.store.get_many([src, tgt], self.scope)
        for name, mid in (("source_id", src), ("target_id", tgt)):
            if mid not in found:
                raise InvalidInput(name, f"no memory {mid} is visible from this scope")
        if src == tgt:
            raise InvalidInput("target_id", "must differ from source_id")
        link = Link(
            tgt,
            parse_relationship_type(relationship_type),
            check_unit("strength", strength),
            description,
        )
        link = replace(
            link, description=screen("description", link.description, self.config.memory.secrets)
        )
        rel = Relationship(
            src, tgt, link.relationship_type, link.strength, link.description, found[src].scope
        )
        self.store.add_relationships([rel])
        return rel

    # ---- consolidation --------------------------------------------------------------------

    def sleep_consolidate(
        self,
        *,
        threshold: float | None = None,
        min_size: int | None = None,
        max_age_days: float | None = None,
        dry_run: bool = False,
    ) -> SleepReport:
        """One sleep pass over this scope's own rows (never other scopes, never global rows from
        a project): merge clusters of recent near-duplicates (true cosine ≥ `threshold`, complete
        linkage, one trust tier each), then archive long-faded memories. Defaults come from
        `[consolidation]`. `dry_run` reports what would change and writes nothing."""
        cfg = self.config.consolidation
        now = utcnow()
        report = self.consolidator.sleep(
            self.scope,
            threshold=cfg.threshold if threshold is None else threshold,
            min_size=cfg.min_cluster_size if min_size is None else min_size,
            max_age_days=cfg.max_age_days if max_age_days is None else max_age_days,
            now=now,
            dry_run=dry_run,
        )
        if cfg.archive_enabled:
            report.archived = self.consolidator.archive(self.scope, now, dry_run=dry_run)
        return report

    def consolidate_goal(self, goal_id: str) -> Consolidation:
        """Close a goal by hand: its working findings in this scope are consolidated under the
        newest memory that `closes` it, or under a synthesised summary when none does."""
        goal = self.get(goal_id, "goal_id")
        if goal.memory_type is not MemoryType.GOAL:
            raise InvalidInput(
                "goal_id", f"memory {goal.id} is a {goal.memory_type.value}, not a goal"
            )
        return goals.close_goal(self.consolidator, goal, self.scope, utcnow())

    def unconsolidate(self, parent_id: str) -> Unconsolidation:
        """Undo the consolidations under `parent_id`: members get back their exact state and
        importance, a synthesised parent is deleted, a promoted one gets its importance back."""
        pid = self.resolve_id(parent_id, "parent_id")
        return self.consolidator.unconsolidate(pid, visible_scopes(self.scope))

    def history(self, limit: int = 20) -> list[StoreVersion]:
        """The store's kept versions, newest first (the undo history of every write)."""
        return self.store.history(check_limit(limit, maximum=10_000))

    def restore(self, version: int, *, confirm: bool) -> StoreVersion:
        """Return the WHOLE store (every scope) to an earlier version; needs `confirm=True`.
        The restore is itself a new version, so it can be undone the same way."""
        if confirm is not True:
            raise InvalidInput("confirm", "must be true to restore (nothing was changed)")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise InvalidInput("version", f"must be a version number >= 1, got {version!r}")
        return self.store.restore(version)

    def visible_scopes(self) -> list[str]:
        """Scopes this brain reads."""
        return visible_scopes(self.scope)

    # ---- listings (never count as accesses) -----------------------------------------------

    def recent(self, limit: int = 20, memory_type: str | None = None) -> list[Memory]:
        """The newest visible memories, newest first."""
        limit = check_limit(limit, maximum=10_000)
        where = visible_where(self.scope)
        if memory_type is not None:
            where += f" AND memory_type = {sql_str(parse_memory_type(memory_type).value)}"
        memories = [row_to_memory(r) for r in self.store.scan(where, columns=LIGHT_COLUMNS)]
        memories.sort(key=lambda m: (m.created_at, m.id), reverse=True)
        return memories[:limit]

    def stats(self) -> dict[str, object]:
        """Counts of the visible memories by scope, type, state and trust tier."""
        rows = self.store.scan(
            visible_where(self.scope, include_archived=True),
            columns=["scope", "memory_type", "state", "source"],
        )

        def tally(key: str) -> dict[str, int]:
            return dict(Counter(str(r[key]) for r in rows).most_common())

        return {
            "scope": self.scope,
            "total": len(rows),
            "by_scope": tally("scope"),
            "by_type": tally("memory_type"),
            "by_state": tally("state"),
            "by_source": tally("source"),
            "embedding_model": self.embedder.model_id,
            "store": self.uri,
        }

    def graph(self, memory_id: str, depth: int = 2) -> tuple[list[Memory], list[Relationship]]:
        """Memories reachable from `memory_id` within `depth` edges (either direction)."""
        if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= 5:
            raise InvalidInput("depth", f"must be an integer in [1, 5], got {depth!r}")
        start = self.get(memory_id)
        seen = {start.id: start}
        edges: dict[str, Relationship] = {}
        frontier = [start.id]
        for _ in range(depth):
            rels = self.store.relationships_of(frontier)
            others = {r.target_id if r.source_id in frontier else r.source_id for r in rels}
            found = self.store.get_many([o for o in others if o not in seen], self.scope)
            for rel in rels:
                if rel.source_id in seen | found and rel.target_id in seen | found:
                    edges[rel.id] = rel
            seen.update(found)
            frontier = list(found)
            if not frontier:
                break
        return list(seen.values()), sorted(edges.values(), key=lambda r: r.created_at)
