"""Readable pure-Python references for the Rust kernels; the parity tests compare against these.

They favour clarity over speed. Each kernel keeps its own section under a
`# ---- <kernel> ----` header; the text analyser's is in reference_text.py.
"""

from __future__ import annotations

import math
import re

import numpy as np

# ---- fusion ----
# Sums are plain left-to-right loops in list order (not `sum`, which compensates rounding on
# Python >= 3.12), so the scores are bit-identical to the core's.


def _fusion_order(rows: dict[int, tuple[float, int]], limit: int) -> tuple[list[int], list[float]]:
    """Sort {id: (score, best_rank)} by score desc, best rank asc, id asc; keep `limit`."""
    ranked = sorted(rows.items(), key=lambda item: (-item[1][0], item[1][1], item[0]))[:limit]
    return [doc for doc, _ in ranked], [score for _, (score, _) in ranked]


def rrf(
    lists: list[list[int]], weights: list[float] | None, k: float, limit: int
) -> tuple[list[int], list[float]]:
    weights = [1.0] * len(lists) if weights is None else weights
    rows: dict[int, tuple[float, int]] = {}
    for ranked, weight in zip(lists, weights, strict=True):
        seen: set[int] = set()
        for position, doc in enumerate(ranked):
            if doc in seen:
                continue  # a repeat counts only at its first (best) rank
            seen.add(doc)
            rank = position + 1
            score, best = rows.get(doc, (0.0, rank))
            rows[doc] = (score + weight / (k + rank), min(best, rank))
    return _fusion_order(rows, limit)


def _normalise(values: list[float], method: str) -> tuple[list[float], float]:
    """Normalised values and what a missing document gets from this list."""
    if not values:
        return [], 0.0
    if method == "minmax":
        lo, hi = min(values), max(values)
        if hi - lo > 0.0:
            return [(v - lo) / (hi - lo) for v in values], 0.0
        return [1.0] * len(values), 0.0
    total = 0.0
    for v in values:
        total += v
    mean = total / len(values)
    squares = 0.0
    for v in values:
        squares += (v - mean) * (v - mean)
    std = math.sqrt(squares / len(values))
    z = [(v - mean) / std if std > 0.0 else 0.0 for v in values]
    return z, min(z)


def score_fusion(
    lists: list[list[int]],
    scores: list[list[float]],
    weights: list[float] | None,
    method: str,
    limit: int,
) -> tuple[list[int], list[float]]:
    weights = [1.0] * len(lists) if weights is None else weights
    total_weight = 0.0
    for w in weights:
        total_weight += w
    best_rank: dict[int, int] = {}
    normalised: list[tuple[dict[int, float], float]] = []
    for ranked, raw in zip(lists, scores, strict=True):
        first: dict[int, float] = {}
        for position, (doc, score) in enumerate(zip(ranked, raw, strict=True)):
            if doc not in first:
                first[doc] = score
                best_rank[doc] = min(best_rank.get(doc, position + 1), position + 1)
        values, missing = _normalise(list(first.values()), method)
        normalised.append((dict(zip(first, values, strict=True)), missing))
    fused = dict.fromkeys(best_rank, 0.0)
    for (norm, missing), w in zip(normalised, weights, strict=True):
        share = w / total_weight
        for doc in fused:
            if doc in norm:
                fused[doc] += share * norm[doc]
            elif method == "zscore":
                fused[doc] += share * missing
    return _fusion_order({d: (fused[d], best_rank[d]) for d in fused}, limit)


# ---- decay ----


def decayed_importance(
    importance: list[float],
    last_accessed: list[float],
    access_count: list[int],
    now: float,
    half_life_days: float,
    access_boost_factor: float,
    min_importance: float,
) -> list[float]:
    out = []
    for base, seen, count in zip(importance, last_accessed, access_count, strict=True):
        days = max(0.0, now - seen) / 86400.0  # a future access counts as "just now"
        fade = 0.5 ** (days / half_life_days)
        boost = 1.0 + access_boost_factor * math.log1p(count)
        out.append(min(1.0, max(min_importance, base * fade * boost)))
    return out


# ---- bm25 ----
#
# Reference for `octobrain.kernels.bm25.BM25Index`: Lucene BM25 computed from scratch for every
# query, in float64. Duplicate query terms count once per occurrence (as in Lucene and bm25s).


def bm25_scores(
    docs: list[list[str]], query: list[str], k1: float = 1.2, b: float = 0.75
) -> list[float]:
    """BM25 score of every document (already analysed) for an analysed query."""
    n = len(docs)
    if n == 0:
        return []
    avgdl = sum(len(d) for d in docs) / n or 1.0
    scores = [0.0] * n
    for term in query:
        df = sum(1 for d in docs if term in d)
        if df == 0:
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for i, doc in enumerate(docs):
            tf = doc.count(term)
            if tf:
                norm = k1 * (1 - b + b * len(doc) / avgdl)
                scores[i] += idf * tf * (k1 + 1) / (tf + norm)
    return scores


def bm25_top_k(scores: list[float], k: int) -> list[tuple[int, float]]:
    """Positions with a positive score, best first, ties by position; at most k."""
    ranked = sorted((-s, i) for i, s in enumerate(scores) if s > 0)
    return [(i, -s) for s, i in ranked[:k]]


# ---- clustering ----
# Plain agglomerative clustering over the full similarity matrix: repeatedly merge the pair of
# clusters with the highest linkage (min or mean of cross-pair cosines) that reaches the cutoff;
# ties go to the smallest (first row of A, first row of B). Clusters are kept sorted by first row.

CLUSTER_TIE_EPS = 1e-5


def cosine_clusters(
    vectors: np.ndarray,
    threshold: float,
    min_cluster_size: int,
    linkage: str = "complete",
    margins: list[float] | None = None,
) -> list[list[int]]:
    """Reference clustering. If `margins` is given, append each step's distance to a decision
    flip (linkage vs cutoff, best vs runner-up) so tests can skip knife-edge inputs."""
    x = np.asarray(vectors, dtype=np.float64)
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    sim = x @ x.T
    cutoff = threshold - CLUSTER_TIE_EPS
    clusters = [[i] for i in range(len(x))]

    def link(a: list[int], b: list[int]) -> float:
        block = sim[np.ix_(a, b)]
        return float(block.min() if linkage == "complete" else block.mean())

    while True:
        scored = [
            (link(a, b), ia, ib)
            for ia, a in enumerate(clusters)
            for ib, b in enumerate(clusters)
            if ia < ib
        ]
        if margins is not None and scored:
            values = sorted((s for s, _, _ in scored), reverse=True)
            near_cutoff = min(abs(s - cutoff) for s in values)
            top_gap = values[0] - values[1] if len(values) > 1 and values[1] >= cutoff else 1.0
            margins.append(min(near_cutoff, top_gap))
        mergeable = [(-s, clusters[ia][0], clusters[ib][0], ia, ib) for s, ia, ib in scored]
        mergeable = [m for m in mergeable if -m[0] >= cutoff]
        if not mergeable:
            break
        _, _, _, ia, ib = min(mergeable)
        clusters[ia] = clusters[ia] + clusters[ib]
        del clusters[ib]

    kept = [sorted(c) for c in clusters if len(c) >= min_cluster_size]
    return sorted(kept, key=lambda c: (-len(c), c[0]))


# ---- regex match ----
# Split every text into lines (on "\n", trailing "\r" stripped, no empty line after a final
# "\n"), search each line with `re`, report the first match per line, stop after the cap.


def split_lines(text: str) -> list[str]:
    """The lines of `text` as the kernel defines them."""
    if not text:
        return []
    body = text[:-1] if text.endswith("\n") else text
    return [line[:-1] if line.endswith("\r") else line for line in body.split("\n")]


def match_lines(
    texts: list[str], pattern: str, ignore_case: bool, max_matches: int, context: int
) -> tuple[list[tuple[int, int, str, int, int, list[str], list[str]]], bool]:
    """Reference line matching: (matches, truncated)."""
    rx = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    found: list[tuple[int, int, str, int, int, list[str], list[str]]] = []
    for ti, text in enumerate(texts):
        lines = split_lines(text)
        for li, line in enumerate(lines):
            m = rx.search(line)
            if m is None:
                continue
            if len(found) == max_matches:
                return found, True
            before = lines[max(0, li - context) : li]
            after = lines[li + 1 : li + 1 + context]
            found.append((ti, li + 1, line, m.start(), m.end(), before, after))
    return found, False


def coverage(docs: list[list[str]], query: list[str], positions: list[int]) -> list[float]:
    """idf-weighted share of the query's distinct terms each document holds (Lucene idf over
    the documents that are not None; a removed document is None and holds nothing)."""
    live = [set(d) for d in docs if d is not None]
    n = max(1, len(live))
    idf = {}
    for t in dict.fromkeys(query):
        df = sum(t in d for d in live)
        idf[t] = math.log(1 + (n - df + 0.5) / (df + 0.5))
    total = sum(idf.values())
    if not idf:
        return [0.0] * len(positions)
    held = [set(d) if d is not None else set() for d in docs]
    return [sum(w for t, w in idf.items() if t in held[p]) / total for p in positions]
