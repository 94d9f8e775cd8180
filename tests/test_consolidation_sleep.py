"""Sleep passes: decay, which notes a pass merges (and never mixes), bounded work and records,
archiving long-faded memories, a pass that fails or has nothing to do.

Real LanceDB in temp dirs; the hash embedder for speed, the bundled model where paraphrases
must really be near-duplicates.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
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
from octobrain.memory import sleep, sleep_startup
from octobrain.memory.brain import Brain
from octobrain.models import Memory, RelationshipType, Source
from octobrain.times import utcnow
from tests.consolidation_support import (
    OTHER,
    SCOPE,
    TWINS,
    MakeBrain,
    add_at,
    all_edges,
    raw_rows,
    twins,
)
from tests.consolidation_support import make_brain as make_brain  # the fixture, shared
from tests.core import reference

RATE_LIMIT_NOTES = [
    "API rate limiting uses a token bucket per API key: 100 requests per minute.",
    "Rate limiting for the API is a token bucket per key, allowing 100 requests per minute.",
    "The API's rate limiting: token bucket per key, 100 requests a minute, bursts up to 20.",
    "We rate limit API calls with a per-key token bucket of 100 requests per minute.",
    "Rate limiting in the API: each key gets a token bucket with 100 requests per minute; "
    "over the limit returns 429.",
]


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
