"""Temporal association: memories written in one agent session are linked in a chain.

No schema change: a memory written in a session carries the tag `session:<id>` (how the next
write of the session finds the previous one, from any process) and a `same_session` edge to that
previous memory (what `graph` shows and what `remember` follows to bring one same-session
neighbour along). Rows written before this existed simply have neither.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

from octobrain.memory.corpus import Corpus
from octobrain.models import TAG_CHARS, Memory, Relationship, RelationshipType, State
from octobrain.safe_text import printable
from octobrain.store.sql import Sight

__all__ = ["SESSION_PREFIX", "previous_in_session", "same_session_partner", "session_tag"]

SESSION_PREFIX = "session:"
SESSION_LINK_STRENGTH = 0.5


def session_tag(session_id: str) -> str:
    """The tag marking a memory as written in `session_id` ("" when there is no session): the
    id without whitespace or control characters; one too long for a tag keeps its start and
    ends in a hash of the whole id, so two ids that share a long start stay two sessions."""
    sid = printable("".join(session_id.split()))
    if not sid:
        return ""
    tag = f"{SESSION_PREFIX}{sid}"
    if len(tag) <= TAG_CHARS:
        return tag
    digest = hashlib.sha256(sid.encode("utf-8")).hexdigest()[:_TAG_HASH]
    return f"{tag[: TAG_CHARS - _TAG_HASH - 1]}~{digest}"


_TAG_HASH = 16  # hex digits of the hash that ends a long session id's tag


def previous_in_session(corpus: Corpus, tag: str, sight: Sight) -> Memory | None:
    """The newest live memory `sight` sees that carries the session `tag`."""
    import numpy as np

    corpus.refresh()
    if not len(corpus):
        return None
    # The mirror's tag mask finds the session's few rows; a loop over every memory cost a
    # hook tens of milliseconds at 10k memories.
    tagged = np.flatnonzero(corpus.allowed(sight, tags=[tag]))
    found = [corpus.memory(int(pos)) for pos in tagged]
    return max(found, key=lambda m: (m.created_at, m.id), default=None)


def same_session_link(memory: Memory, previous: Memory) -> Relationship:
    """The chain edge from a new memory to the previous one of its session."""
    return Relationship(
        memory.id,
        previous.id,
        RelationshipType.SAME_SESSION,
        SESSION_LINK_STRENGTH,
        "written in the same session",
        memory.scope,
    )


def same_session_partner(
    corpus: Corpus,
    edges: Mapping[str, Sequence[Relationship]],
    result_ids: Sequence[str],
    exclude: set[str],
    sight: Sight,
) -> tuple[Relationship, Memory, str] | None:
    """One memory of the same session as a result (best results first): the edge, the memory
    and the result it hangs off. Skips memories already shown and archived ones. `edges`: the
    edges touching each result (`Corpus.edges_by_node`)."""
    for rid in result_ids:
        for rel in edges.get(rid, ()):
            if rel.relationship_type is not RelationshipType.SAME_SESSION:
                continue
            other = rel.target_id if rel.source_id == rid else rel.source_id
            pos = corpus.pos_of.get(other)
            if other in exclude or pos is None:
                continue
            memory = corpus.memory(pos)
            if sight.sees(memory.scope, memory.role) and memory.state is not State.ARCHIVED:
                return rel, memory, rid
    return None
