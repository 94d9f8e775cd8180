"""Roles and consolidation: a goal's closure and a sleep pass never put one role's words where
another role reads them (a parent gathers the memories of one role and carries it), and a
sleep pass weighs as conflicting only statements one reader sees together."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.errors import InvalidInput
from octobrain.memory.brain import Brain
from octobrain.models import RelationshipType, Source
from octobrain.times import utcnow
from tests.conflicts_support import conflict_edges, timeout
from tests.consolidation_support import TWINS, add_at, raw_rows

SCOPE = "github.com/acme/api"
CONSOLIDATED_FROM = RelationshipType.CONSOLIDATED_FROM
# Each role's finding of one shared goal, in words of its own.
SAID = {
    "": "Shared finding: the limiter counts requests per key.",
    "reviewer": "Reviewer finding: the rollback script drops the audit table.",
    "planner": "Planner finding: the migration slips to the third sprint.",
}


def _brain(tmp_path: Path, role: str = "") -> Brain:
    return Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=tmp_path,
                 role=role)  # fmt: skip


def _shared_goal(tmp_path: Path) -> tuple[str, dict[str, str]]:
    """A role-less goal and a finding of it by each role (and one of none): their ids."""
    with _brain(tmp_path) as everyone:
        goal = everyone.memorize("Ship the release", "Goal: ship it.", memory_type="goal")[0]
    found = {}
    for role, text in SAID.items():
        with _brain(tmp_path, role) as brain:
            achieves = [{"target_id": goal.id, "relationship_type": "achieves"}]
            found[role] = brain.memorize(f"Finding {role}", text, related_to=achieves)[0].id
    return goal.id, found


def _words_stay_their_role_s(rows: dict[str, dict[str, Any]]) -> None:
    """No row holds a role's finding's words but one of that role (or, for the role-less
    finding's, any row: those are everyone's)."""
    for row in rows.values():
        for role, text in SAID.items():
            if role and text in row["content"]:
                assert row["role"] == role, (row["title"], row["role"], role)


def test_closing_a_shared_goal_by_hand_makes_a_parent_per_role(tmp_path: Path) -> None:
    # A role-less goal closed by findings of two roles was summarised into one role-less
    # parent: the reviewer read the planner's finding in it.
    goal, found = _shared_goal(tmp_path)
    parents = []
    with _brain(tmp_path) as everyone:
        for _ in range(5):  # one role's findings a close, until none is left
            try:
                parents.append(everyone.consolidate_goal(goal).parent)
            except InvalidInput as e:
                assert "no working memory of this scope achieves" in str(e)
                break
        rows = raw_rows(everyone)
    _words_stay_their_role_s(rows)
    assert sorted(p.role for p in parents) == ["", "planner", "reviewer"]
    assert {rows[i]["state"] for i in found.values()} == {"consolidated"}
    with _brain(tmp_path, "reviewer") as reviewer:
        recall = reviewer.remember("finding", min_relevance=0.0, limit=20)
        seen = " ".join(h.memory.content for h in recall.hits)
        assert SAID["planner"] not in seen and SAID["reviewer"] in seen


def test_a_role_closing_a_shared_goal_leaves_another_role_s_findings(tmp_path: Path) -> None:
    goal, found = _shared_goal(tmp_path)
    with _brain(tmp_path, "reviewer") as reviewer:
        closes = [{"target_id": goal, "relationship_type": "closes"}]
        edges = reviewer.memorize("Released", "The release went out.", related_to=closes)[1]
        merged = [e.target_id for e in edges if e.relationship_type is CONSOLIDATED_FROM]
        assert merged == [found["reviewer"]]  # its role's only
        closed = reviewer.consolidate_goal(goal)  # then the shared one, in a parent of none
        assert closed.parent.role == "" and [m.id for m in closed.members] == [found[""]]
    rows = raw_rows(_brain(tmp_path))
    assert rows[found["planner"]]["state"] == "working"  # not the reviewer's to merge
    _words_stay_their_role_s(rows)
    with _brain(tmp_path, "planner") as planner:
        assert planner.consolidate_goal(goal).parent.role == "planner"


def test_a_sleep_pass_never_merges_two_roles_near_duplicates(tmp_path: Path) -> None:
    with _brain(tmp_path) as everyone:
        for i, role in enumerate(["reviewer", "reviewer", "planner", "planner", "", ""]):
            add_at(everyone, "Deploys", TWINS[i % len(TWINS)], utcnow(), role=role)
        report = everyone.sleep_consolidate(threshold=0.85, min_size=2)
        assert sorted(c.parent.role for c in report.consolidations) == ["", "planner", "reviewer"]
        for c in report.consolidations:
            assert {m.role for m in c.members} == {c.parent.role}


def test_a_sleep_pass_weighs_no_statement_against_another_role_s(tmp_path: Path) -> None:
    # The planner's guess lost to the reviewer's confirmed value, which it never sees: it
    # ranked as disputed by a statement no reader of its role can read.
    now = utcnow()
    with _brain(tmp_path) as everyone:
        told = add_at(everyone, "Timeout", timeout(30), now - timedelta(days=30),
                      source=Source.USER_CONFIRMED, role="reviewer")  # fmt: skip
        guess = add_at(everyone, "Timeout", timeout(90), now - timedelta(hours=1), role="planner")
        shared = add_at(everyone, "Timeout", timeout(60), now - timedelta(hours=2))
        report = everyone.sleep_consolidate(threshold=0.7, min_size=5)
        edges = conflict_edges(everyone)
    assert (told.id, guess.id) not in edges and (guess.id, told.id) not in edges
    # A role-less statement is every role's: weighed against each (the guess and it are
    # equally trusted and recent: a disagreement left open).
    assert edges == {(told.id, shared.id)}
    assert [set(pair) for pair in report.disagreements] == [{guess.id, shared.id}]


def test_a_role_s_sleep_pass_reports_no_other_role_s_memory(tmp_path: Path) -> None:
    # `memory --role reviewer sleep-consolidate --dry-run` printed the planner's near-duplicates
    # (their ids and merged words), its conflicts and its faded memories archived.
    now = utcnow()
    with _brain(tmp_path) as everyone:
        twins = [add_at(everyone, "Deploys", TWINS[i], now, role="planner") for i in range(2)]
        told = add_at(everyone, "Timeout", timeout(30), now - timedelta(days=3),
                      source=Source.USER_CONFIRMED, role="planner")  # fmt: skip
        guess = add_at(everyone, "Timeout", timeout(90), now - timedelta(hours=1), role="planner")
        faded = add_at(everyone, "Old cache note", "The cache TTL was 5 minutes.",
                       now - timedelta(days=500), role="planner")  # fmt: skip
    planner_ids = {m.id for m in (*twins, told, guess, faded)}
    for role, dry_run in (("", True), ("reviewer", True), ("reviewer", False)):
        with _brain(tmp_path, role) as brain:
            report = brain.sleep_consolidate(threshold=0.7, min_size=2, dry_run=dry_run)
        named = {i for c in report.conflicts for i in (c.winner, c.loser)} | set(report.archived)
        named |= {m.id for c in report.consolidations for m in c.members}
        shown = (named, report.candidates, report.skipped)
        assert shown == ((planner_ids, 4, 0) if not role else (set(), 0, 0)), role
    # The pass was the scope's, every role's: the planner's twins merged, its guess
    # outranked, its old note archived.
    with _brain(tmp_path) as everyone:
        states = {i: raw_rows(everyone)[i]["state"] for i in planner_ids}
        assert (told.id, guess.id) in conflict_edges(everyone)
    assert states == {twins[0].id: "consolidated", twins[1].id: "consolidated",
                      told.id: "working", guess.id: "working", faded.id: "archived"}  # fmt: skip
