"""Cosine clustering of 10k x 384 embeddings: octobrain (sparse agglomerative, complete linkage)
vs what a numpy user writes (X @ X.T, threshold, connected components).

Run: .venv/bin/pytest benches/bench_cluster.py --benchmark-only
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from octobrain.kernels.clustering import cosine_clusters

N, DIM, N_PLANTED, N_BRIDGES, THRESHOLD, MIN_SIZE = 10_000, 384, 300, 50, 0.85, 3


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def make_data(seed: int = 42) -> tuple[np.ndarray, list[list[int]]]:
    """300 tight planted clusters (sizes 3-8, pairwise cosine ~0.94) hidden in unit noise.

    The first 100 clusters come as 50 related pairs (centre cosine 0.6, members ~0.56 apart),
    each with one "bridge" row halfway (cosine ~0.87 to both): the chaining trap that
    consolidation must not fall into. Returns the rows and the planted clusters' positions.
    """
    rng = np.random.default_rng(seed)
    sizes = rng.integers(3, 9, size=N_PLANTED)
    centres = unit(rng.standard_normal((N_PLANTED, DIM)))
    for k in range(0, 2 * N_BRIDGES, 2):  # make centre k+1 have cosine 0.6 with centre k
        other = unit(centres[k + 1] - (centres[k + 1] @ centres[k]) * centres[k])
        centres[k + 1] = 0.6 * centres[k] + 0.8 * other
    rows = [
        c + 0.25 * rng.standard_normal((n, DIM)) / np.sqrt(DIM)
        for c, n in zip(centres, sizes, strict=True)
    ]
    rows.append(unit(centres[0 : 2 * N_BRIDGES : 2] + centres[1 : 2 * N_BRIDGES : 2]))
    rows.append(rng.standard_normal((N - int(sizes.sum()) - N_BRIDGES, DIM)))
    order = rng.permutation(N)
    x = unit(np.concatenate(rows))[order]
    position = np.empty(N, dtype=np.int64)
    position[order] = np.arange(N)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    planted = [sorted(position[bounds[k] : bounds[k + 1]].tolist()) for k in range(N_PLANTED)]
    return x.astype(np.float32), planted


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, list[list[int]]]:
    return make_data()


def numpy_clusters(x: np.ndarray, threshold: float, min_size: int) -> list[list[int]]:
    """Baseline: full Gram matrix, threshold, union-find over the edges (single linkage)."""
    sim = x @ x.T
    np.fill_diagonal(sim, -1.0)
    rows, cols = np.nonzero(sim >= threshold)
    parent = list(range(len(x)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
        if i < j:
            parent[find(i)] = find(j)
    groups: dict[int, list[int]] = {}
    for i in range(len(x)):
        groups.setdefault(find(i), []).append(i)
    return [g for g in groups.values() if len(g) >= min_size]


def agreement(found: list[list[int]], planted: list[list[int]]) -> dict[str, float]:
    """planted_recall: share of planted clusters found whole inside a cluster that holds no
    other planted cluster's rows (an extra bridge/noise row is allowed). glued_clusters: found
    clusters that mix two or more planted clusters, the failure linkage exists to prevent."""
    label = {row: k for k, c in enumerate(planted) for row in c}
    labels_of = [{label[r] for r in c if r in label} for c in found]
    glued = sum(len(ls) > 1 for ls in labels_of)
    recovered = sum(
        len(ls) == 1 and set(planted[next(iter(ls))]) <= set(c)
        for c, ls in zip(found, labels_of, strict=True)
    )
    return {
        "planted_recall": round(recovered / len(planted), 4),
        "glued_clusters": glued,
        "clusters": len(found),
    }


def run(benchmark: Any, impl: str, fn: Any, data: tuple[np.ndarray, list[list[int]]]) -> None:
    x, planted = data
    benchmark.group = "cosine clustering 10k x 384"
    benchmark.extra_info["impl"] = impl
    found = benchmark.pedantic(fn, args=(x,), rounds=5, iterations=1, warmup_rounds=1)
    benchmark.extra_info.update(agreement(found, planted))


def test_octobrain(benchmark: Any, data: tuple[np.ndarray, list[list[int]]]) -> None:
    run(benchmark, "octobrain", lambda x: cosine_clusters(x, THRESHOLD, MIN_SIZE), data)


def test_numpy(benchmark: Any, data: tuple[np.ndarray, list[list[int]]]) -> None:
    run(benchmark, "numpy", lambda x: numpy_clusters(x, THRESHOLD, MIN_SIZE), data)


# The dense case: the sleep pass over one window (2,048 rows) of near-copies of one note, where
# every pair is similar. Compare with the numpy baseline above for what a full Gram costs.
DENSE_ROWS = 2048


@pytest.mark.parametrize("linkage", ["complete", "average"])
def test_octobrain_near_copies(benchmark: Any, linkage: str) -> None:
    rng = np.random.default_rng(3)
    noise = 0.02 * rng.standard_normal((DENSE_ROWS, DIM))
    x = (rng.standard_normal(DIM) + noise).astype(np.float32)
    benchmark.group = f"cosine clustering {DENSE_ROWS} near-copies x {DIM}"
    benchmark.extra_info["impl"] = f"octobrain ({linkage})"
    found = benchmark.pedantic(
        cosine_clusters, args=(x, THRESHOLD, 2, linkage), rounds=3, iterations=1, warmup_rounds=0
    )
    assert [len(c) for c in found] == [DENSE_ROWS]
