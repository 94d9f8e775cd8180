"""Conflicts: the same thing stated with two values, settled (or reported) by the sleep pass.

Real LanceDB in temp dirs; the bundled model where the two wordings must really be paraphrases,
the hash embedder where identical wording with another number is enough.
"""

from __future__ import annotations

import io
import math
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
    PAIRS_PER_PASS,
    PAIRS_PER_ROW,
    Statement,
    StatementPool,
    compatible,
    conflicting_pairs,
    numbers,
    prevailing,
    resolve,
)
from octobrain.memory.render_brief import briefing_markdown
from octobrain.memory.sweep import Sweep
from octobrain.models import Memory, MemoryType, Relationship, RelationshipType, Source
from octobrain.times import utcnow
from tests.consolidation_support import SCOPE, MakeBrain, add_at, all_edges
from tests.consolidation_support import make_brain as make_brain  # the fixture, shared

QUESTION = "What is the billing service request timeout?"
FILLER = [
    ("Billing retries", "The billing service retries a failed charge three times, an hour apart."),
    ("Search timeout", "Search queries give up after 2 seconds and return partial results."),
    ("Checkout errors", "Checkout shows a generic error page when the billing service is down."),
    ("Database", "Postgres 16 is the primary database; Redis only caches sessions."),
    ("Frontend stack", "The web client is written in TypeScript with React and Vite."),
    ("Deploys", "Deploys run through the blue green pipeline with a smoke test first."),
]


def timeout(value: int) -> str:
    return f"The billing service request timeout is {value} seconds."


def conflict_edges(brain: Brain) -> set[tuple[str, str]]:
    return {
        (e.source_id, e.target_id)
        for e in all_edges(brain).values()
        if e.relationship_type is RelationshipType.CONFLICTS
    }


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


def every_row_pairs(
    recent: list[dict[str, Any]], pool: StatementPool, threshold: float, near_most: int, most: int
) -> list[tuple[str, str]]:
    """The conflict search as it was before the pass's budget: every recent row, in order
    (fewer than 512, so their cosines come from one matrix product, as they did)."""
    quoted = [numbers(r["content"]) for r in recent]
    order = {r["id"]: i for i, r in enumerate(recent)}
    quoting = [at for at, found in enumerate(quoted) if found]
    if not quoting:
        return []
    vectors = unit_rows(np.stack([np.asarray(recent[at]["embedding"]) for at in quoting]))
    sims_of = dict(zip(quoting, vectors @ pool.vectors.T, strict=True))
    cut: set[int] = set()
    out: list[tuple[str, str]] = []
    for at in quoting:
        row, sims = recent[at], sims_of[at]
        near = [k for k in np.flatnonzero(sims >= threshold) if pool.ids[k] != row["id"]]
        if len(near) > near_most:
            near = sorted(near, key=lambda k: -sims[k])[:near_most]  # stable: ties by position
            cut.add(at)
        found = []
        for k in near:
            seen_from = order.get(pool.ids[k], len(recent))
            if seen_from < at and seen_from not in cut:
                continue
            theirs = numbers(pool.contents[k])
            if theirs and not quoted[at] & theirs:
                found.append((-float(sims[k]), int(k)))
        out += [(row["id"], pool.ids[k]) for _, k in sorted(found)[:most]]
    return out


def random_store(
    rng: np.random.Generator, size: int
) -> tuple[list[dict[str, Any]], StatementPool, dict[str, Statement]]:
    """Rows around a few centres (some copies, so cosines tie), quoting 0-2 of a few numbers;
    a random part of them recent, and statements with tied trusts and times."""
    centres = rng.standard_normal((3, 8))
    now = utcnow()
    rows: list[dict[str, Any]] = []
    for i in range(size):
        vec = centres[rng.integers(3)] + 0.15 * rng.standard_normal(8) * (rng.random() < 0.8)
        said = " ".join(str(n) for n in rng.choice([10, 20, 30, 45], rng.integers(3)))
        rows.append(
            {
                "id": f"m{i:03d}",
                "content": f"timeout {said}",
                "embedding": vec.astype(np.float32),
                "created_at": now - timedelta(days=int(rng.integers(4))),
            }
        )
    pool = StatementPool(
        [r["id"] for r in rows],
        [r["content"] for r in rows],
        unit_rows(np.stack([r["embedding"] for r in rows])),
        ["agent_inferred"] * size,
        [r["created_at"] for r in rows],
    )
    statements = {
        r["id"]: Statement(r["id"], float(rng.choice([0.8, 1.0])), r["created_at"]) for r in rows
    }
    recent = [r for r in rows if rng.random() < 0.6]
    return recent, pool, statements


@pytest.mark.parametrize("crowded", [False, True])
def test_a_pass_within_its_budget_records_what_checking_every_row_did(
    monkeypatch: pytest.MonkeyPatch, crowded: bool
) -> None:
    # The budget changes which rows a pass checks, never what it finds among them: on stores
    # that fit it the pairs come in the same order, so `prevailing` (which takes the first of
    # a pair stated at the same time as the newer) settles every pair as it did.
    from octobrain.memory import conflicts

    near_most, most = (6, 3) if crowded else (NEAR_PER_ROW, conflicts.PAIRS_PER_ROW)
    monkeypatch.setattr(conflicts, "NEAR_PER_ROW", near_most)
    monkeypatch.setattr(conflicts, "PAIRS_PER_ROW", most)
    rng = np.random.default_rng(7)
    window = utcnow() - timedelta(days=2)
    for size in rng.integers(2, 50, size=60).tolist():
        recent, pool, statements = random_store(rng, size)
        before = every_row_pairs(recent, pool, 0.8, near_most, most)
        pairs, unchecked = conflicting_pairs(recent, pool, 0.8)
        assert (pairs, unchecked) == (before, 0)
        assert resolve(pairs, statements, set(), window) == resolve(
            before, statements, set(), window
        )


def test_a_pass_compares_a_bounded_number_of_pairs_newest_first() -> None:
    # 3,000 values of one setting, all recent: every row's 256 nearest conflict. Each row kept
    # 128 pairs: 384,000 at once (21,500 rows: 2.75 million, 23 s and 1.39 GB).
    rng = np.random.default_rng(3)
    now = utcnow()
    size = 3_000
    vectors = unit_rows((1 + 0.05 * rng.standard_normal((size, 16))).astype(np.float32))
    rows = [
        {
            "id": f"v{i}",
            "content": timeout(1000 + i),
            "embedding": vectors[i],
            "created_at": now - timedelta(minutes=size - i),
        }
        for i in range(size)
    ]
    pool = StatementPool(
        [r["id"] for r in rows],
        [r["content"] for r in rows],
        vectors,
        ["agent_inferred"] * size,
        [r["created_at"] for r in rows],
    )
    pairs, unchecked = conflicting_pairs(rows[::-1], pool, 0.8)  # the order read is no matter
    checked = size - unchecked
    assert checked == PAIRS_PER_PASS // NEAR_PER_ROW  # every row compared its 256 nearest
    assert len(pairs) <= checked * PAIRS_PER_ROW
    assert {a for a, _ in pairs} == {f"v{i}" for i in range(size - checked, size)}  # newest
    # A row left out is still paired with the rows checked, from their side.
    assert any(b == f"v{size - checked - 1}" for _, b in pairs)


def test_the_pass_reports_the_rows_its_budget_left_to_a_later_pass(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    from octobrain.memory import conflicts

    brain = make_brain()
    now = utcnow()
    said = [add_at(brain, "Timeout", timeout(30 + i), now - timedelta(hours=i)) for i in range(6)]
    monkeypatch.setattr(conflicts, "PAIRS_PER_PASS", 10)  # two rows of 5 other statements
    report = brain.sleep_consolidate(threshold=0.7, dry_run=True)
    assert report.unchecked == 4
    checked = {said[0].id, said[1].id}  # the newest
    assert report.disagreements and all(checked & set(pair) for pair in report.disagreements)
    monkeypatch.setattr(conflicts, "PAIRS_PER_PASS", 30)
    assert brain.sleep_consolidate(threshold=0.7, dry_run=True).unchecked == 0


def burst(brain: Brain, size: int) -> tuple[Memory, list[Memory]]:
    """A user's value, weeks old, and `size` agent guesses at it since, one an hour, newest
    first: each guess a conflict the user's value prevails in, once a pass checks the guess."""
    now = utcnow()
    told = add_at(
        brain, "Timeout", timeout(30), now - timedelta(days=30), source=Source.USER_CONFIRMED
    )
    guesses = [
        add_at(brain, "Timeout", timeout(100 + i), now - timedelta(hours=i)) for i in range(size)
    ]
    return told, guesses


def outranked(brain: Brain, told: Memory) -> set[str]:
    return {loser for winner, loser in conflict_edges(brain) if winner == told.id}


def test_successive_passes_check_every_row_of_a_burst_over_the_budget(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 24 guesses, each compared with the 24 other statements, 5 a pass: the passes before
    # checked the same 5 newest every time, and 19 guesses never met the user's value.
    from octobrain.memory import conflicts

    brain = make_brain()
    told, guesses = burst(brain, 24)
    monkeypatch.setattr(conflicts, "PAIRS_PER_PASS", 5 * 24)
    waiting = []
    for _ in range(math.ceil(24 / 5) + 1):
        waiting.append(brain.sleep_consolidate(threshold=0.7).unchecked)
    assert outranked(brain, told) == {g.id for g in guesses}
    assert waiting == [19, 14, 9, 4, 0, 0]  # the rows no pass has checked yet


def test_a_burst_deeper_than_the_window_is_checked_by_daily_passes(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 20 guesses within a day, 2 checked a pass, one pass a day: 10 passes' worth, and the
    # 7-day window lets the guesses go after 7. The 6 guesses left then were never checked:
    # the user's value never outranked them.
    from octobrain.memory import conflicts
    from octobrain.memory.sleep import sleep_pass

    brain = make_brain()
    told, guesses = burst(brain, 20)
    monkeypatch.setattr(conflicts, "PAIRS_PER_PASS", 2 * 20)  # 20 other statements a row
    start, waiting = utcnow(), []
    for day in range(12):
        report = sleep_pass(
            brain.consolidator,
            brain.scope,
            threshold=0.7,
            min_size=3,
            max_age_days=7,
            now=start + timedelta(days=day),
        )
        waiting.append(report.unchecked)
    assert outranked(brain, told) == {g.id for g in guesses}
    assert waiting == [18, 16, 14, 12, 10, 8, 6, 4, 2, 0, 0, 0]


def test_a_burst_is_checked_by_the_lazy_passes_of_one_day(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A command an hour for a day, 20 guesses, 2 checked a pass: the pass was due once a day,
    # so 18 guesses waited for 9 more days. While rows are left it is due after an hour, and
    # once none are, after a day again: 10 passes, not 24.
    from octobrain.memory import conflicts, curation, sleep_startup

    brain = make_brain()
    told, guesses = burst(brain, 20)
    monkeypatch.setattr(conflicts, "PAIRS_PER_PASS", 2 * 20)
    start, clock = utcnow(), [utcnow()]
    monkeypatch.setattr(sleep_startup, "utcnow", lambda: clock[0])
    monkeypatch.setattr(curation, "utcnow", lambda: clock[0])
    passes = []
    sleep_consolidate = Brain.sleep_consolidate

    def counted(self: Brain, **kwargs: Any) -> Any:
        report = sleep_consolidate(self, **kwargs, threshold=0.7)  # (the test embedder's)
        passes.append(report.unchecked)
        return report

    monkeypatch.setattr(Brain, "sleep_consolidate", counted)
    for hour in range(24):
        clock[0] = start + timedelta(hours=hour, minutes=1)
        sleep_startup._started.clear()  # a new process: one command
        thread = sleep_startup.start_background_sleep(brain, marker_dir=tmp_path / "m")
        if thread is not None:
            thread.join(timeout=60)
    assert passes == [18, 16, 14, 12, 10, 8, 6, 4, 2, 0]
    assert outranked(brain, told) == {g.id for g in guesses}


def test_a_row_written_between_passes_is_checked_by_the_next_pass_first(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    from octobrain.memory import conflicts

    brain = make_brain()
    told, guesses = burst(brain, 12)
    monkeypatch.setattr(conflicts, "PAIRS_PER_PASS", 3 * 12)  # 3 rows of 12 others a pass
    assert brain.sleep_consolidate(threshold=0.7).unchecked == 9
    assert outranked(brain, told) == {g.id for g in guesses[:3]}
    new = add_at(brain, "Timeout", timeout(99), utcnow(), source=Source.AGENT_INFERRED)
    # A dry run shows the next pass and moves nothing: twice the same.
    for _ in range(2):
        assert brain.sleep_consolidate(threshold=0.7, dry_run=True).unchecked == 8
    assert outranked(brain, told) == {g.id for g in guesses[:3]}
    # 2 rows of 13 others: the new row first, then on from where the last pass stopped.
    assert brain.sleep_consolidate(threshold=0.7).unchecked == 8
    assert outranked(brain, told) == {new.id} | {g.id for g in guesses[:4]}


def test_the_sweep_survives_rows_leaving_and_a_damaged_record(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    from octobrain.memory import conflicts, sweep

    brain = make_brain()
    told, guesses = burst(brain, 12)
    monkeypatch.setattr(conflicts, "PAIRS_PER_PASS", 3 * 12)
    brain.sleep_consolidate(threshold=0.7)
    # The row the last pass stopped at, and the next one, forgotten: the next pass goes on.
    assert brain.forget([guesses[2].id, guesses[3].id], confirm=True).deleted == 2
    assert brain.sleep_consolidate(threshold=0.7).unchecked == 5  # 8 not reached, 3 a pass
    assert outranked(brain, told) >= {g.id for g in guesses[4:7]}
    # A record it cannot read (or of another format) starts over from the newest.
    name = sweep.record_name(brain.scope)
    brain.store.location.write_json(name, {"format": 0, "newest": "x"})
    report = brain.sleep_consolidate(threshold=0.7, dry_run=True)
    assert report.unchecked == 7 and report.disagreements
    (brain.store.location.path / "_octobrain" / name).write_text("{not json")
    assert brain.sleep_consolidate(threshold=0.7, dry_run=True).unchecked == 7


def test_an_imported_row_dated_among_the_rows_checked_is_checked_too(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A guess imported after a pass, dated between the rows that pass checked, was taken for
    # one reached: not counted, and checked only when the check came round to it again.
    from octobrain.memory import conflicts
    from octobrain.memory.export import export_jsonl
    from octobrain.memory.transfer import import_jsonl

    brain = make_brain()
    told, guesses = burst(brain, 12)
    monkeypatch.setattr(conflicts, "PAIRS_PER_PASS", 3 * 12)
    assert brain.sleep_consolidate(threshold=0.7).unchecked == 9  # the 3 newest checked
    elsewhere = Brain(brain.scope, config=brain.config, embedder=brain.embedder, uri=tmp_path / "b")
    late = add_at(elsewhere, "Timeout", timeout(77), utcnow() - timedelta(minutes=90))
    out = io.StringIO()
    export_jsonl(elsewhere, out, embeddings=True)
    assert import_jsonl(brain, out.getvalue().splitlines()).imported == 1
    # 2 rows of 13 others a pass: the imported row first, then on below: 10 - 2 left.
    assert brain.sleep_consolidate(threshold=0.7, dry_run=True).unchecked == 8
    assert brain.sleep_consolidate(threshold=0.7).unchecked == 8
    assert outranked(brain, told) == {late.id} | {g.id for g in guesses[:4]}


def test_an_import_during_a_pass_is_kept_in_the_record_that_pass_writes(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # `memory import` starts the day's lazy pass as it starts: a pass that read the record
    # before the import marked its rows must not write over that mark.
    from octobrain.memory import conflicts
    from octobrain.memory.export import export_jsonl
    from octobrain.memory.transfer import import_jsonl

    brain = make_brain()
    told, _ = burst(brain, 12)
    monkeypatch.setattr(conflicts, "PAIRS_PER_PASS", 3 * 12)
    brain.sleep_consolidate(threshold=0.7)
    elsewhere = Brain(brain.scope, config=brain.config, embedder=brain.embedder, uri=tmp_path / "b")
    late = add_at(elsewhere, "Timeout", timeout(77), utcnow() - timedelta(minutes=90))
    out = io.StringIO()
    export_jsonl(elsewhere, out, embeddings=True)
    search = conflicts.conflicting_pairs

    def importing(*args: Any, **kwargs: Any) -> Any:
        import_jsonl(brain, out.getvalue().splitlines())  # while the pass runs
        return search(*args, **kwargs)

    monkeypatch.setattr(conflicts, "conflicting_pairs", importing)
    assert brain.sleep_consolidate(threshold=0.7).unchecked == 6  # (it read the rows before)
    monkeypatch.setattr(conflicts, "conflicting_pairs", search)
    assert brain.sleep_consolidate(threshold=0.7, dry_run=True).unchecked == 5  # 7 - 2
    brain.sleep_consolidate(threshold=0.7)
    assert late.id in outranked(brain, told)


def test_a_restore_starts_the_check_over_from_the_newest(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A restore took back the conflicts a pass recorded, not where the pass stopped: the next
    # passes went on below, and the 3 newest guesses stayed unordered until a round came back.
    from octobrain.memory import conflicts

    brain = make_brain()
    told, guesses = burst(brain, 12)
    monkeypatch.setattr(conflicts, "PAIRS_PER_PASS", 3 * 12)
    version = brain.history(1)[0].version
    add_at(brain, *FILLER[0], utcnow())  # a later version: the edges after it go back
    brain.sleep_consolidate(threshold=0.7)
    assert outranked(brain, told) == {g.id for g in guesses[:3]}
    brain.restore(version, confirm=True)
    assert outranked(brain, told) == set()
    assert brain.sleep_consolidate(threshold=0.7).unchecked == 9
    assert outranked(brain, told) == {g.id for g in guesses[:3]}
    # Its record written under the restore's mark, the pass after goes on from there.
    assert brain.sleep_consolidate(threshold=0.7).unchecked == 6
    assert outranked(brain, told) == {g.id for g in guesses[:6]}


def test_a_pass_a_restore_overtook_keeps_no_record(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A restore made while a pass ran (it took the edges back): the pass's record, read
    # before it, would say its rows were reached.
    from octobrain.memory import conflicts, sweep

    brain = make_brain()
    burst(brain, 12)
    monkeypatch.setattr(conflicts, "PAIRS_PER_PASS", 3 * 12)
    brain.sleep_consolidate(threshold=0.7)
    search = conflicts.conflicting_pairs

    def restored(*args: Any, **kwargs: Any) -> Any:
        sweep.start_over(brain.store.location)  # what a restore does, once its tables are back
        return search(*args, **kwargs)

    monkeypatch.setattr(conflicts, "conflicting_pairs", restored)
    assert brain.sleep_consolidate(threshold=0.7).unchecked == 6
    assert sweep.load(brain.store.location, brain.scope) == sweep.Sweep()


def test_the_sweep_reaches_every_row_in_as_few_passes_as_the_budget_allows() -> None:
    # Random bursts and rows checked a pass, rows written and forgotten between passes: the
    # count is always the rows no pass has reached; a row written since the last pass comes
    # first; and every pass but the last reaches as many new rows as it checks.
    rng = np.random.default_rng(11)
    for _ in range(200):
        size, per = int(rng.integers(1, 60)), int(rng.integers(1, 12))
        keys = {at: (int(rng.integers(40)), f"r{at}") for at in range(size)}
        state, reached, passes = Sweep(), set(), 0
        while len(reached) < len(keys):
            if passes and rng.random() < 0.3:
                written = size + passes
                keys[written] = ((state.newest or (0, ""))[0] + 1, f"w{written}")
                assert state.order(keys)[0] == written
            if passes and rng.random() < 0.3:
                del keys[int(rng.choice(list(keys)))]
            order = state.order(keys)
            assert sorted(order) == sorted(keys)
            reached |= {keys[at] for at in order[:per]}
            state, waiting = state.after(keys, order, min(per, len(order)))
            assert waiting == sum(k not in reached for k in keys.values())
            assert Sweep.from_record(state.to_record("s"), "s") == state
            passes += 1
        assert passes <= math.ceil(len(reached) / per)


def test_reopening_keys_leaves_them_and_every_row_unreached_before_in_a_gap() -> None:
    # An import's range joined with the gaps a sweep holds: nothing unreached is lost, the
    # range is unreached, and the record stays one a pass reads back.
    rng = np.random.default_rng(5)
    for _ in range(300):
        keys = {at: (int(rng.integers(60)), f"r{at}") for at in range(int(rng.integers(1, 50)))}
        state = Sweep()
        for _ in range(int(rng.integers(1, 6))):
            order = state.order(keys)
            state, _ = state.after(keys, order, int(rng.integers(1, len(order) + 1)))
        assert state.newest is not None
        low, high = sorted(int(v) for v in rng.integers(0, 60, size=2))
        opened = state.reopened((low, "a"), (high, "z"))
        assert Sweep.from_record(opened.to_record("s"), "s") == opened
        probe = [(m, f"p{m}") for m in range(60)] + list(keys.values())
        assert all(opened.holds(k) for k in probe if state.holds(k))
        assert all(opened.holds(k) for k in probe if low <= k[0] <= high and k < state.newest)


def test_a_sweep_that_cannot_be_kept_fails_no_pass(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A store whose `_octobrain/` this process may not write (or a full disk): the pass's
    # conflicts are recorded already; losing where it stopped only repeats work.
    from octobrain.memory import sweep
    from octobrain.store.location import StoreLocation

    location = StoreLocation(str(tmp_path / "db"))
    (tmp_path / "db").mkdir()
    (tmp_path / "db" / "_octobrain").write_text("not a directory")
    with caplog.at_level("WARNING"):
        sweep.save(location, "github.com/acme/api", sweep.Sweep(newest=(1, "a")))
    assert "where this pass stopped was not kept" in caplog.text
    assert sweep.load(location, "github.com/acme/api") == sweep.Sweep()


def test_a_sweep_that_cannot_be_read_starts_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # An object store's own error (unreachable, access denied) or a record nested past
    # reading failed the whole sleep pass, while one that could not be written did not.
    from octobrain.memory import sweep
    from octobrain.store.location import StoreLocation

    class BucketError(Exception):
        pass

    def unreachable(self: StoreLocation, name: str) -> None:
        raise BucketError("the bucket did not answer")

    location = StoreLocation(str(tmp_path / "db"))
    monkeypatch.setattr(StoreLocation, "read_json", unreachable)
    with caplog.at_level("WARNING"):
        assert sweep.load(location, "github.com/acme/api") == sweep.Sweep()
    assert "could not be read (the bucket did not answer)" in caplog.text

    def nested(self: StoreLocation, name: str) -> None:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(StoreLocation, "read_json", nested)
    assert sweep.load(location, "github.com/acme/api") == sweep.Sweep()
