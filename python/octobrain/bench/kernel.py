"""Retrieval benchmarks behind `octobrain bench`: quality and speed on a BEIR dataset."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from octobrain.bench.datasets import BeirDataset, evaluate
from octobrain.kernels.bm25 import BM25Index

__all__ = ["Bm25BenchResult", "bench_bm25"]


@dataclass(frozen=True)
class Bm25BenchResult:
    """Quality (means over the judged queries) and timings of one BM25 run."""

    docs: int
    queries: int
    k1: float
    b: float
    stem: bool
    stopwords: bool
    ndcg_at_10: float
    recall_at_10: float
    recall_at_100: float
    mrr_at_10: float
    build_seconds: float
    query_p50_ms: float
    query_p95_ms: float
    batch_seconds: float

    def as_dict(self) -> dict[str, float | int | bool]:
        """Plain dict (for JSON output)."""
        return asdict(self)


def bench_bm25(
    dataset: BeirDataset,
    *,
    k1: float = 1.2,
    b: float = 0.75,
    stem: bool = True,
    stopwords: bool = True,
    on_query: Callable[[], None] | None = None,
) -> Bm25BenchResult:
    """Build the index, time each query alone (top 100), then all queries as one batch."""
    start = time.perf_counter()
    index = BM25Index.build(dataset.doc_texts, k1=k1, b=b, stem=stem, stopwords=stopwords)
    build_seconds = time.perf_counter() - start

    run: dict[str, list[str]] = {}
    latencies: list[float] = []
    for query_id, text in zip(dataset.query_ids, dataset.query_texts, strict=True):
        start = time.perf_counter()
        positions, _ = index.search(text, 100)
        latencies.append(time.perf_counter() - start)
        run[query_id] = [dataset.doc_ids[p] for p in positions]
        if on_query is not None:
            on_query()

    start = time.perf_counter()
    index.search_batch(dataset.query_texts, 100)
    batch_seconds = time.perf_counter() - start

    metrics = evaluate(run, {q: dataset.qrels[q] for q in dataset.query_ids})
    p50, p95 = np.percentile(np.array(latencies) * 1000.0, [50, 95]) if latencies else (0.0, 0.0)
    return Bm25BenchResult(
        docs=len(dataset.doc_ids),
        queries=len(dataset.query_ids),
        k1=index.k1,
        b=index.b,
        stem=stem,
        stopwords=stopwords,
        ndcg_at_10=metrics["ndcg@10"],
        recall_at_10=metrics["recall@10"],
        recall_at_100=metrics["recall@100"],
        mrr_at_10=metrics["mrr@10"],
        build_seconds=build_seconds,
        query_p50_ms=float(p50),
        query_p95_ms=float(p95),
        batch_seconds=batch_seconds,
    )
