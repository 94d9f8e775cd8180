"""Memories a query scores alike rank by their ids, not by where they sit in the mirror: two
mirrors holding the same rows at other positions (a snapshot with its tail replayed, a fresh
build) answer alike, `Why:` lines included."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from octobrain.config import Config, SearchConfig
from octobrain.embed.factory import get_embedder
from octobrain.kernels.bm25 import BM25Index
from octobrain.kernels.hybrid import exact_top
from octobrain.memory.brain import Brain
from octobrain.models import Memory
from octobrain.times import utcnow

QUERY = "blue green switch"


def _memories() -> list[Memory]:
    """Four rows the query scores alike in both legs (same words but one, same vector), and
    six it does not match."""
    when = utcnow()
    tied = [
        Memory(title=f"Deploy {w}", content=f"Deploys flip the blue green switch {w}.")
        for w in ("amber", "coral", "ivory", "olive")
    ]
    other = [Memory(title=f"Lunch {i}", content=f"Lunch lists soup {i}.") for i in range(6)]
    for m in tied + other:
        m.created_at = m.updated_at = m.last_accessed = when
    return tied + other


def _answer(path: Path, memories: list[Memory], vectors: np.ndarray) -> list[tuple[str, str]]:
    # Two candidates per leg: the cut falls inside the four-way tie of each.
    config = Config(search=SearchConfig(candidates=2))
    brain = Brain("", config=config, embedder=get_embedder("hash:64"), uri=path)
    brain.store.add(memories, vectors)
    recall = brain.remember(QUERY, min_relevance=0.0, record_access=False)
    return [(h.memory.id, h.why) for h in recall.hits]


def test_two_mirrors_with_rows_in_other_orders_answer_alike(tmp_path: Path) -> None:
    memories = _memories()
    embedder = get_embedder("hash:64")
    vectors = embedder.embed_documents([m.content for m in memories])
    vectors[:4] = embedder.embed_query([QUERY])[0]  # the tied rows: one vector, cosine 1
    first = _answer(tmp_path / "a", memories, vectors)
    second = _answer(tmp_path / "b", memories[::-1], vectors[::-1])
    # Before: each kept the two tied rows it held first (bm25 #1 in one was absent from the
    # other), so the same store answered differently by path.
    assert first == second
    lowest = sorted(m.id for m in memories[:4])[:2]
    assert [i for i, _ in first[:2]] == lowest
    assert "vector #1, bm25 #1" in first[0][1] and "vector #2, bm25 #2" in first[1][1]


def test_kernels_break_ties_by_the_key_given_also_across_the_cut() -> None:
    index = BM25Index.build(["red fox", "red dog", "red cat", "red owl", "blue jay"])
    ties = np.array([3, 2, 1, 0, 4], dtype=np.int64)  # position 3 first, then 2, 1, 0
    positions, _ = index.search("red", 2, ties=ties)
    assert positions.tolist() == [3, 2]
    assert index.search("red", 2)[0].tolist() == [0, 1]  # without keys: by position
    cos = np.array([0.5, 0.5, 0.5, 0.5, 0.9], dtype=np.float32)
    assert exact_top(cos, np.ones(5, dtype=bool), 3, ties) == [4, 3, 2]
