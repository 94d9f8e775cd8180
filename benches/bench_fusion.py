"""RRF and score fusion: octobrain's Rust core vs the dict-based Python a user would write.

The tiny case (2 lists x 10 ids) is what one `remember` call fuses, so per-call overhead is the
number that matters there; the larger cases show throughput.
"""

from __future__ import annotations

import heapq
import random
from collections import defaultdict
from collections.abc import Callable
from operator import itemgetter
from typing import Any

import pytest

from octobrain.kernels.fusion import rrf, rrf_batch, score_fusion

LIMIT = 10


def python_rrf(lists: list[list[int]], k: float = 60.0, limit: int = LIMIT) -> list[Any]:
    scores: dict[int, float] = defaultdict(float)
    for ranked in lists:
        for rank, doc in enumerate(ranked, start=1):
            scores[doc] += 1.0 / (k + rank)
    return heapq.nlargest(limit, scores.items(), key=itemgetter(1))


def python_minmax(lists: list[list[int]], scores: list[list[float]], limit: int = LIMIT) -> Any:
    fused: dict[int, float] = defaultdict(float)
    for ranked, raw in zip(lists, scores, strict=True):
        lo, hi = min(raw), max(raw)
        span = hi - lo
        for doc, s in zip(ranked, raw, strict=True):
            fused[doc] += ((s - lo) / span if span > 0 else 1.0) / len(lists)
    return heapq.nlargest(limit, fused.items(), key=itemgetter(1))


def ranked_lists(n_lists: int, size: int, seed: int = 7) -> list[list[int]]:
    # Lists drawn from a pool three times their size overlap like BM25 and vector results do.
    rng = random.Random(seed)
    return [rng.sample(range(3 * size), size) for _ in range(n_lists)]


def run(benchmark: Any, group: str, impl: str, fn: Callable[[], Any]) -> Any:
    benchmark.group = group
    benchmark.extra_info["impl"] = impl
    return benchmark(fn)


@pytest.mark.parametrize(("n_lists", "size"), [(2, 10), (2, 100), (5, 1000)])
@pytest.mark.parametrize("impl", ["octobrain", "pure-python"])
def test_rrf(benchmark: Any, impl: str, n_lists: int, size: int) -> None:
    lists = ranked_lists(n_lists, size)
    group = f"rrf {n_lists}x{size}, top {LIMIT}"
    if impl == "octobrain":
        fused = run(benchmark, group, impl, lambda: rrf(lists, limit=LIMIT))
        scores = fused.scores
    else:
        pairs = run(benchmark, group, impl, lambda: python_rrf(lists))
        scores = [s for _, s in pairs]
    assert scores == pytest.approx([s for _, s in python_rrf(lists)])


@pytest.mark.parametrize("impl", ["octobrain", "pure-python"])
def test_rrf_batch(benchmark: Any, impl: str) -> None:
    queries = [ranked_lists(2, 10, seed) for seed in range(64)]
    group = f"rrf batch 64 queries x 2x10, top {LIMIT}"
    if impl == "octobrain":
        run(benchmark, group, impl, lambda: rrf_batch(queries, limit=LIMIT))
    else:
        run(benchmark, group, impl, lambda: [python_rrf(q) for q in queries])


@pytest.mark.parametrize("impl", ["octobrain", "pure-python"])
def test_score_fusion_minmax(benchmark: Any, impl: str) -> None:
    lists = ranked_lists(3, 1000)
    rng = random.Random(3)
    scores = [sorted((rng.random() for _ in lst), reverse=True) for lst in lists]
    group = f"score fusion min-max 3x1000, top {LIMIT}"
    if impl == "octobrain":
        fused = run(benchmark, group, impl, lambda: score_fusion(lists, scores, limit=LIMIT))
        ours = fused.scores
    else:
        ours = [s for _, s in run(benchmark, group, impl, lambda: python_minmax(lists, scores))]
    assert ours == pytest.approx([s for _, s in python_minmax(lists, scores)])
