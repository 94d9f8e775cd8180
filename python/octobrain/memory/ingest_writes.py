"""An ingest's commits (`memory.ingest`): a batch of turns and the links to their previous
turns added under the write lock, presence and links looked at again there, so two
processes ingesting one file add each turn and each link once; and the links from turns
earlier calls stored to the sessions this call continued.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from octobrain.memory import temporal
from octobrain.memory.earlier_turns import SAID_NEXT, onward_links
from octobrain.models import Memory, Relationship, RelationshipType
from octobrain.store import forgotten
from octobrain.store.sql import sql_in, sql_str

if TYPE_CHECKING:
    from octobrain.memory.brain import Brain

__all__ = ["absent", "have_links", "link_onward", "unchanged", "write_batch"]


def link_onward(brain: Brain, scope: str, ends: dict[str, Memory]) -> int:
    """Link the turns earlier calls stored first after this call's sessions, and linked to
    none before them, to the sessions' last turns (`earlier_turns.onward_links`); the links
    added."""
    store = brain.store
    links = onward_links(store, scope, next(iter(ends.values())).tags[0], ends)

    def unlinked() -> list[Relationship]:
        linked = have_links(brain, [e.source_id for e in links]) if links else set()
        return [e for e in links if e.source_id not in linked]

    if not unlinked():
        return 0
    with store.write_lock():  # (looked at again: another ingest may have linked them)
        links = unlinked()
        if not links:
            return 0
        return store.add(
            [], np.zeros((0, store.dim), dtype=np.float32), links, drop_gone_links=True
        )


def unchanged(
    brain: Brain, batch: list[Memory], previous: dict[str, str], stored: Mapping[str, str]
) -> bool:
    """Whether every turn of `batch` is stored with its words and linked to the previous turn
    of its session (`stored`: id → content of those the store holds): an ingest of a file
    already ingested then has nothing to do for the batch, and takes no lock for it."""
    if any(stored.get(m.id) != m.content for m in batch):
        return False
    following = [m.id for m in batch if m.id in previous]
    return not following or have_links(brain, following) >= set(following)


def write_batch(
    brain: Brain,
    batch: list[Memory],
    previous: dict[str, str],
    known: Mapping[str, np.ndarray],
    stored: Mapping[str, str],
) -> tuple[int, int, int, int]:
    """Embed and add the turns of `batch` the store does not hold yet, with the links to their
    previous turns (one commit each); the turns added, the links added, the turns whose id is
    stored with other words (a later call gave a stored turn's id to another turn; within one
    call that is a field error, `once`), and those the user forgot (neither kind is stored or
    linked, nor is a turn linked to a forgotten one). `stored`: the content of each turn of
    the batch and of their previous turns the store holds, read just before. Presence
    is checked again under the write lock, so two processes ingesting one file add each turn
    once; the embedding is computed before (or taken from `known`, by embedded text), so the
    lock is held only for the commits. A turn already stored gets its link too when it has
    none: an ingest killed between the two commits left it without, and the next run mends
    it."""
    store = brain.store
    ends = [m.id for m in batch] + [previous[m.id] for m in batch if m.id in previous]
    # (a forgotten turn brought back by `memory restore` is held again: not gone)
    gone = forgotten.among(store, [i for i in ends if i not in stored])
    new = [m for m in batch if m.id not in stored and m.id not in gone]
    other = {m.id for m in batch if m.id in stored and stored[m.id] != m.content}
    texts = [m.embedded_text() for m in new]
    todo = [t for t in texts if t not in known]
    fresh = dict(zip(todo, brain.embedder.embed_documents(todo), strict=True)) if todo else {}
    vectors = np.array([known.get(t, fresh.get(t)) for t in texts], dtype=np.float32)
    with store.write_lock():
        still = {m.id for m in absent(brain, new)} if new else set()
        keep = [i for i, m in enumerate(new) if m.id in still]
        new = [new[i] for i in keep]
        stored_now = [m.id for m in batch if m.id in previous and m.id not in still]
        linked = have_links(brain, stored_now) if stored_now else set()
        edges = [
            Relationship(
                m.id,
                previous[m.id],
                RelationshipType.SAME_SESSION,
                temporal.SESSION_LINK_STRENGTH,
                SAID_NEXT,
                m.scope,
            )
            for m in batch
            if m.id in previous
            and m.id not in linked
            and not {m.id, previous[m.id]} & (other | gone)
        ]
        linked_now = 0
        if new or edges:
            embeddings = vectors[keep] if new else np.zeros((0, store.dim), dtype=np.float32)
            # (a turn forgotten since `gone` was read is no end for a link any more)
            linked_now = store.add(new, embeddings, edges, drop_gone_links=True)
    return len(new), linked_now, len(other), sum(m.id in gone for m in batch)


def have_links(brain: Brain, ids: list[str]) -> set[str]:
    """Which of `ids` already have their link to the previous turn."""
    kind = sql_str(RelationshipType.SAME_SESSION.value)
    where = f"relationship_type = {kind} AND {sql_in('source_id', ids)}"
    rows = brain.store.relationships.search().where(where).select(["source_id"]).limit(None)
    return {r["source_id"] for r in rows.to_list()}


def absent(brain: Brain, memories: list[Memory]) -> list[Memory]:
    """The turns among `memories` to store: not held, and not forgotten by the user."""
    ids = [m.id for m in memories]
    held = brain.store.held(ids) | forgotten.among(brain.store, ids)
    return [m for m in memories if m.id not in held]
