"""`Brain`'s write path: memorize (with links, session chaining and goal closing), ingest,
relate and forget (an edit in place: `memory.edits`). Every text passes the secrets policy;
every id must be visible."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, NamedTuple, cast

from octobrain.embed.base import ahead
from octobrain.errors import InvalidInput, as_json
from octobrain.field_checks import check_flag, check_list, check_unit
from octobrain.memory import copies, goals, temporal
from octobrain.memory.conversation import is_turn
from octobrain.memory.copies import Stored
from octobrain.memory.links import Link, link_description, parse_links
from octobrain.models import (
    CONTENT_BYTES,
    MAX_TAGS,
    TITLE_BYTES,
    UNLINKABLE,
    Memory,
    MemoryType,
    Relationship,
    RelationshipType,
    clean_files,
    clean_tags,
    parse_link_type,
    parse_memory_type,
    parse_relationship_type,
    parse_source,
)
from octobrain.safe_text import check_lines, check_one_line
from octobrain.scope import git_head
from octobrain.secrets import screen
from octobrain.store import NotFound, forgotten
from octobrain.store.link_rules import ONE_GOAL, self_link_rule
from octobrain.times import utcnow

if TYPE_CHECKING:
    import numpy as np

    from octobrain.memory.brain import Brain
    from octobrain.memory.consolidation import Consolidation
    from octobrain.memory.conversation import Conversation
    from octobrain.memory.ingest import IngestReport

from octobrain.memory.core import BrainBase


class Linked(NamedTuple):
    """What `link` did: the edge (made, or the one already there), the `conflicts` edges
    between its two memories a `supersedes` link replaced (a dispute it settled), and the
    goal's consolidation a `closes` link made (None when it closed nothing)."""

    edge: Relationship
    settled: tuple[Relationship, ...] = ()
    closed: Consolidation | None = None


class Writes(BrainBase):
    """Writing memories and links in this Brain's scope."""

    def memorize(
        self,
        title: str,
        content: str,
        *,
        memory_type: str | MemoryType | None = None,
        importance: float | None = None,
        tags: Iterable[str] | None = None,
        related_files: Iterable[str] | None = None,
        source: str | None = None,
        related_to: Sequence[object] | None = None,
        global_: bool = False,
    ) -> Stored:
        """Store a memory (and its links, all in the memory's scope). Returns both (`Stored`).
        A memory of this scope with the same type, title and content is not stored twice:
        the answer is that memory, with what this call adds merged into it (`memory.copies`).

        A `closes` link to a `goal` closes it in the same call: the goal's working findings
        (memories that `achieves` it, in this memory's scope and role: another role's words
        are never under it) become `consolidated` under this
        memory, whose importance rises to max(findings) x goal_parent_boost (never lowered);
        the returned links then include the `consolidated_from` edges.
        """
        self.embedder.prepare()  # loads while the checks below open the store
        checked_title = self._text("title", title, TITLE_BYTES)  # (a credential named first)
        check_one_line("title", checked_title)
        # (a set or a generator as a list first: each item is checked, a set's in sorted order)
        tags = None if tags is None else check_list("tags", tags)
        related_files = (
            None if related_files is None else check_list("related_files", related_files)
        )
        check_lines("tags", tags)
        check_lines("related_files", related_files)
        memory = Memory(
            title=checked_title,
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
            scope=self._write_scope(check_flag("global_", global_)),
            role=self.role,
            git_commit=git_head(self.workdir),
        )
        session = self._session_tag(memory)
        # Embedded alongside what follows: the checks below read the mirror and the store opens.
        text = memory.embedded_text()
        vector = ahead(lambda: self.embedder.embed_documents([text]))
        policy = self.config.memory.secrets
        links = [
            replace(
                link,
                target_id=self.resolve_id(link.target_id, f"related_to[{i}].target_id"),
                description=screen(f"related_to[{i}].description", link.description, policy),
            )
            for i, link in enumerate(parse_links(related_to))
        ]
        # (Checked before duplicates go, so a refusal names the link by its place as given.)
        targets = self._require_visible([link.target_id for link in links], "related_to")
        for i, link in enumerate(links):
            if link.relationship_type is RelationshipType.CLOSES:
                _closes_a_goal(targets[link.target_id], f"related_to[{i}].relationship_type")
        closing = [
            (i, link.target_id)
            for i, link in enumerate(links)
            if link.relationship_type is RelationshipType.CLOSES
            and targets[link.target_id].memory_type is MemoryType.GOAL
        ]
        for i, goal_id in closing:  # (only the first was closed; the others stayed open)
            if goal_id != closing[0][1]:
                raise InvalidInput(
                    f"related_to[{i}]",
                    f"closes a second goal; {ONE_GOAL}",
                )
        # The same link named twice (by two id prefixes, say) is one edge, the first given.
        unique: dict[tuple[str, RelationshipType], Link] = {}
        for link in links:
            unique.setdefault((link.target_id, link.relationship_type), link)
        # A memory this one supersedes is settled, not in conflict with it: the two edges
        # said both (ranked as replaced, reported as disputed).
        replaced = {t for t, kind in unique if kind is RelationshipType.SUPERSEDES}
        links = [
            link
            for (target, kind), link in unique.items()
            if not (kind is RelationshipType.CONFLICTS and target in replaced)
        ]
        previous = (
            temporal.previous_in_session(self.retriever.corpus, session, self.sight)
            if session
            else None
        )
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
        self.store.open()  # (if nothing above did) while the text is embedded
        closed = [
            targets[link.target_id]
            for link in links
            if link.relationship_type is RelationshipType.CLOSES
            and targets[link.target_id].memory_type is MemoryType.GOAL
        ]
        if closed:
            return Stored(
                *goals.close_goal_with_new(self.consolidator, closed[0], memory, vector()[0], edges)
            )
        embedding = vector()  # (before the write lock: other writers never wait for the model)
        brain = cast("Brain", self)
        with self.store.write_lock():
            held = copies.held_copy(brain, memory)
            if held is not None:
                given = copies.Given(
                    None if importance is None else memory.importance,
                    None if source is None else memory.source,
                    session,
                )
                return copies.merge_into(brain, held, memory, given, edges, embedding[0])
            self.store.add([memory], embedding, edges)
        return Stored(memory, edges)

    def findings_left(self, edges: Sequence[Relationship]) -> int:
        """How many working findings of the goal a memory closed are left (0 when it closed
        none): one close consolidates at most `goals.CLOSE_BATCH`."""
        taken = sum(e.relationship_type is RelationshipType.CONSOLIDATED_FROM for e in edges)
        goal = next((e for e in edges if e.relationship_type is RelationshipType.CLOSES), None)
        if goal is None or taken < goals.CLOSE_BATCH:
            return 0
        return goals.findings_left(self.consolidator, goal.target_id, goal.scope, [self.role])

    def ingest(
        self,
        conversations: Sequence[Conversation],
        *,
        global_: bool = False,
        progress: Callable[[int], None] = lambda _n: None,
        vectors: Mapping[str, np.ndarray] | None = None,
        embed_missing: bool = True,
        begun: Callable[[Conversation], None] = lambda _c: None,
    ) -> IngestReport:
        """Store conversations turn by turn (`octobrain.memory.ingest`); turns already stored are
        skipped, so ingesting a transcript again adds only what is new. `vectors`: embeddings
        of `ingest.unstored_texts`, computed beforehand (by text); without `embed_missing`, a
        turn with none is `ingest.NotEmbedded` instead of embedded here."""
        from octobrain.memory.ingest import ingest

        brain = cast("Brain", self)  # a Writes is only ever part of a Brain
        return ingest(
            brain,
            conversations,
            global_=global_,
            progress=progress,
            vectors=vectors,
            embed_missing=embed_missing,
            begun=begun,
        )

    def _session_tag(self, memory: Memory) -> str:
        """Tag `memory` with this Brain's session; the tag ("" when it has none)."""
        tag = temporal.session_tag(self.session_id)
        if not tag or len(memory.tags) >= MAX_TAGS:
            return ""  # a memory with a full tag list simply stays unlinked
        memory.tags.append(tag)
        return tag

    def relate(
        self,
        source_id: str,
        target_id: str,
        relationship_type: str = "related_to",
        *,
        strength: float = 0.8,
        description: str = "",
    ) -> Relationship:
        """Link two visible memories; the edge lives in the source memory's scope. A link of
        this type between them already there is returned as it is (nothing is added). A
        `closes` link closes its goal (`link`)."""
        return self.link(
            source_id, target_id, relationship_type, strength=strength, description=description
        ).edge

    def link(
        self,
        source_id: str,
        target_id: str,
        relationship_type: str = "related_to",
        *,
        strength: float = 0.8,
        description: str = "",
    ) -> Linked:
        """`relate`, with what else the link did (`Linked`): the `conflicts` edges between the
        two memories a `supersedes` link replaced, and the goal's consolidation when the link
        `closes` a goal that working findings of the note's scope and role still achieve (as
        `memorize` with a `closes` link does: the note becomes their parent). A `closes` link
        goes from a memory that closes no other goal to a goal, or is refused."""
        src, tgt, source_scope = self._pair(source_id, target_id)
        link = Link(
            tgt,
            parse_link_type(relationship_type),
            check_unit("strength", strength),
            link_description("description", description),
        )
        link = replace(
            link, description=screen("description", link.description, self.config.memory.secrets)
        )
        rel = Relationship(
            src, tgt, link.relationship_type, link.strength, link.description, source_scope
        )
        if rel.relationship_type is not RelationshipType.CLOSES:
            made, settled = self.store.link_once(rel)
            return Linked(made, tuple(settled))
        goal = self.store.get_many([tgt], self.sight)[tgt]
        _closes_a_goal(goal, "relationship_type")
        rel, _ = self.store.link_once(rel)  # (a second goal the note closes refused under the lock)
        # The findings it gathers: those of its role (`goals.close_goal`).
        role = self.store.get_many([src], self.sight)[src].role
        if not goals.findings_left(self.consolidator, goal.id, source_scope, [role]):
            return Linked(rel)
        closed = goals.close_goal(self.consolidator, goal, source_scope, utcnow(), [role], role)
        return Linked(rel, closed=closed)

    def unrelate(
        self, source_id: str, target_id: str, relationship_type: str | None = None
    ) -> list[Relationship]:
        """Remove the links from one visible memory to another (of `relationship_type`, or of
        every type a caller may link with); the edges removed. The edges octobrain keeps
        itself (`consolidated_from`: undo the consolidation instead; `same_session`) are not
        a caller's to remove; an `auto_linked` one (an imported guess) is. None there is an
        error naming the link."""
        src, tgt, source_scope = self._pair(source_id, target_id)
        if relationship_type is None:
            kinds = UNLINKABLE
        else:
            kind = parse_relationship_type(relationship_type)
            if kind.value not in UNLINKABLE:
                raise InvalidInput(
                    "relationship_type",
                    f"{as_json(kind.value)} edges are kept by octobrain itself (a consolidation's "
                    "members, a session's order); use one of " + ", ".join(UNLINKABLE),
                )
            kinds = [kind.value]
        removed = self.store.unlink(src, tgt, kinds, source_scope)
        if not removed:
            what = "link" if relationship_type is None else f"{kinds[0]} link"
            raise NotFound("target_id", f"no {what} from {src} to {tgt} to remove")
        return removed

    def _pair(self, source_id: str, target_id: str) -> tuple[str, str, str]:
        """The full ids of two different memories visible from this scope, and the scope of
        the first (where a link between them lives)."""
        src, tgt = self.resolve_id(source_id, "source_id"), self.resolve_id(target_id, "target_id")
        found = self.store.get_many([src, tgt], self.sight)
        for name, mid in (("source_id", src), ("target_id", tgt)):
            if mid not in found:
                raise InvalidInput(name, f"no memory {mid} is visible from this scope")
        if src == tgt:
            raise InvalidInput("target_id", self_link_rule(src))
        return src, tgt, found[src].scope

    def forget(self, memory_ids: Iterable[str], *, confirm: bool) -> Forgotten:
        """Delete memories (and their edges). Needs `confirm=True`. They stay in the store's kept
        versions (`history` / `restore`) for `KEEP_VERSIONS_DAYS`. The consolidations they take
        part in are made to hold without them first (`Consolidator.release`): a merged memory
        forgotten gives its members back, one a forgotten member was merged into is written
        again without its words.

        Every id must be visible from this scope (the read rule: own scope plus global); an
        invisible or unknown id is an error and nothing is deleted.
        """
        if confirm is not True:
            raise InvalidInput("confirm", "must be true to delete (nothing was deleted)")
        given = check_list("memory_ids", memory_ids)
        ids = [self.resolve_id(m, f"memory_id[{i}]") for i, m in enumerate(given)]
        # Unchecked: forgetting a memory that no longer matches its checksum is its repair.
        found = self.store.get_many(ids, self.sight, checked=False)
        for i, mid in enumerate(ids):
            if mid not in found:
                raise NotFound(f"memory_id[{i}]", f"no memory {mid} is visible from this scope")
        turns = [(m.id, m.scope) for m in found.values() if is_turn(m.tags)]
        before = self.store.version()  # what `memory restore` goes back to, to undo this
        released = self.consolidator.release(ids, self.sight.scopes)
        with self.store.write_lock():  # recorded first: a turn forgotten stays forgotten
            forgotten.record(self.store, turns)
            deleted = self.store.delete(ids)
        gone = set(ids)
        return Forgotten(
            deleted + len(set(released.removed)),  # (merged memories the undo deleted)
            [m for m in dict.fromkeys(released.restored) if m not in gone],
            [m for m in dict.fromkeys(released.rewritten) if m not in gone],
            [m for m in dict.fromkeys(released.kept) if m not in gone],
            before,
        )


@dataclass(frozen=True)
class Forgotten:
    """What a forget did: memories deleted, and what that changed in consolidations."""

    deleted: int
    restored: list[str]  # members of a forgotten merged memory, on their own again
    rewritten: list[str]  # merged memories written again without the forgotten ones
    # Merged memories the user edited since the merge: their words left as written (they may
    # still say what was forgotten).
    kept: list[str] = field(default_factory=list)
    undo_version: int | None = None  # the store's version before the delete (`memory restore`)


def _closes_a_goal(target: Memory, field: str) -> None:
    """Refuse (`field`) a `closes` link to a memory that is no goal: it meant nothing."""
    if target.memory_type is not MemoryType.GOAL:
        raise InvalidInput(
            field,
            f"'closes' links a note to the goal it completes, and {target.id} is a "
            f"{target.memory_type.value}, not a goal: use related_to (or achieves, for a "
            "finding towards a goal)",
        )
