"""Roles: an agent's role ("reviewer", "planner") keeps its memories apart. What a Brain with a
role stores is that role's; it sees its role's memories and those of no role (shared), never
another role's, on every read path; a Brain with no role sees every role's (as upstream)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.errors import InvalidInput
from octobrain.memory.brain import Brain
from octobrain.memory.briefing import build_briefing
from octobrain.memory.export import export_jsonl
from octobrain.memory.turns import Conversation, Turn
from octobrain.store import NotFound

SCOPE = "github.com/acme/api"
SHARED = ("Deploy freeze on Fridays", "Nothing is deployed to production on Fridays, by anyone.")
REVIEW = (
    "Review checklist for deploys",
    "Reviewers check the deploy rollback plan before approval.",
)
PLAN = ("Deploy planning cadence", "Planners schedule each deploy two days ahead in the calendar.")


def _brain(tmp_path: Path, role: str = "", scope: str = SCOPE) -> Brain:
    return Brain(scope, config=Config(), embedder=get_embedder("hash:64"), uri=tmp_path / "db",
                 role=role)  # fmt: skip


@pytest.fixture
def stored(tmp_path: Path) -> dict[str, str]:
    """Three memories of one scope: one of no role, one a reviewer's, one a planner's, each
    linked to the others; their ids by who stored them."""
    ids = {}
    for role, (title, content) in (("", SHARED), ("reviewer", REVIEW), ("planner", PLAN)):
        with _brain(tmp_path, role) as brain:
            ids[role or "shared"] = brain.memorize(title, content, tags=["deploy"])[0].id
    with _brain(tmp_path) as brain:
        brain.relate(ids["reviewer"], ids["planner"], "related_to")
        brain.relate(ids["shared"], ids["planner"], "related_to")
        brain.relate(ids["reviewer"], ids["shared"], "related_to")
    return ids


def test_a_role_stores_its_own_and_sees_its_own_and_the_shared(
    tmp_path: Path, stored: dict[str, str]
) -> None:
    reviewer, planner, shared = stored["reviewer"], stored["planner"], stored["shared"]
    with _brain(tmp_path, "reviewer") as brain:
        assert brain.show(reviewer).role == "reviewer"
        assert brain.show(shared).role == ""
        recall = brain.remember("deploy", min_relevance=0.0, limit=10)
        found = {h.memory.id for h in recall.hits} | {n.memory.id for n in recall.neighbours}
        assert found == {reviewer, shared}  # the planner's neither a hit nor a neighbour
        assert {m.id for m in brain.recent()} == {reviewer, shared}
        nodes, edges = brain.graph(reviewer)
        assert {m.id for m in nodes} == {reviewer, shared}
        assert all(planner not in (e.source_id, e.target_id) for e in edges)
        stats = brain.stats()
        assert (stats["total"], stats["role"], stats["by_role"]) == (
            2, "reviewer", {"": 1, "reviewer": 1},
        )  # fmt: skip
        for read in (brain.show, brain.get):
            with pytest.raises(NotFound, match='as role "reviewer"'):
                read(planner)
        with pytest.raises(NotFound):
            brain.show(planner[:8])  # nor by a prefix
        with pytest.raises(NotFound):
            brain.update(planner, content="Reviewers rewrote the planners' cadence entirely.")
        with pytest.raises(NotFound):
            brain.forget([planner], confirm=True)
        with pytest.raises(InvalidInput, match="is visible"):
            brain.relate(reviewer, planner, "supersedes")
        out = io.StringIO()
        export_jsonl(brain, out)
        lines = [json.loads(line) for line in out.getvalue().splitlines()]
        assert {r["id"] for r in lines if r["kind"] == "memory"} == {reviewer, shared}
        shown = " ".join(item.memory.content for item in build_briefing(brain).items)
        assert PLAN[1] not in shown and REVIEW[1] in shown
    with _brain(tmp_path) as everyone:  # no role: every role's memories
        recall = everyone.remember("deploy", min_relevance=0.0, limit=10)
        assert {h.memory.id for h in recall.hits} == {reviewer, planner, shared}
        assert everyone.stats()["by_role"] == {"": 1, "planner": 1, "reviewer": 1}


def test_an_update_keeps_the_memory_s_role(tmp_path: Path, stored: dict[str, str]) -> None:
    # Upstream re-stamped the writer's role on every upsert, moving a memory to whoever
    # touched it last.
    with _brain(tmp_path, "reviewer") as brain:
        brain.update(stored["shared"], add_tags=["checked"])
    with _brain(tmp_path) as brain:
        assert brain.update(stored["planner"], add_tags=["seen"]).role == "planner"
        assert brain.show(stored["shared"]).role == ""


def test_the_same_text_in_two_roles_is_two_memories(tmp_path: Path) -> None:
    with _brain(tmp_path, "reviewer") as reviewer, _brain(tmp_path, "planner") as planner:
        first = reviewer.memorize(*REVIEW)[0]
        second = planner.memorize(*REVIEW)[0]  # not answered by the reviewer's copy
        assert first.id != second.id and second.role == "planner"
        assert reviewer.memorize(*REVIEW)[0].id == first.id  # its own copy still is


def test_ingested_turns_are_the_role_s(tmp_path: Path) -> None:
    said = [Turn("ana", f"We ship the deploy on day {i}.", "1", i) for i in "12"]
    with _brain(tmp_path, "planner") as planner:
        planner.ingest([Conversation("standup", said)])
    with _brain(tmp_path, "reviewer") as reviewer:
        assert reviewer.remember("ship the deploy", min_relevance=0.0).hits == []
    with _brain(tmp_path, "planner") as planner:
        hits = planner.remember("ship the deploy", min_relevance=0.0).hits
        assert len(hits) == 2 and {h.memory.role for h in hits} == {"planner"}


@pytest.mark.parametrize(
    ("role", "message"),
    [("a\nb", "role: must not contain control"), ("\u0301", "role: must hold visible text"),
     ("x" * 300, "role: ")],
)  # fmt: skip
def test_a_role_is_one_visible_line(tmp_path: Path, role: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        _brain(tmp_path, role)
