"""Temporal association: memories of one session are chained, and one comes along with a recall
of the other."""

from __future__ import annotations

from octobrain.memory.render import format_recall
from octobrain.models import RelationshipType
from tests.brain_support import MakeBrain
from tests.brain_support import make_brain as make_brain  # the fixture, shared
from tests.briefing_support import API


def test_same_session_memories_are_chained_and_one_comes_along(make_brain: MakeBrain) -> None:
    s1, s2 = make_brain(API, session_id="sess-1"), make_brain(API, session_id="sess-2")
    a, _ = s1.memorize("Cache warmup", "The cache warms on deploy from the top 100 keys.")
    b, edges_b = s1.memorize("Queue backlog", "The worker queue backlog alarm fires at 5000 jobs.")
    _, edges_c = s2.memorize("Unrelated note", "Quarterly planning happens in the first week.")
    assert [(e.relationship_type, e.target_id) for e in edges_b] == [
        (RelationshipType.SAME_SESSION, a.id)
    ]
    assert edges_c == []  # first memory of its session
    assert "session:sess-1" in s1.get(b.id).tags
    recall = s1.remember("worker queue backlog alarm", limit=1)
    assert [h.memory.id for h in recall.hits] == [b.id]
    same = [n for n in recall.neighbours if n.relationship_type is RelationshipType.SAME_SESSION]
    assert [(n.memory.id, n.via) for n in same] == [(a.id, b.id)]
    assert "same session as" in format_recall(recall)
    # another session's memory is never brought along as a same-session neighbour
    recall_c = s2.remember("quarterly planning first week", limit=1)
    assert not [
        n for n in recall_c.neighbours if n.relationship_type is RelationshipType.SAME_SESSION
    ]


def test_memories_without_a_session_are_not_linked(make_brain: MakeBrain) -> None:
    brain = make_brain(API)
    brain.memorize("First note here", "Something durable about the build system.")
    second, edges = brain.memorize("Second note here", "Another durable fact about releases.")
    assert edges == [] and not any(t.startswith("session:") for t in second.tags)
