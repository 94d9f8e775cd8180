"""Readable pure-Python references for the Rust kernels; the parity tests compare against these.

Each kernel keeps its own section under a `# ---- <kernel> ----` header.
"""

from __future__ import annotations

import math

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
