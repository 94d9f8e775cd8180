"""Forgetting as a feature: decay, sleep consolidation, goals, unconsolidate, archive.

Real LanceDB in temp dirs; the hash embedder for speed, the bundled model where paraphrases
must really be near-duplicates.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.errors import InvalidInput
from octobrain.kernels import decay
from octobrain.memory import goals, sleep, sleep_startup
from octobrain.memory.brain import Brain
from octobrain.memory.briefing import build_briefing
from octobrain.memory.render import format_stored
from octobrain.models import Memory, MemoryType, RelationshipType, Source
from octobrain.store.schema import row_to_relationship
from octobrain.times import utcnow
from tests.core import reference

SCOPE = "github.com/acme/api"
MakeBrain = Callable[..., Brain]

RATE_LIMIT_NOTES = [
    "API rate limiting uses a token bucket per API key: 100 requests per minute.",
    "Rate limiting for the API is a token bucket per key, allowing 100 requests per minute.",
    "The API's rate limiting: token bucket per key, 100 requests a minute, bursts up to 20.",
    "We rate limit API calls with a per-key token bucket of 100 requests per minute.",
    "Rate limiting in the API: each key gets a token bucket with 100 requests per minute; "
    "over the limit returns 429.",
]
# Near-identical for the hash embedder too (pairwise cosine well above 0.85).
TWINS = [
    "Deploys run through the blue green pipeline with a smoke test before the switch.",
    "Deploys run through the blue green pipeline, with a smoke test before the switch.",
    "Deploys run through the blue green pipeline with one smoke test before the switch.",
    "All deploys run through the blue green pipeline with a smoke test before the switch.",
]
OTHER = [
    ("Primary database", "Postgres 16 is the primary database; Redis only caches sessions."),
    ("Frontend stack", "The web client is written in TypeScript with React and Vite."),
]


@pytest.fixture
def make_brain(tmp_path: Path) -> MakeBrain:
    def make(scope: str = SCOPE, model: str = "hash:64") -> Brain:
        return Brain(scope, config=Config(), embedder=get_embedder(model), uri=tmp_path)

    return make


def add_at(brain: Brain, title: str, content: str, when: datetime, **fields: Any) -> Memory:
    """Store a memory as if written at `when` (memorize always stamps now)."""
    fields.setdefault("scope", brain.scope)
    memory = Memory(
        title=title, content=content, created_at=when, updated_at=when, last_accessed=when, **fields
    )
    brain.store.add([memory], brain.embedder.embed_documents([memory.searchable_text()]))
    return memory


def raw_rows(brain: Brain) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in brain.store.scan("true")}


def all_edges(brain: Brain) -> dict[str, Any]:
    rows = brain.store.relationships.search().where("true").limit(None).to_list()
    return {r["id"]: row_to_relationship(r) for r in rows}


def twins(
    brain: Brain,
    source: Source = Source.AGENT_INFERRED,
    count: int = 4,
    title: str = "Deploy pipeline",
) -> list[str]:
    now = utcnow()
    return [
        add_at(brain, title, text, now - timedelta(hours=6 * i), source=source).id
        for i, text in enumerate(TWINS[:count])
    ]


def _without_access(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in ("access_count", "last_accessed")}


# ---- decay --------------------------------------------------------------------------------


def test_decay_curve_halves_every_90_days_and_never_reaches_zero() -> None:
    now = datetime(2026, 6, 1).astimezone()
    days = [0, 45, 90, 180, 3650]
    seen = [(now - timedelta(days=d)).timestamp() for d in days]
    values = decay.decayed_importance([0.5] * 5, seen, [0] * 5, now)
    assert values == pytest.approx([0.5, 0.5 * 2**-0.5, 0.25, 0.125, 0.05], rel=1e-6)
    # One access reinforces (×(1 + 1.2·ln 2)), capped at 1.
    boosted = decay.decayed_importance([0.5, 0.8], [now.timestamp()] * 2, [1, 1], now)
    assert boosted == pytest.approx([0.5 * (1 + 1.2 * np.log(2)), 1.0])


# ---- sleep consolidation ------------------------------------------------------------------


def test_five_rate_limiting_notes_over_a_day_become_one_parent_on_next_startup(
    make_brain: MakeBrain, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    brain = make_brain(model="minilm")

    def markers() -> Iterator[Path]:
        return (tmp_path / "markers").glob("*.json")

    now = utcnow()
    notes = [
        add_at(brain, f"Rate limiting note {i + 1}", text, now - timedelta(hours=5 * i))
        for i, text in enumerate(RATE_LIMIT_NOTES)
    ]
    for title, content in OTHER:
        add_at(brain, title, content, now - timedelta(hours=2))
    trims: list[int] = []  # (what the pass used is handed back once it is done)
    monkeypatch.setattr(sleep_startup, "trim_heap", lambda: trims.append(len(list(markers()))))
    thread = sleep_startup.start_background_sleep(brain, marker_dir=tmp_path / "markers")
    assert thread is not None
    thread.join(timeout=120)
    marker = json.loads(next(markers()).read_text())
    assert marker["consolidated"] == 1
    assert trims == [1]  # once, after the pass was recorded
    # A second startup in the same or another process within 24 h does nothing.
    assert sleep_startup.start_background_sleep(brain, marker_dir=tmp_path / "markers") is None

    rows = raw_rows(brain)
    parents = [r for r in rows.values() if r["id"] not in {n.id for n in notes}]
    parents = [r for r in parents if r["title"] not in dict(OTHER)]
    assert len(parents) == 1
    parent = parents[0]
    assert {rows[n.id]["state"] for n in notes} == {"consolidated"}
    assert parent["state"] == "working" and parent["scope"] == SCOPE
    assert parent["importance"] == pytest.approx(0.55)
    assert [rows[n.id]["importance"] for n in notes] == pytest.approx([0.1] * 5)
    # A summary of facts, not a list of titles: no title appears, the facts do.
    assert "Rate limiting note" not in parent["content"]
    for fact in ("token bucket", "100 requests", "429", "20"):
        assert fact in parent["content"]
    edges = [e for e in all_edges(brain).values() if e.source_id == parent["id"]]
    assert {e.target_id for e in edges} == {n.id for n in notes}
    assert {e.relationship_type for e in edges} == {RelationshipType.CONSOLIDATED_FROM}

    hits = brain.remember("rate limiting", limit=10).hits
    assert hits[0].memory.id == parent["id"]
    ranked = [h.memory.id for h in hits]
    assert {n.id for n in notes} <= set(ranked)  # still retrievable, below their parent
    assert all(h.consolidated_into == [parent["id"]] for h in hits[1:] if h.memory.id in ranked)


def test_sleep_never_mixes_tiers_scopes_or_global_and_skips_old_memories(
    make_brain: MakeBrain,
) -> None:
    brain = make_brain()
    inferred = twins(brain)
    confirmed = twins(brain, Source.USER_CONFIRMED, count=2)  # with 4 inferred: never mixed
    other = make_brain("github.com/acme/web")
    foreign = twins(other)
    glob = make_brain("")
    global_ids = twins(glob)
    old = [add_at(brain, "Deploy pipeline", t, utcnow() - timedelta(days=10)).id for t in TWINS]
    report = brain.sleep_consolidate()
    assert len(report.consolidations) == 1
    assert {m.id for m in report.consolidations[0].members} == set(inferred)
    rows = raw_rows(brain)
    for mid in confirmed + foreign + global_ids + old:
        assert rows[mid]["state"] == "working"
    parent = report.consolidations[0].parent
    assert (parent.source, rows[parent.id]["scope"]) == (Source.AGENT_INFERRED, SCOPE)
    # A second pass merges nothing new: the parent is not re-clustered.
    assert brain.sleep_consolidate().consolidations == []


def test_dry_run_reports_and_writes_nothing(make_brain: MakeBrain) -> None:
    brain = make_brain()
    twins(brain)
    before, version = raw_rows(brain), brain.store.version()
    report = brain.sleep_consolidate(dry_run=True)
    assert len(report.consolidations) == 1 and report.consolidations[0].record_id == ""
    assert brain.store.version() == version and raw_rows(brain) == before


def test_sleep_arguments_are_validated(make_brain: MakeBrain) -> None:
    brain = make_brain()
    with pytest.raises(InvalidInput, match="^min_size: must be an integer >= 2"):
        brain.sleep_consolidate(min_size=1)
    with pytest.raises(InvalidInput, match=r"^threshold: must be a number in \[0, 1\]"):
        brain.sleep_consolidate(threshold=1.5)
    with pytest.raises(InvalidInput, match="^max_age_days: must be a positive"):
        brain.sleep_consolidate(max_age_days=0)
    for days in (36_501, 1e6, 1e9, 1e300):  # past a century; the largest overflowed the dates
        with pytest.raises(InvalidInput, match="^max_age_days: .*at most 36,500"):
            brain.sleep_consolidate(max_age_days=days)
    assert brain.sleep_consolidate(max_age_days=36_500).consolidations == []


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(0, 2**32 - 1), threshold=st.sampled_from([0.8, 0.85, 0.9]))
def test_sleep_clusters_are_exactly_the_reference_clusters(
    tmp_path_factory: pytest.TempPathFactory, seed: int, threshold: float
) -> None:
    """Through the whole pass, on real stored embeddings: what merges is what the plain Python
    complete-linkage reference merges, and no merged pair is below the threshold."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((3, 16))
    vectors = np.concatenate(
        [c + rng.uniform(0.05, 0.5) * rng.standard_normal((4, 16)) for c in centres]
        + [rng.standard_normal((4, 16))]
    ).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    brain = Brain(
        SCOPE, config=Config(), embedder=get_embedder("hash:16"), uri=tmp_path_factory.mktemp("db")
    )
    now = utcnow()
    memories = [
        Memory(
            title=f"Memory {i}",
            content="Content of one memory (no numbers: nothing conflicts).",
            scope=SCOPE,
        )
        for i in range(len(vectors))
    ]
    for i, m in enumerate(memories):
        m.created_at = m.updated_at = m.last_accessed = now - timedelta(seconds=len(vectors) - i)
    brain.store.add(memories, vectors)
    report = brain.sleep_consolidate(threshold=threshold)
    merged = sorted(
        sorted(int(m.title.split()[1]) for m in c.members) for c in report.consolidations
    )
    expected = sorted(
        reference.cosine_clusters(vectors.astype(np.float64), threshold, 3, "complete")
    )
    assert merged == expected
    for group in merged:
        sims = vectors[group] @ vectors[group].T
        assert sims.min() >= threshold - 1e-5


# ---- goals --------------------------------------------------------------------------------


def test_goal_workflow_closing_note_consolidates_in_the_same_call(make_brain: MakeBrain) -> None:
    brain = make_brain()
    goal, _ = brain.memorize(
        "Ship rate limiting", "Goal: rate limit the public API before launch.", memory_type="goal"
    )
    findings = [
        brain.memorize(
            f"Finding {i}",
            text,
            importance=imp,
            related_to=[{"target_id": goal.id, "relationship_type": "achieves"}],
        )[0]
        for i, (text, imp) in enumerate(
            [
                ("Token bucket per key chosen for rate limiting.", 0.6),
                ("Limits live in config/limits.toml, reloaded on SIGHUP.", 0.8),
            ]
        )
    ]
    unrelated, _ = brain.memorize(*OTHER[0])
    before = raw_rows(brain)
    closing, edges = brain.memorize(
        "Rate limiting shipped",
        "Rate limiting is live: token bucket per key, limits in config/limits.toml.",
        importance=0.3,
        related_to=[{"target_id": goal.id, "relationship_type": "closes"}],
    )
    assert closing.importance == pytest.approx(0.88)  # max(0.6, 0.8) × 1.1
    kinds = sorted(e.relationship_type.value for e in edges)
    assert kinds == ["closes", "consolidated_from", "consolidated_from"]
    rows = raw_rows(brain)
    assert rows[closing.id]["importance"] == pytest.approx(0.88)
    assert [rows[f.id]["state"] for f in findings] == ["consolidated", "consolidated"]
    assert [rows[f.id]["importance"] for f in findings] == pytest.approx([0.12, 0.16])
    assert rows[goal.id]["state"] == rows[unrelated.id]["state"] == "working"
    hits = brain.remember("rate limiting token bucket", limit=5).hits
    assert hits[0].memory.id == closing.id

    undone = brain.unconsolidate(closing.id)
    assert sorted(undone.restored) == sorted(f.id for f in findings) and not undone.parent_removed
    after = raw_rows(brain)
    assert after[closing.id]["importance"] == pytest.approx(0.3)  # the note is kept, as written
    for f in findings:  # bit for bit, updated_at included (the remember above counted an access)
        assert _without_access(after[f.id]) == _without_access(before[f.id])


def test_a_close_consolidates_a_bounded_batch_of_findings_oldest_first(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A goal with 30,000 findings made one closing `memorize` take 5–15 s and 1.9 GB and
    # answer 2 MB, one line per finding: a close now takes a batch, and says what is left.
    monkeypatch.setattr(goals, "CLOSE_BATCH", 2)
    brain = make_brain()
    goal, _ = brain.memorize("Harden the API", "Goal: close every known hole.", memory_type="goal")
    link = [{"target_id": goal.id, "relationship_type": "achieves"}]
    findings = [
        brain.memorize(f"Hole {i} fixed", f"Fixed hole number {i} in the API.", related_to=link)[0]
        for i in range(5)
    ]
    note, edges = brain.memorize(
        "API hardened",
        "Every known hole in the API is closed.",
        related_to=[{"target_id": goal.id, "relationship_type": "closes"}],
    )
    taken = [
        e.target_id for e in edges if e.relationship_type is RelationshipType.CONSOLIDATED_FROM
    ]
    assert taken == [findings[0].id, findings[1].id]  # the oldest first
    assert brain.findings_left(edges) == 3
    reply = format_stored(note, edges, brain.findings_left(edges))
    assert f"Goal {goal.id} still has 3 working findings" in reply, reply
    assert [raw_rows(brain)[f.id]["state"] for f in findings] == ["consolidated"] * 2 + [
        "working"
    ] * 3
    done = brain.consolidate_goal(goal.id)  # the next batch, under the closing note
    assert done.parent.id == note.id and [m.id for m in done.members] == [
        findings[2].id,
        findings[3].id,
    ]
    assert "1 more still working" in done.description
    assert [m.id for m in brain.consolidate_goal(goal.id).members] == [findings[4].id]
    with pytest.raises(InvalidInput, match="^goal_id: no working memory"):
        brain.consolidate_goal(goal.id)


def test_a_sleep_pass_over_many_alike_notes_does_bounded_work_in_bounded_records(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 4,000 copies of one note took a pass 31 s and 1.4 GB (clustering ~n^2.3) and made one
    # journal record of 4,000 members: rows are clustered a window at a time and a cluster
    # becomes consolidations of at most MAX_MEMBERS consecutive members, each undoable on its
    # own. (Both bounds made small here.)
    monkeypatch.setattr(sleep, "CLUSTER_WINDOW", 8)
    monkeypatch.setattr(sleep, "MAX_MEMBERS", 4)
    brain = make_brain()
    now = utcnow()
    ids = [
        add_at(brain, "Deploy pipeline", TWINS[i % 4], now - timedelta(minutes=20 - i)).id
        for i in range(20)
    ]
    first = brain.sleep_consolidate()
    sizes = [len(c.members) for c in first.consolidations]
    assert sizes == [4] * 5, sizes  # windows of 8, 8, 4; each cut into even parts of 4
    groups = [{m.id for m in c.members} for c in first.consolidations]
    assert groups == [set(ids[at : at + 4]) for at in range(0, 20, 4)]  # consecutive, in order
    assert {raw_rows(brain)[i]["state"] for i in ids} == {"consolidated"}
    assert brain.sleep_consolidate().consolidations == []  # parents in force stay apart
    undone = brain.unconsolidate(first.consolidations[2].parent.id).restored
    assert sorted(undone) == sorted(ids[8:12])  # one part undone alone: the rest stay merged
    assert sorted(i for i in ids if raw_rows(brain)[i]["state"] == "working") == sorted(ids[8:12])


def test_consolidate_goal_synthesises_a_summary_parent_and_unconsolidate_removes_it(
    make_brain: MakeBrain,
) -> None:
    brain = make_brain()
    goal, _ = brain.memorize("Cut p95 latency", "Goal: p95 under 200 ms.", memory_type="goal")
    link = [{"target_id": goal.id, "relationship_type": "achieves"}]
    a, _ = brain.memorize("Cache", "Added a read-through cache for sessions.", related_to=link)
    b, _ = brain.memorize(
        "Index", "Added an index on orders.created_at.", related_to=link, source="user_confirmed"
    )
    with pytest.raises(InvalidInput, match="^goal_id: memory .* is a code, not a goal"):
        brain.consolidate_goal(a.id)
    done = brain.consolidate_goal(goal.id)
    assert done.synthesised and done.parent.memory_type is MemoryType.INSIGHT
    assert done.parent.source is Source.AGENT_INFERRED  # the least trusted source's tier
    assert (
        "read-through cache" in done.parent.content and "orders.created_at" in done.parent.content
    )
    closes = [
        e for e in all_edges(brain).values() if e.relationship_type is RelationshipType.CLOSES
    ]
    assert [(e.source_id, e.target_id) for e in closes] == [(done.parent.id, goal.id)]
    with pytest.raises(InvalidInput, match="^goal_id: no working memory"):
        brain.consolidate_goal(goal.id)  # already closed

    undone = brain.unconsolidate(done.parent.id)
    assert undone.parent_removed and sorted(undone.restored) == sorted([a.id, b.id])
    rows = raw_rows(brain)
    assert done.parent.id not in rows
    assert {rows[a.id]["state"], rows[b.id]["state"]} == {"working"}
    assert not [
        e for e in all_edges(brain).values() if done.parent.id in (e.source_id, e.target_id)
    ]
    with pytest.raises(InvalidInput, match="^parent_id: no consolidation in force"):
        brain.unconsolidate(done.parent.id)


# ---- reversibility ------------------------------------------------------------------------


def test_unconsolidate_restores_every_row_and_edge_bit_for_bit(make_brain: MakeBrain) -> None:
    brain = make_brain()
    ids = twins(brain)
    brain.memorize(*OTHER[1], importance=0.7)
    before_rows, before_edges = raw_rows(brain), all_edges(brain)
    report = brain.sleep_consolidate()
    parent = report.consolidations[0].parent
    mid = raw_rows(brain)
    assert [mid[i]["pre_consolidation_importance"] for i in ids] == [0.5] * 4
    brain.unconsolidate(parent.id)
    assert raw_rows(brain) == before_rows  # every column, embeddings and timestamps included
    assert all_edges(brain) == before_edges
    # Undone members are left alone by later passes.
    assert brain.sleep_consolidate().consolidations == []


DEPLOY_NOTES = [
    "Deploys happen on Tuesday afternoons after standup.",
    "Deploys happen on Tuesday afternoons, after the standup, with the release checklist.",
    "Deploys happen on Tuesday afternoons after standup, approved by Dana Whitfield.",
]


def merged(brain: Brain, texts: Sequence[str]) -> tuple[Memory, list[Memory]]:
    """Store `texts` and merge them in one sleep pass: (the parent, the members)."""
    now = utcnow()
    notes = [add_at(brain, "Deploy day", text, now) for text in texts]
    (done,) = brain.sleep_consolidate(threshold=0.3, min_size=2).consolidations
    assert {m.id for m in done.members} == {n.id for n in notes}
    return done.parent, notes


def test_forgetting_a_merged_memory_gives_its_members_back(make_brain: MakeBrain) -> None:
    # They stayed consolidated at importance 0.1 under a parent that no longer existed: out of
    # the briefing, not undoable, skipped by every later pass.
    brain = make_brain()
    before = raw_rows(brain)
    parent, notes = merged(brain, DEPLOY_NOTES)
    forgotten = brain.forget([parent.id], confirm=True)
    assert forgotten.deleted == 1 and forgotten.rewritten == []
    assert set(forgotten.restored) == {n.id for n in notes}
    rows = raw_rows(brain)
    assert parent.id not in rows and set(rows) == set(before) | {n.id for n in notes}
    assert {rows[n.id]["state"] for n in notes} == {"working"}
    assert [rows[n.id]["importance"] for n in notes] == pytest.approx([0.5] * 3)
    assert not [e for e in all_edges(brain).values() if parent.id in (e.source_id, e.target_id)]
    shown = {i.memory.id for i in build_briefing(brain).items}
    assert {n.id for n in notes} & shown


def test_forgetting_a_member_takes_its_words_out_of_the_merged_memory(
    make_brain: MakeBrain,
) -> None:
    # The merged memory still said "approved by Dana Whitfield", and answered for it.
    brain = make_brain()
    parent, notes = merged(brain, DEPLOY_NOTES)
    assert "Dana Whitfield" in parent.content
    forgotten = brain.forget([notes[2].id], confirm=True)
    assert (forgotten.deleted, forgotten.restored, forgotten.rewritten) == (1, [], [parent.id])
    rows = raw_rows(brain)
    assert "Dana" not in rows[parent.id]["content"] and "checklist" in rows[parent.id]["content"]
    assert {rows[n.id]["state"] for n in notes[:2]} == {"consolidated"}
    hits = brain.remember("approved by Dana Whitfield", record_access=False).hits
    assert not [h for h in hits if "Dana" in h.memory.content]
    # The rewritten parent is still undoable, and gives back the members it has left.
    assert set(brain.unconsolidate(parent.id).restored) == {n.id for n in notes[:2]}


def test_a_forget_in_a_store_that_never_consolidated_makes_no_journal(
    make_brain: MakeBrain, tmp_path: Path
) -> None:
    # The check for consolidations a forget touches opened (so made) the journal table.
    brain = make_brain()
    note = add_at(brain, "Deploy day", DEPLOY_NOTES[0], utcnow())
    assert brain.forget([note.id], confirm=True).deleted == 1
    assert not (tmp_path / "consolidations.lance").exists()


def test_forgetting_all_but_one_member_undoes_the_merge(make_brain: MakeBrain) -> None:
    brain = make_brain()
    parent, notes = merged(brain, DEPLOY_NOTES[1:])
    forgotten = brain.forget([notes[1].id], confirm=True)
    assert (forgotten.restored, forgotten.rewritten) == ([notes[0].id], [])
    rows = raw_rows(brain)
    assert parent.id not in rows and rows[notes[0].id]["state"] == "working"


def test_editing_a_member_rewrites_the_merged_memory(make_brain: MakeBrain) -> None:
    # The merged memory kept the old text and ranked above the corrected member.
    brain = make_brain()
    parent, notes = merged(brain, DEPLOY_NOTES)
    brain.update(notes[2].id, content="Deploys happen on Tuesday afternoons, approved by Lee Chen.")
    content = raw_rows(brain)[parent.id]["content"]
    assert "Lee Chen" in content and "Dana" not in content
    brain.update(notes[0].id, importance=0.9)  # no change of text: the parent is left as it is
    assert raw_rows(brain)[parent.id]["content"] == content


def merged_at(
    brain: Brain, texts: Sequence[str], importances: Sequence[float]
) -> tuple[Memory, list[Memory]]:
    """As `merged`, each note at its importance."""
    now = utcnow()
    notes = [
        add_at(brain, "Deploy day", text, now, importance=imp)
        for text, imp in zip(texts, importances, strict=True)
    ]
    (done,) = brain.sleep_consolidate(threshold=0.3, min_size=2).consolidations
    assert {m.id for m in done.members} == {n.id for n in notes}
    return done.parent, notes


def test_unconsolidate_gives_back_an_importance_that_an_edit_of_a_tag_wrote_again(
    make_brain: MakeBrain,
) -> None:
    # A tag added to a member wrote its damped 0.12 back as float32(0.12), one bit off 0.6 × 0.2,
    # and unconsolidate took that for an importance the user set: the member stayed at 0.12.
    brain = make_brain()
    imps = [0.6, 0.31, 0.29]  # (0.6 and 0.31: two of the 30 in 0.01..1.00 the bit hit)
    parent, notes = merged_at(brain, DEPLOY_NOTES, imps)
    for note in notes:
        brain.update(note.id, add_tags=["deploys"])
    brain.update(notes[2].id, importance=0.9)  # one the user did set: that stays
    brain.unconsolidate(parent.id)
    assert [brain.get(n.id).importance for n in notes] == [0.6, 0.31, 0.9]
    assert {brain.get(n.id).state.value for n in notes} == {"working"}


def test_unconsolidate_gives_back_a_closing_notes_importance_after_an_edit_of_its_tags(
    make_brain: MakeBrain,
) -> None:
    # The note promoted to 0.77 kept it after any edit (a tag): the revert skipped it.
    brain = make_brain()
    goal, _ = brain.memorize("Ship CI", "Goal: a green CI on every branch.", memory_type="goal")
    finding, _ = brain.memorize(
        "CI cache",
        "The CI caches node_modules by lockfile hash.",
        importance=0.7,
        related_to=[{"target_id": goal.id, "relationship_type": "achieves"}],
    )
    note, _ = brain.memorize(
        "CI shipped",
        "CI is green on every branch; node_modules cached by lockfile hash.",
        importance=0.3,
        related_to=[{"target_id": goal.id, "relationship_type": "closes"}],
    )
    assert brain.get(note.id).importance == 0.77
    brain.update(note.id, add_tags=["ci"])
    brain.unconsolidate(note.id)
    closed = brain.get(note.id)
    assert (closed.importance, closed.tags) == (0.3, ["ci"])  # the tag, the user's, stays
    assert brain.get(finding.id).importance == 0.7


def test_a_tag_added_to_a_member_leaves_what_the_user_wrote_in_the_merged_memory(
    make_brain: MakeBrain,
) -> None:
    # The tag-only edit wrote the merged memory again from its members: the user's added fact
    # was gone, silently.
    brain = make_brain()
    parent, notes = merged(brain, DEPLOY_NOTES)
    mine = "Deploys happen on Tuesday afternoons. Also: freezes start the week before launch."
    brain.update(parent.id, content=mine)
    brain.update(notes[0].id, add_tags=["deploys"])
    after = brain.get(parent.id)
    assert after.content == mine and "deploys" in after.tags  # (its tags still follow them)
    # Nor does a member's new wording, nor a forget, write over it: the forget says so.
    brain.update(notes[2].id, content="Deploys happen on Tuesday afternoons, approved by Lee.")
    assert brain.get(parent.id).content == mine
    forgotten = brain.forget([notes[1].id], confirm=True)
    assert forgotten.kept == [parent.id] and brain.get(parent.id).content == mine


def test_an_edit_of_a_member_says_what_became_of_its_merged_memory(make_brain: MakeBrain) -> None:
    # `update` of a member said nothing of a merged memory left saying the member's old words
    # (the user had edited it), which `remember` still ranks above the corrected member.
    brain = make_brain()
    parent, notes = merged(brain, DEPLOY_NOTES)
    done = brain.edit(notes[2].id, content="Deploys happen on Tuesday afternoons, approved by Lee.")
    assert (done.rewritten, done.kept) == ([parent.id], [])
    assert done.memory == brain.get(notes[2].id)
    mine = "Deploys happen on Tuesday afternoons. Also: freezes start the week before launch."
    assert brain.edit(parent.id, content=mine).kept == []  # (the merged memory itself)
    done = brain.edit(notes[0].id, content="Deploys happen on Wednesday mornings now.")
    assert (done.rewritten, done.kept) == ([], [parent.id])
    assert brain.get(parent.id).content == mine
    assert brain.edit(notes[0].id, importance=0.9).kept == []  # no new words: nothing to say


def test_unconsolidate_keeps_a_merged_memory_the_user_edited(make_brain: MakeBrain) -> None:
    # It was deleted, the fact the user added to it with it (only `restore` got it back).
    brain = make_brain()
    parent, notes = merged(brain, DEPLOY_NOTES)
    mine = "Deploys happen on Tuesday afternoons. Also: freezes start the week before launch."
    brain.update(parent.id, content=mine)
    undone = brain.unconsolidate(parent.id)
    assert (undone.parent_kept, undone.parent_removed) == (True, False)
    assert sorted(undone.restored) == sorted(n.id for n in notes)
    kept = brain.get(parent.id)
    assert (kept.content, kept.state.value) == (mine, "working")
    assert {brain.get(n.id).state.value for n in notes} == {"working"}
    assert not [
        e
        for e in all_edges(brain).values()
        if e.relationship_type is RelationshipType.CONSOLIDATED_FROM
    ]
    # One only its members made is still removed: nothing of it was the user's.
    other = make_brain("github.com/acme/web")
    parent, _ = merged(other, DEPLOY_NOTES)
    other.update(parent.id, importance=0.95)  # (an importance is no words of the user's)
    assert other.unconsolidate(parent.id).parent_removed
    assert parent.id not in raw_rows(other)


def test_forgetting_the_member_a_merged_memorys_importance_came_from_lowers_it(
    make_brain: MakeBrain,
) -> None:
    # The merged memory kept 0.88 (0.8 × 1.1) after the 0.8 member was forgotten.
    brain = make_brain()
    parent, notes = merged_at(brain, DEPLOY_NOTES, [0.5, 0.6, 0.8])
    assert brain.get(parent.id).importance == 0.88
    assert brain.forget([notes[2].id], confirm=True).rewritten == [parent.id]
    assert brain.get(parent.id).importance == 0.66  # max(0.5, 0.6) × 1.1
    # One the user set on it since is theirs.
    other = make_brain("github.com/acme/web")
    fourth = "Deploys happen on Tuesday afternoons after standup, once CI is green."
    parent, notes = merged_at(other, [*DEPLOY_NOTES, fourth], [0.5, 0.6, 0.8, 0.4])
    other.update(parent.id, importance=0.95)
    other.forget([notes[2].id], confirm=True)
    assert other.get(parent.id).importance == 0.95


# ---- archive ------------------------------------------------------------------------------


def test_archive_moves_long_faded_untouched_memories_out_of_the_answer(
    make_brain: MakeBrain,
) -> None:
    brain = make_brain()
    now = utcnow()
    faded = add_at(
        brain,
        "Old cache note",
        "The cache TTL for sessions was 5 minutes.",
        now - timedelta(days=500),
    )
    strong = add_at(
        brain,
        "Old but vital cache note",
        "The cache must be flushed after a schema change.",
        now - timedelta(days=300),
        importance=1.0,
    )
    fresh, _ = brain.memorize("Cache sizing", "The session cache holds 10k entries per node.")
    report = brain.sleep_consolidate()
    # 0.5 reaches the floor after ~299 days, then sat there 200 more (> 90): archived. 1.0 needs
    # ~389 days to reach it, so at 300 days it is still above the floor.
    assert report.archived == [faded.id]
    states = {r["id"]: r["state"] for r in raw_rows(brain).values()}
    assert states == {faded.id: "archived", strong.id: "working", fresh.id: "working"}
    normal = {h.memory.id for h in brain.remember("cache", limit=10, min_relevance=0).hits}
    assert faded.id not in normal and strong.id in normal
    wide = brain.remember("cache", limit=10, min_relevance=0, include_archived=True).hits
    assert faded.id in {h.memory.id for h in wide}


def test_a_memory_edited_while_the_pass_decides_to_archive_it_stays_as_edited(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The pass reads which memories faded, then archives them: an edit another process
    # acknowledged in between was archived anyway, and its memory vanished from answers.
    from octobrain.memory import sleep

    brain = make_brain()
    faded = add_at(
        brain,
        "Old cache note",
        "The cache TTL for sessions was 5 minutes.",
        utcnow() - timedelta(days=500),
    )
    store = brain.consolidator.store
    read = store.scan

    def read_then_edited(where: str, **kwargs: Any) -> Any:
        rows = read(where, **kwargs)
        if kwargs.get("columns") == ["id", "importance", "last_accessed", "access_count"]:
            other = make_brain()  # another process's edit, acknowledged meanwhile
            other.update(faded.id, content="The cache TTL for sessions is 10 minutes now.")
        return rows

    monkeypatch.setattr(store, "scan", read_then_edited)
    assert sleep.archive_faded(brain.consolidator, brain.scope, utcnow()) == []
    monkeypatch.undo()
    row = raw_rows(brain)[faded.id]
    assert (row["state"], row["content"]) == (
        "working",
        "The cache TTL for sessions is 10 minutes now.",
    )


# ---- lazy startup -------------------------------------------------------------------------


def test_lazy_pass_failure_writes_no_marker_and_never_raises(
    make_brain: MakeBrain, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    brain = make_brain()
    brain.memorize(*OTHER[0])  # a pass runs only for a scope holding memories

    def boom(self: Brain, **_: Any) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(Brain, "sleep_consolidate", boom)
    thread = sleep_startup.start_background_sleep(brain, marker_dir=tmp_path / "m")
    assert thread is not None
    thread.join(timeout=60)
    assert not list((tmp_path / "m").glob("*.json"))
    off = replace(Config(), consolidation=replace(Config().consolidation, sleep_enabled=False))
    disabled = Brain(
        "github.com/acme/other", config=off, embedder=get_embedder("hash:64"), uri=tmp_path / "db2"
    )
    assert sleep_startup.start_background_sleep(disabled, marker_dir=tmp_path / "m") is None


def test_a_scope_without_memories_gets_no_pass_and_leaves_no_file(
    make_brain: MakeBrain, tmp_path: Path
) -> None:
    # An MCP client may name any scope, even on a read: each unseen one must not leave files.
    for n in range(5):
        brain = make_brain(scope=f"github.com/acme/never-used-{n}")
        thread = sleep_startup.start_background_sleep(brain, marker_dir=tmp_path / "m")
        assert thread is not None
        thread.join(timeout=60)
    assert not (tmp_path / "m").exists() or not list((tmp_path / "m").iterdir())
    brain.memorize(*OTHER[0])
    sleep_startup._started.clear()
    thread = sleep_startup.start_background_sleep(brain, marker_dir=tmp_path / "m")
    assert thread is not None
    thread.join(timeout=60)
    assert len(list((tmp_path / "m").glob("*.json"))) == 1


def test_near_identical_notes_with_conflicting_numbers_are_not_merged(
    make_brain: MakeBrain,
) -> None:
    brain = make_brain()
    now = utcnow()
    same = [
        add_at(brain, "Timeout", f"The billing service request timeout is {v} seconds.", now)
        for v in (30, 30, 45, 60)
    ]
    report = brain.sleep_consolidate(threshold=0.8, min_size=2)
    merged = [{m.id for m in c.members} for c in report.consolidations]
    assert merged == [{same[0].id, same[1].id}]  # 45 and 60 conflict with 30: left working


def test_each_side_of_a_conflict_merges_with_its_own_restatements(
    make_brain: MakeBrain,
) -> None:
    # One cosine cluster holds both values; the split-off side is clustered again on its own.
    brain = make_brain()
    now = utcnow()
    notes = {
        v: [
            add_at(brain, "Timeout", f"The billing service request timeout is {v} seconds.", now)
            for _ in range(3)
        ]
        for v in (30, 45)
    }
    report = brain.sleep_consolidate(threshold=0.8, min_size=3)
    merged = sorted(({m.id for m in c.members} for c in report.consolidations), key=len)
    assert len(merged) == 2
    assert {frozenset(s) for s in merged} == {frozenset(m.id for m in notes[v]) for v in notes}
    contents = sorted(c.parent.content for c in report.consolidations)
    assert contents == [f"The billing service request timeout is {v} seconds." for v in (30, 45)]


def test_a_merged_memory_keeps_both_sides_of_what_its_members_disagree_on(
    make_brain: MakeBrain,
) -> None:
    # The analyser drops "not" as a stopword, and two sentences a word apart each way looked
    # like one fact reworded: the merged memory said only "Do not use tabs", and lost Bob.
    brain = make_brain()
    now = utcnow()
    said = {
        "Go indentation": [
            "Use tabs for indentation in Go files.",
            "Do not use tabs for indentation in Go files.",
            "Use tabs for indentation in Go files, always.",
        ],
        "Flag owner": [
            "The checkout_v2 feature flag for the web storefront is owned by Alice from payments.",
            "The checkout_v2 feature flag for the web storefront is owned by Bob from payments.",
            "The checkout_v2 feature flag for the web storefront is owned by Alice.",
        ],
    }
    for title, texts in said.items():
        for text in texts:
            add_at(brain, title, text, now)
    report = brain.sleep_consolidate(threshold=0.3, min_size=3)
    parents = {c.parent.title: c.parent.content for c in report.consolidations}
    assert parents["Go indentation"].splitlines() == [
        "- Use tabs for indentation in Go files, always.",
        "- Do not use tabs for indentation in Go files.",
    ]
    assert parents["Flag owner"].splitlines() == [f"- {t}" for t in said["Flag owner"][:2]]


def test_a_summary_too_long_for_one_memory_says_how_many_sentences_it_left_out() -> None:
    from octobrain.memory.summary import summarise

    facts = [f"Appendix {i} says the service listens on port {8000 + i}." for i in range(300)]
    text = summarise(facts, max_bytes=2_000)
    lines = text.splitlines()
    assert len(text.encode()) <= 2_000
    assert lines[:-1] == [f"- {f}" for f in facts[: len(lines) - 1]]
    left = 300 - (len(lines) - 1)
    assert lines[-1] == f"- … and {left} more sentences, in the memories merged here"
    assert summarise(facts[:3], max_bytes=2_000).count("\n") == 2  # all of it fits: no tail


def test_a_summary_of_members_full_of_short_distinct_sentences_is_bounded() -> None:
    # 100,000 distinct sentences (an MCP client's memories, 10 kB each, merged): each was
    # compared with every one kept, and the tail's room summed again per line left out (hours).
    # Past the comparisons it makes, an exact repeat (the first fact, again last) is still one.
    from octobrain.memory.summary import summarise

    facts = [f"Item w{i}x z{i}q holds." for i in range(100_000)]
    text = summarise(["\n".join(facts[:50_000]), "\n".join([*facts[50_000:], facts[0]])])
    lines = text.splitlines()
    assert len(text.encode()) <= 10_000
    assert lines[:-1] == [f"- {f}" for f in facts[: len(lines) - 1]]
    left = 100_000 - (len(lines) - 1)
    assert lines[-1] == f"- … and {left} more sentences, in the memories merged here"


def test_parent_is_found_by_the_wording_of_a_member_it_absorbed(make_brain: MakeBrain) -> None:
    # The summary keeps the fullest sentence; the short one the query quotes was absorbed.
    brain = make_brain()
    now = utcnow()
    short = "API rate limit is 100 requests per minute."
    notes = [
        add_at(brain, "Rate limit", text, now)
        for text in (
            short,
            "The API rate limit is 100 requests per minute per key, enforced at the gateway.",
            "API rate limit: 100 requests per minute per key, enforced at the gateway.",
        )
    ]
    (done,) = brain.sleep_consolidate(threshold=0.5, min_size=3).consolidations
    assert short not in done.parent.content
    # Relevance 0.95: the parent's own text falls short of it (0.93), the member it absorbed not.
    hits = brain.remember(short, limit=5, min_relevance=0.95, record_access=False).hits
    # The parent holds the member's fact, so it answers first; the member stays, below it.
    assert [h.memory.id for h in hits[:2]] == [done.parent.id, notes[0].id]
    assert hits[0].score > hits[1].score


def test_a_pass_over_many_clusters_commits_them_in_batches(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    from octobrain.memory import sleep

    monkeypatch.setattr(sleep, "COMMIT_BATCH", 2)
    brain = make_brain()
    topics = ["billing queue", "search index", "payments ledger", "image cache", "mail relay"]
    now = utcnow()
    for topic in topics:
        for i in range(3):
            add_at(
                brain,
                f"About the {topic}",
                f"The {topic} worker restarts nightly at {topic} maintenance{'!' * i}",
                now - timedelta(hours=1),
            )
    before = brain.store.version()
    report = brain.sleep_consolidate()
    assert len(report.consolidations) == len(topics) and report.skipped == 0
    # Three batches (2 + 2 + 1 clusters): one merge commit to `memories` each, not one per cluster.
    assert brain.store.version() - before == 3
    rows = raw_rows(brain)
    parents = [r for r in rows.values() if r["state"] == "working"]
    assert len(parents) == len(topics)
    assert sum(r["state"] == "consolidated" for r in rows.values()) == 3 * len(topics)


def test_conflict_checks_read_each_members_numbers_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # A cluster of n near-duplicates was checked with O(n³) comparisons, each reading both
    # texts' numbers again: 300 restatements took the next pass 55 s, 1,000 about 30 min.
    from octobrain.memory import conflicts, sleep

    reads = []
    real = conflicts.numbers
    monkeypatch.setattr(conflicts, "numbers", lambda text: reads.append(text) or real(text))
    rows = [{"content": f"The deploy runs on host {i % 3} with canary checks."} for i in range(300)]
    cluster = list(range(300))
    (kept,) = sleep._without_conflicts([cluster], rows, min_size=2)
    assert kept == [i for i in cluster if i % 3 == 0]  # the largest compatible set, seeded first
    assert len(reads) == 300


def test_a_memory_many_others_supersede_is_found_without_reading_each_of_them(
    make_brain: MakeBrain, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every incoming edge of a candidate built its source's whole row just to read its scope:
    # 100,000 `supersedes` into one memory made each query finding it take 16 s.
    from octobrain.memory.corpus import Corpus
    from octobrain.memory.search import LISTED_EDGES
    from octobrain.models import Relationship

    brain = make_brain()
    now = utcnow()
    hub = add_at(brain, "Quota service", "The quota service caps uploads per tenant.", now)
    newer = [add_at(brain, f"Note {i}", f"Unrelated note number {i}.", now) for i in range(300)]
    brain.store.add_relationships(
        [Relationship(m.id, hub.id, RelationshipType.SUPERSEDES, 1.0, "", SCOPE) for m in newer]
    )
    built = []
    real = Corpus.memory
    monkeypatch.setattr(Corpus, "memory", lambda self, pos: built.append(pos) or real(self, pos))
    hits = brain.remember("quota service uploads", limit=5, record_access=False).hits
    (found,) = [h for h in hits if h.memory.id == hub.id]
    assert len(found.superseded_by) == LISTED_EDGES and "superseded" in found.why
    assert len(built) < 50


def test_export_names_a_lost_consolidation_journal_instead_of_leaving_it_out(
    make_brain: MakeBrain, tmp_path: Path
) -> None:
    # A journal directory gone read as "never consolidated": the backup left the records
    # out and said nothing (exit 0), so an unconsolidate after restoring it could not undo.
    import io

    from octobrain.errors import StorageError
    from octobrain.memory.export import export_jsonl

    brain = make_brain()
    twins(brain)
    assert brain.sleep_consolidate().consolidations
    out = io.StringIO()
    export_jsonl(brain, out)
    assert '"kind": "consolidation"' in out.getvalue()
    shutil.rmtree(tmp_path / "consolidations.lance")
    again = make_brain()
    with pytest.raises(StorageError, match="table 'consolidations' .* is damaged or missing"):
        export_jsonl(again, io.StringIO())
