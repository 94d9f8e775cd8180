"""A `memorize` of a memory already stored: answered with the memory held, not a second copy.

An agent sends a `memorize` again when its first answer was lost (a timeout, a dropped
connection) or when it learns the same fact again in a later session. Stored twice, the fact
comes back twice from every `remember`, each copy fading on its own, until a sleep pass merges
them. So a memorize whose type, title and content are exactly those of a working memory of the
same scope and role stores no row: its answer is that memory, into which the call's additions
are merged (tags and related files it lacks, room permitting; a higher importance or a more
trusted source, when the call gives one; links it lacks, by the store's rules for links:
`store.link_rules`), and the call counts as an access to it. Looked for under the store's write
lock, so two processes that send one memory at the same moment store it once. A memorize that
closes a goal is always stored: the note is what consolidates the goal's findings. A copy that
is consolidated or archived does not count: the new memory is stored and the old one stays as
it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

from octobrain.memory.corpus_io import LIGHT_COLUMNS
from octobrain.models import (
    MAX_FILES,
    MAX_TAGS,
    Memory,
    Relationship,
    RelationshipType,
    Source,
    State,
)
from octobrain.safe_text import same_text_key, spellings
from octobrain.store import schema
from octobrain.store.link_rules import Settled, check_link
from octobrain.store.sql import sql_in, sql_str
from octobrain.times import utcnow

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from octobrain.memory.brain import Brain


@dataclass(frozen=True)
class Already:
    """A memorize answered with the memory already held: when that was stored, and what the
    call added to it, in words ("tags a, b", "importance 0.50 → 0.80"; none when nothing)."""

    stored_at: datetime
    added: tuple[str, ...]
    left_out: tuple[str, ...] = ()  # what the call gave that the memory has no room for
    settled: tuple[Relationship, ...] = ()  # `conflicts` edges a `supersedes` link replaced


class Stored(tuple[Memory, list[Relationship]]):
    """What `memorize` returns: it unpacks as (the memory, the edges written), and `already`
    is set when the memory was held before the call (`Already`), None when it was stored."""

    already: Already | None

    def __new__(
        cls, memory: Memory, edges: list[Relationship], already: Already | None = None
    ) -> Stored:
        made = super().__new__(cls, (memory, edges))
        made.already = already
        return made


@dataclass(frozen=True)
class Given:
    """What a memorize call gave beyond its text: `None` where it left a field to default,
    so that a default never lowers or replaces what the held memory has."""

    importance: float | None
    source: Source | None
    session_tag: str


def held_copy(brain: Brain, memory: Memory) -> Memory | None:
    """Under the write lock: the working memory of `memory`'s scope and role with its type,
    title and content (the first stored, if several), when there is one that reads back whole. Texts
    that differ only by format characters or Unicode normalisation are the same
    (`same_text_key`): the look tries their `spellings`, so a copy stored with an invisible
    character the call's text lacks stays unfound."""
    brain.store.check_commit()  # (a damaged table is named before the look reads it)
    where = (
        f"scope = {sql_str(memory.scope)} AND role = {sql_str(memory.role)} "
        f"AND memory_type = {sql_str(memory.memory_type.value)} "
        f"AND state = {sql_str(State.WORKING.value)} "
        f"AND {sql_in('title', spellings(memory.title))} "
        f"AND {sql_in('content', spellings(memory.content))}"
    )
    # Ids first (a narrow read is the cheaper first query of a new process); whole rows only
    # of a copy found.
    title, content = same_text_key(memory.title), same_text_key(memory.content)
    found = [
        row["id"]
        for row in brain.store.scan(where, columns=["id", "title", "content"])
        if same_text_key(row["title"]) == title and same_text_key(row["content"]) == content
    ]
    rows = brain.store.scan(sql_in("id", found), columns=LIGHT_COLUMNS) if found else []
    copies = [schema.row_to_memory(row) for row in rows if schema.verified(row) is not False]
    return min(copies, key=lambda m: (m.created_at, m.id), default=None)


def merge_into(
    brain: Brain,
    held: Memory,
    memory: Memory,
    given: Given,
    edges: Sequence[Relationship],
    vector: npt.NDArray[np.float32],
) -> Stored:
    """Under the write lock: answer a memorize of `memory` with `held`, its copy, after writing
    into it what the call adds (`Given`; `edges`: the links the call asked for, from
    `memory`; `vector`: `memory`'s embedding) and queueing one access to it."""
    now = utcnow()
    links = []
    left_out = []  # (past what a memory holds, or a link to itself: said, not dropped)
    for i, edge in enumerate(edges):  # (refused before anything of the call is written)
        if edge.relationship_type is RelationshipType.SAME_SESSION:
            continue  # (the held memory has its own place in its session)
        if edge.target_id == held.id:
            kind = edge.relationship_type.value
            left_out.append(f"the {kind} link to {held.id} (a memory does not link to itself)")
            continue
        link = replace(edge, source_id=held.id)
        try:
            check_link(brain.store, link, f"related_to[{i}]")
        except Settled:  # (left out, as in one call that supersedes and conflicts one memory)
            continue
        links.append(link)
    tags = [t for t in memory.tags if t != given.session_tag and t not in held.tags]
    files = [f for f in memory.related_files if f not in held.related_files]
    room = max(0, MAX_TAGS - len(held.tags))
    if len(tags) > room:
        left_out.append(f"tags {', '.join(tags[room:])} (a memory holds at most {MAX_TAGS})")
    room_files = max(0, MAX_FILES - len(held.related_files))
    if len(files) > room_files:
        left_out.append(
            f"related files {', '.join(files[room_files:])} (a memory holds at most {MAX_FILES})"
        )
    tags, files = tags[:room], files[:room_files]
    importance = held.importance
    if given.importance is not None and given.importance > held.importance:
        importance = given.importance
    source = held.source
    if given.source is not None and given.source.trust > held.source.trust:
        source = given.source
    added = []
    if tags:
        added.append(f"tags {', '.join(tags)}")
    if files:
        added.append(f"related files {', '.join(files)}")
    if importance != held.importance:
        added.append(f"importance {held.importance:.2f} → {importance:.2f}")
    if source is not held.source:
        added.append(f"source {held.source.value} → {source.value}")
    merged = held
    if added:
        merged = replace(
            held,
            tags=[*held.tags, *tags],
            related_files=[*held.related_files, *files],
            importance=importance,
            source=source,
            updated_at=now,
        )
        text = merged.embedded_text()
        # (the call's own vector, embedded early, serves when its text is the merged one's)
        same = text == memory.embedded_text()
        embedding = vector if same else brain.embedder.embed_documents([text])[0]
        brain.store.replace(merged, embedding, read=held)
    written, settled = [], []
    for link in links:
        made, replaced = brain.store.link_once(link)
        settled += replaced
        if made.id == link.id:  # (a link it already had is the one returned, not written)
            written.append(made)
    if written:
        added.append(f"links {len(written)}")
    brain.count_access([held.id], now)
    already = Already(held.created_at, tuple(added), tuple(left_out), tuple(settled))
    return Stored(merged, written, already)
