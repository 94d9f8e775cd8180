"""Conflicts: the same thing stated with two values, settled (or reported) by the sleep pass: which
value prevails, what the briefing and a question see, bounded edges.

Real LanceDB in temp dirs; the bundled model where the two wordings must really be paraphrases,
the hash embedder where identical wording with another number is enough.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.kernels.clustering import unit_rows
from octobrain.memory.brain import Brain
from octobrain.memory.briefing import build_briefing
from octobrain.memory.conflicts import (
    NEAR_PER_ROW,
    Statement,
    StatementPool,
    compatible,
    conflicting_pairs,
    numbers,
    prevailing,
)
from octobrain.memory.render_brief import briefing_markdown
from octobrain.models import Memory, MemoryType, Relationship, RelationshipType, Source
from octobrain.times import utcnow
from tests.conflicts_support import FILLER, conflict_edges, timeout
from tests.consolidation_support import SCOPE, MakeBrain, add_at
from tests.consolidation_support import make_brain as make_brain  # the fixture, shared

QUESTION = "What is the billing service request timeout?"


def add_old_value(
    brain: Brain, content: str, *, written_days_ago: float, reads: int, **fields: Any
) -> Memory:
    """A value written weeks ago, important, and read often until a few days ago."""
    now = utcnow()
    written = now - timedelta(days=written_days_ago)
    memory = Memory(
        title="Billing timeout",
        content=content,
        scope=brain.scope,
        importance=0.8,
        created_at=written,
        updated_at=written,
        last_accessed=now - timedelta(days=3),
        access_count=reads,
        **fields,
    )
    brain.store.add([memory], brain.embedder.embed_documents([memory.searchable_text()]))
    return memory


def ranked(brain: Brain, query: str = QUESTION) -> list[str]:
    hits = brain.remember(query, limit=10, min_relevance=0.0, record_access=False).hits
    return [h.memory.id for h in hits]


def test_numbers_and_compatibility() -> None:
    assert numbers("pool of 1,200 rows, 3.5 s, v2") == {"1,200", "3.5", "2"}
    assert compatible(numbers("timeout 30 s"), numbers("timeout 30 s or 45 s"))
    assert compatible(numbers("timeout 30 s"), numbers("no number here"))
    assert not compatible(numbers("timeout 30 s"), numbers("timeout 45 s"))


def test_the_more_trusted_prevails_else_the_newer_over_a_claim_older_than_the_window() -> None:
    now = utcnow()
    window = now - timedelta(days=7)
    user = Statement("u", 1.0, now - timedelta(days=5))
    guess = Statement("g", 0.8, now - timedelta(days=1))
    old = Statement("o", 0.8, now - timedelta(days=30))
    recent = Statement("r", 0.8, now - timedelta(days=2))
    assert prevailing(guess, user, window) == (user, guess, "more trusted")
    assert prevailing(old, recent, window) == (recent, old, "newer")
    assert prevailing(recent, guess, window) is None  # both within the window: a disagreement


def test_pairs_need_near_identical_wording_and_disjoint_numbers() -> None:
    def row(i: str, text: str, vec: list[float]) -> dict[str, object]:
        return {"id": i, "content": text, "embedding": np.asarray(vec, dtype=np.float32)}

    a = row("a", "timeout 30 s", [1, 0])
    b = row("b", "timeout 45 s", [1, 0.1])  # cosine 0.995: conflicts with a
    c = row("c", "timeout 30 s, 45 s under load", [1, 0.1])  # shares a number with each
    d = row("d", "pool 45", [0, 1])  # disjoint numbers but another subject

    def pool(*rows: dict[str, object]) -> StatementPool:
        vectors = unit_rows(np.stack([np.asarray(r["embedding"]) for r in rows]))
        ids, contents = [str(r["id"]) for r in rows], [str(r["content"]) for r in rows]
        sources, said = [Source.AGENT_INFERRED.value] * len(rows), [utcnow()] * len(rows)
        return StatementPool(ids, contents, vectors, sources, said)

    pairs, unchecked = conflicting_pairs([a, b], pool(a, b, c, d), threshold=0.9)
    assert pairs == [("a", "b")] and unchecked == 0  # each pair once, never with itself
    assert conflicting_pairs([a], pool(b), threshold=0.999) == ([], 0)


def test_a_changed_value_outranks_the_old_one_however_often_that_was_read(tmp_path: Path) -> None:
    brain = Brain(SCOPE, config=Config(), embedder=get_embedder("minilm"), uri=tmp_path)
    now = utcnow()
    old = add_old_value(brain, timeout(45), written_days_ago=40, reads=15)
    new = add_at(brain, "Billing timeout", timeout(30), now - timedelta(days=6))
    for title, text in FILLER:  # the rest of a project's memory, so the ranking has context
        add_at(brain, title, text, now - timedelta(days=10))
    assert ranked(brain)[:2] == [old.id, new.id]  # the same words: its reads put the old first

    report = brain.sleep_consolidate()
    assert [(c.winner, c.loser, c.reason) for c in report.conflicts] == [(new.id, old.id, "newer")]
    assert conflict_edges(brain) == {(new.id, old.id)}
    hits = brain.remember(QUESTION, limit=10, min_relevance=0.0, record_access=False).hits
    assert [h.memory.id for h in hits[:2]] == [new.id, old.id]
    assert hits[1].outranked_by == [new.id] and "states another value" in hits[1].why

    again = brain.sleep_consolidate()
    assert again.conflicts == [] and conflict_edges(brain) == {(new.id, old.id)}


def test_a_user_confirmed_value_outranks_an_agents_repeated_guess(make_brain: MakeBrain) -> None:
    brain = make_brain()
    now = utcnow()
    fact = add_at(
        brain, "Timeout", timeout(30), now - timedelta(days=3), source=Source.USER_CONFIRMED
    )
    guesses = [add_at(brain, "Timeout", timeout(33), now - timedelta(hours=h)) for h in (20, 10, 2)]
    report = brain.sleep_consolidate(threshold=0.7)
    (merged,) = report.consolidations
    assert {m.id for m in merged.members} == {g.id for g in guesses}
    parent = merged.parent.id
    # The guesses merged into one parent; the fact prevails over that parent, not its members.
    assert [(c.winner, c.loser, c.reason) for c in report.conflicts] == [
        (fact.id, parent, "more trusted")
    ]
    assert report.disagreements == []
    order = ranked(brain, "billing service request timeout")
    assert order.index(fact.id) < order.index(parent)

    # Undoing the merge removes the parent and every edge it had.
    brain.unconsolidate(parent)
    assert conflict_edges(brain) == set()


def test_equally_trusted_recent_claims_are_reported_not_ordered(make_brain: MakeBrain) -> None:
    brain = make_brain()
    now = utcnow()
    one = add_at(brain, "Timeout", timeout(30), now - timedelta(days=2))
    two = add_at(brain, "Timeout", timeout(45), now - timedelta(days=1))
    planned = brain.sleep_consolidate(threshold=0.7, dry_run=True)
    assert planned.conflicts == [] and planned.disagreements == [tuple(sorted((one.id, two.id)))]
    report = brain.sleep_consolidate(threshold=0.7)
    assert report.disagreements == planned.disagreements
    assert conflict_edges(brain) == set()


def test_dry_run_records_nothing_and_the_switch_turns_it_off(
    make_brain: MakeBrain, tmp_path: Path
) -> None:
    brain = make_brain()
    now = utcnow()
    old = add_at(brain, "Timeout", timeout(30), now - timedelta(days=30))
    new = add_at(brain, "Timeout", timeout(45), now - timedelta(days=1))
    planned = brain.sleep_consolidate(threshold=0.7, dry_run=True)
    assert [(c.winner, c.loser) for c in planned.conflicts] == [(new.id, old.id)]
    assert conflict_edges(brain) == set()

    base = Config()
    off = replace(base, consolidation=replace(base.consolidation, detect_conflicts=False))
    quiet = Brain(SCOPE, config=off, embedder=get_embedder("hash:64"), uri=tmp_path / "off")
    add_at(quiet, "Timeout", timeout(30), now - timedelta(days=30))
    add_at(quiet, "Timeout", timeout(45), now - timedelta(days=1))
    report = quiet.sleep_consolidate(threshold=0.7)
    assert report.conflicts == [] and report.disagreements == [] and conflict_edges(quiet) == set()


@pytest.mark.parametrize(
    ("loser_source", "winner_superseded", "reordered"),
    [
        (Source.AGENT_INFERRED, False, True),
        (Source.USER_CONFIRMED, False, False),  # an agent's link cannot outrank the user
        (Source.AGENT_INFERRED, True, False),  # a superseded memory prevails over nothing
    ],
)
def test_a_conflicts_link_written_by_an_agent_orders_the_two(
    make_brain: MakeBrain, loser_source: Source, winner_superseded: bool, reordered: bool
) -> None:
    brain = make_brain()
    now = utcnow()
    exact = add_at(brain, "Timeout", timeout(30), now - timedelta(days=1), source=loser_source)
    other, _ = brain.memorize(
        "Timeout",
        "The billing service request timeout was raised to 45 seconds.",
        source="agent_inferred",
    )
    query = timeout(30)
    assert ranked(brain, query)[0] == exact.id
    edges = [Relationship(other.id, exact.id, RelationshipType.CONFLICTS, 1.0, "", SCOPE)]
    if winner_superseded:
        newest, _ = brain.memorize("Timeout", "The billing request timeout is now 60 seconds.")
        edges.append(Relationship(newest.id, other.id, RelationshipType.SUPERSEDES, 1.0, "", SCOPE))
    brain.store.add_relationships(edges)
    order = ranked(brain, query)
    assert (order.index(other.id) < order.index(exact.id)) is reordered


def test_the_briefing_states_the_value_that_prevails(make_brain: MakeBrain) -> None:
    brain = make_brain()
    now = utcnow()
    add_old_value(
        brain, timeout(45), written_days_ago=30, reads=12, memory_type=MemoryType.ARCHITECTURE
    )
    add_at(
        brain, "Billing timeout", timeout(30), now - timedelta(days=2), memory_type="architecture"
    )

    def briefed() -> str:
        return briefing_markdown(build_briefing(brain, count_tokens=len))

    assert "45 seconds" in briefed()  # the stronger of two near-duplicates stands for both
    brain.sleep_consolidate(threshold=0.7)
    assert "30 seconds" in briefed() and "45 seconds" not in briefed()


def test_a_question_naming_the_outranked_ones_subject_gets_it_first(make_brain: MakeBrain) -> None:
    # Two services' settings worded alike: cosine and numbers cannot tell them from one
    # setting's two values, but a question that names the service can.
    brain = make_brain()
    now = utcnow()
    inventory = add_at(
        brain,
        "Upload limit",
        "The inventory service max upload size is 35 megabytes.",
        now - timedelta(days=1),
        source=Source.USER_CONFIRMED,
    )
    catalog = add_at(
        brain, "Upload limit", "The catalog service max upload size is 12 megabytes.", now
    )
    edge = Relationship(inventory.id, catalog.id, RelationshipType.CONFLICTS, 1.0, "", SCOPE)
    brain.store.add_relationships([edge])
    assert ranked(brain, "What is the max upload size of the catalog service?")[0] == catalog.id
    assert ranked(brain, "What is the max upload size?")[:2] == [inventory.id, catalog.id]


def test_one_value_restated_many_times_writes_a_bounded_set_of_edges(
    make_brain: MakeBrain,
) -> None:
    # Values of one setting conflict pairwise: 60 recent ones, half confirmed by the user,
    # made 900 edges (600 of them: 89,945), and each later query finding them ordered them
    # all; equally trusted ones were reported pairwise.
    from octobrain.memory.conflicts import WINNERS_PER_LOSER

    brain = make_brain()
    now = utcnow()
    sources = (Source.USER_CONFIRMED, Source.AGENT_INFERRED)
    said = [
        add_at(brain, "Timeout", timeout(100 + i), now - timedelta(hours=i), source=sources[i % 2])
        for i in range(60)
    ]
    old = [add_at(brain, "Timeout", timeout(300 + i), now - timedelta(days=30)) for i in range(20)]
    report = brain.sleep_consolidate(threshold=0.7)
    edges = conflict_edges(brain)
    agents = [m.id for m in said[1::2]] + [m.id for m in old]
    assert 0 < len(edges) <= WINNERS_PER_LOSER * len(agents)
    assert {loser for _, loser in edges} == set(agents)  # each outranked, by the user's
    newest = said[0].id  # the newest user-confirmed value prevails over every agent's one
    assert all((newest, loser) in edges for loser in agents)
    counts: dict[str, int] = {}
    for pair in report.disagreements:
        for mid in pair:
            counts[mid] = counts.get(mid, 0) + 1
    assert report.disagreements and max(counts.values()) <= WINNERS_PER_LOSER


def test_a_conflict_is_found_when_one_side_is_crowded_by_restatements() -> None:
    # A row is compared with its NEAR_PER_ROW nearest only. A's were all restatements of its
    # own value, so B (45 s) fell off A's list, and B skipped A as "seen from the other side":
    # the conflict was lost. A crowded side no longer counts as having seen the pair.
    def unit(v: list[float]) -> np.ndarray:
        a = np.asarray(v, dtype=np.float32)
        return a / np.linalg.norm(a)

    rng = np.random.default_rng(0)
    rows: list[dict[str, Any]] = [
        {"id": "A", "content": timeout(30), "embedding": unit([1, 0, 0, 0])},
        {"id": "B", "content": timeout(45), "embedding": unit([0.6, 0.8, 0, 0])},
    ]
    rows += [
        {"id": f"C{i}", "content": timeout(30), "embedding": unit([1, -0.12, 0.02 * x, 0])}
        for i, x in enumerate(rng.standard_normal(NEAR_PER_ROW + 44))
    ]
    now = utcnow()
    pool = StatementPool(
        [r["id"] for r in rows],
        [r["content"] for r in rows],
        unit_rows(np.stack([r["embedding"] for r in rows])),
        ["user_confirmed"] * len(rows),
        [now] * len(rows),
    )
    pairs, _ = conflicting_pairs(rows, pool, 0.55)
    assert {frozenset(p) for p in pairs if "B" in p} == {frozenset(("A", "B"))}
