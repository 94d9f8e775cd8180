"""BM25 on SciFact: octobrain (Rust) vs bm25s, side by side.

bm25s gets the same analysis setup as ours (PyStemmer English stemmer, stopwords="en") and
its fastest fair configuration here: the numba backend if numba is installed, otherwise its
default numpy backend, single-threaded (n_threads=2 measured slower on this 2-core machine).
Times include query analysis for both (ours analyses in Rust inside `search`).
Quality (nDCG@10, Recall@100 over the 300 test queries) goes into extra_info.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from typing import Any

import bm25s
import numpy as np
import pytest
import Stemmer

from octobrain.bench.datasets import BeirDataset, evaluate
from octobrain.kernels.bm25 import BM25Index

BACKEND = "numba" if importlib.util.find_spec("numba") else "numpy"
STEMMER = Stemmer.Stemmer("english")
UPDATE = 50  # documents added / removed in the update benchmarks (~1% of SciFact)


def bm25s_tokenize(texts: Sequence[str]) -> Any:
    return bm25s.tokenize(list(texts), stopwords="en", stemmer=STEMMER, show_progress=False)


def bm25s_build(texts: Sequence[str]) -> bm25s.BM25:
    retriever = bm25s.BM25(backend=BACKEND)
    retriever.index(bm25s_tokenize(texts), show_progress=False)
    return retriever


def bm25s_search(retriever: bm25s.BM25, queries: Sequence[str], k: int) -> np.ndarray:
    ids, _ = retriever.retrieve(bm25s_tokenize(queries), k=k, show_progress=False)
    return ids


def quality(data: BeirDataset, ranked: Sequence[Sequence[int]]) -> dict[str, float]:
    run = {
        q: [data.doc_ids[p] for p in hits] for q, hits in zip(data.query_ids, ranked, strict=True)
    }
    return evaluate(run, {q: data.qrels[q] for q in data.query_ids})


@pytest.fixture(scope="module")
def ours(scifact: BeirDataset) -> BM25Index:
    return BM25Index.build(scifact.doc_texts)


@pytest.fixture(scope="module")
def theirs(scifact: BeirDataset) -> bm25s.BM25:
    return bm25s_build(scifact.doc_texts)


@pytest.fixture(scope="module")
def quality_ours(scifact: BeirDataset, ours: BM25Index) -> dict[str, float]:
    return quality(scifact, [p for p, _ in ours.search_batch(scifact.query_texts, 100)])


@pytest.fixture(scope="module")
def quality_theirs(scifact: BeirDataset, theirs: bm25s.BM25) -> dict[str, float]:
    return quality(scifact, bm25s_search(theirs, scifact.query_texts, 100).tolist())


def tag(benchmark: Any, group: str, impl: str, scores: dict[str, float] | None = None) -> None:
    benchmark.group = group
    benchmark.extra_info["impl"] = impl
    if impl == "bm25s":
        benchmark.extra_info["backend"] = BACKEND
    if scores:
        benchmark.extra_info["ndcg@10"] = round(scores["ndcg@10"], 4)
        benchmark.extra_info["recall@100"] = round(scores["recall@100"], 4)


# ---- build ----


def test_build_octobrain(benchmark: Any, scifact: BeirDataset, quality_ours) -> None:
    tag(benchmark, "bm25 build (SciFact 5,183 docs)", "octobrain", quality_ours)
    index = benchmark.pedantic(
        BM25Index.build, args=(scifact.doc_texts,), rounds=5, iterations=1, warmup_rounds=1
    )
    assert len(index) == len(scifact.doc_ids)


def test_build_bm25s(benchmark: Any, scifact: BeirDataset, quality_theirs) -> None:
    tag(benchmark, "bm25 build (SciFact 5,183 docs)", "bm25s", quality_theirs)
    benchmark.pedantic(
        bm25s_build, args=(scifact.doc_texts,), rounds=3, iterations=1, warmup_rounds=1
    )


# ---- queries: 300 at once, and one at a time ----


def test_batch_octobrain(benchmark: Any, scifact: BeirDataset, ours, quality_ours) -> None:
    tag(benchmark, "bm25 300 queries, batch, k=10", "octobrain", quality_ours)
    hits = benchmark(ours.search_batch, scifact.query_texts, 10)
    assert len(hits) == len(scifact.query_ids)


def test_batch_bm25s(benchmark: Any, scifact: BeirDataset, theirs, quality_theirs) -> None:
    tag(benchmark, "bm25 300 queries, batch, k=10", "bm25s", quality_theirs)
    ids = benchmark(bm25s_search, theirs, scifact.query_texts, 10)
    assert ids.shape == (len(scifact.query_ids), 10)


def loop(search: Callable[[str], object], queries: Sequence[str]) -> None:
    for query in queries:
        search(query)


def test_single_octobrain(benchmark: Any, scifact: BeirDataset, ours, quality_ours) -> None:
    tag(benchmark, "bm25 300 queries, one call each, k=10", "octobrain", quality_ours)
    benchmark(loop, lambda q: ours.search(q, 10), scifact.query_texts)


def test_single_bm25s(benchmark: Any, scifact: BeirDataset, theirs, quality_theirs) -> None:
    tag(benchmark, "bm25 300 queries, one call each, k=10", "bm25s", quality_theirs)
    benchmark.pedantic(
        loop,
        args=(lambda q: bm25s_search(theirs, [q], 10), scifact.query_texts),
        rounds=5,
        iterations=1,
        warmup_rounds=1,
    )


# ---- updates: is incremental add/remove worth it over a rebuild? ----


def test_update_add(benchmark: Any, scifact: BeirDataset) -> None:
    tag(benchmark, f"bm25 update: {UPDATE} docs vs full rebuild", "octobrain add")
    head, tail = scifact.doc_texts[:-UPDATE], scifact.doc_texts[-UPDATE:]

    def setup() -> tuple[tuple[BM25Index, list[str]], dict[str, Any]]:
        return (BM25Index.build(head), tail), {}

    benchmark.pedantic(BM25Index.add, setup=setup, rounds=5, iterations=1, warmup_rounds=1)


def test_update_remove(benchmark: Any, scifact: BeirDataset) -> None:
    tag(benchmark, f"bm25 update: {UPDATE} docs vs full rebuild", "octobrain remove")
    doomed = np.arange(0, len(scifact.doc_texts), len(scifact.doc_texts) // UPDATE)[:UPDATE]

    def setup() -> tuple[tuple[BM25Index, np.ndarray], dict[str, Any]]:
        return (BM25Index.build(scifact.doc_texts), doomed), {}

    benchmark.pedantic(BM25Index.remove, setup=setup, rounds=5, iterations=1, warmup_rounds=1)


def test_update_rebuild(benchmark: Any, scifact: BeirDataset) -> None:
    tag(benchmark, f"bm25 update: {UPDATE} docs vs full rebuild", "octobrain rebuild")
    benchmark.pedantic(
        BM25Index.build, args=(scifact.doc_texts,), rounds=5, iterations=1, warmup_rounds=1
    )
