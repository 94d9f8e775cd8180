"""Hybrid ranking shared by `remember` and `knowledge search`: one query → one fused ranking.

Both pipelines hand over their candidate sources (an exact or ANN `nearest` function over unit
vectors, the Rust BM25 index, the embedding matrix and the visible-position mask) and get back
positions in fused order with scores in [0, 1] and which leg found each one, and score each
candidate's calibrated relevance alike (`calibrated_relevance`, `Scored`). What the caller does next
(relevance floor, bounded multipliers, grouping by section) stays with the caller.

Stages, each a `[search]` setting (the README's ablation table measures every one):

1. Vector leg: exact top `candidates` by cosine (the caller computes all cosines anyway, for
   calibrated relevance); with `hyde`, the query vector is blended with the centroid of its
   own top results and searched again through `nearest` (pseudo-relevance feedback; off by
   default: it lowered nDCG@10 of every mode on SciFact, see the README).
2. BM25 leg: top `candidates` by BM25 among the allowed positions.
3. Fusion: weighted RRF on ranks, or a convex combination of min-max / z-score normalised
   scores. For score fusion, each leg's scores are completed over the union of both candidate
   lists (the cosine of a BM25-only candidate is known exactly; a vector-only candidate gets
   its true BM25 score), so a document is not punished for sitting just outside one list.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from octobrain.config import SearchConfig
from octobrain.kernels import fusion
from octobrain.kernels.bm25 import BM25Index, Hits

if TYPE_CHECKING:
    from octobrain.kernels.vectors import VectorBlocks

Nearest = Callable[[npt.NDArray[np.float32], int], list[int]]
Ties = npt.NDArray[np.int64] | None
"""A key per position for breaking equal scores (e.g. the rank of the row's id), so that
mirrors holding the same rows at other positions rank them alike; None: by position."""

__all__ = [
    "Nearest",
    "Ranking",
    "Scored",
    "Ties",
    "calibrated_relevance",
    "cosines",
    "exact_top",
    "fuse",
    "hybrid_rank",
    "unit",
]


@dataclass(frozen=True)
class Ranking:
    """Positions best first, their fused scores scaled to [0, 1] (best = 1), and per position
    how each leg ranked it (e.g. ``"vector #2, bm25 #7"``)."""

    ids: list[int]
    scores: list[float]
    legs: dict[int, str]


@dataclass(frozen=True)
class Scored:
    """One candidate of a ranking, scored: its position, fused score, calibrated relevance
    (`calibrated_relevance`), cosine, word coverage and how each leg ranked it."""

    pos: int
    fused: float
    relevance: float
    cosine: float
    coverage: float
    legs: str


def calibrated_relevance(cosine: float, coverage: float) -> float:
    """A candidate's calibrated relevance: its cosine, or the mean of its cosine and its
    query-word coverage when higher. Exact words are evidence, but never alone beyond that
    mean, so one shared common word does not make an unrelated text "relevant"."""
    return max(0.0, cosine, 0.5 * (cosine + coverage))


def unit(vector: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """`vector` scaled to length 1 (unchanged when it is all zeros)."""
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


def cosines(
    embeddings: npt.NDArray[np.float32], vector: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    """``embeddings @ vector`` (one cosine per row for unit rows), on the calling thread.

    A BLAS mat-vec wakes the BLAS thread pool; on a small, busy machine (the 2-core target,
    with the ONNX model's threads beside it) that hand-off cost 10–20 ms per query at 10k
    rows, for ~1 ms of arithmetic. `einsum` without `optimize` runs the same product in one
    SIMD loop on this thread.
    """
    out: npt.NDArray[np.float32] = np.einsum("ij,j->i", embeddings, vector)
    return out


def exact_nearest(
    embeddings: npt.NDArray[np.float32],
    vector: npt.NDArray[np.float32],
    allowed: npt.NDArray[np.bool_],
    k: int,
    ties: Ties = None,
) -> list[int]:
    """Exact top-`k` allowed positions by cosine (rows and `vector` are unit vectors)."""
    # One contiguous matrix-vector product beats gathering the allowed rows first.
    return exact_top(cosines(embeddings, vector), allowed, k, ties)


def exact_top(
    cosines: npt.NDArray[np.float32],
    allowed: npt.NDArray[np.bool_],
    k: int,
    ties: Ties = None,
) -> list[int]:
    """Top-`k` allowed positions by the scores (cosines) the caller already computed; equal
    scores by `ties[position]` (by position without it), also where they straddle the cut."""
    candidates = np.flatnonzero(allowed)
    scores = cosines[candidates]
    if len(candidates) > k:
        kth = -np.partition(-scores, k - 1)[k - 1]
        keep = scores >= kth
        candidates, scores = candidates[keep], scores[keep]
    order = np.lexsort((_keys(candidates, ties), -scores))[:k]
    return [int(p) for p in candidates[order]]


def _keys(positions: npt.NDArray[np.int64], ties: Ties) -> npt.NDArray[np.int64]:
    return positions if ties is None else ties[positions]


def _vector_leg(
    qvec: npt.NDArray[np.float32],
    embeddings: npt.NDArray[np.float32] | VectorBlocks,
    cosines: npt.NDArray[np.float32],
    allowed: npt.NDArray[np.bool_],
    nearest: Nearest,
    cfg: SearchConfig,
    first: list[int] | None,
    ties: Ties,
) -> list[int]:
    # The caller computes every cosine anyway (for calibrated relevance), so the first pass is
    # an exact top-k over them: cheaper than any index, and never approximate. A caller past
    # the ANN threshold hands over its own first pass (ANN candidates re-scored exactly).
    found = exact_top(cosines, allowed, cfg.candidates, ties) if first is None else first
    hyde = cfg.hyde
    if not hyde.enabled or len(found) < hyde.min_results or hyde.alpha >= 1.0:
        return found
    centroid = unit(embeddings[found[: hyde.top_k]].mean(axis=0))
    return nearest(unit(hyde.alpha * qvec + (1.0 - hyde.alpha) * centroid), cfg.candidates)


def _complete_scores(
    query: str,
    vector_pos: list[int],
    bm_pos: list[int],
    bm_scores: list[float],
    cosines: npt.NDArray[np.float32],
    index: BM25Index,
    allowed: npt.NDArray[np.bool_],
    seen: npt.NDArray[np.bool_] | None,
    ties: Ties,
) -> tuple[list[int], list[float], list[int], list[float]]:
    """Both legs scored over the union of their candidates (see the module docstring)."""
    union = list(dict.fromkeys(vector_pos + bm_pos))
    have = dict(zip(bm_pos, bm_scores, strict=True))
    missing = [p for p in vector_pos if p not in have]
    if missing:  # (allowed, as vector candidates are): scored where they are, not searched for
        extra = index.scores_at(query, np.asarray(missing, dtype=np.int64), seen)
        have.update(
            (p, s) for p, s in zip(missing, extra.tolist(), strict=True) if s > 0 and allowed[p]
        )
    # A document sharing no term with the query scores 0, as BM25 defines it.
    key = dict(zip(union, _keys(np.asarray(union, dtype=np.int64), ties).tolist(), strict=True))
    v_ids = sorted(union, key=lambda p: (-float(cosines[p]), key[p]))
    b_ids = sorted(union, key=lambda p: (-have.get(p, 0.0), key[p]))
    return (
        v_ids,
        [float(cosines[p]) for p in v_ids],
        b_ids,
        [have.get(p, 0.0) for p in b_ids],
    )


def hybrid_rank(
    query: str,
    qvec: npt.NDArray[np.float32],
    *,
    embeddings: npt.NDArray[np.float32] | VectorBlocks,
    cosines: npt.NDArray[np.float32],
    nearest: Nearest,
    index: BM25Index,
    allowed: npt.NDArray[np.bool_],
    cfg: SearchConfig,
    vector_first: list[int] | None = None,
    bm25_hits: Hits | None = None,
    seen: npt.NDArray[np.bool_] | None = None,
    ties: Ties = None,
) -> Ranking:
    """Fuse the vector and BM25 legs for one query (see the module docstring).

    `embeddings` are the unit rows `nearest` searches; `cosines` holds each position's cosine
    to `qvec` (the caller needs it anyway for calibrated relevance; knowledge search passes a
    section's best chunk cosine); `allowed` masks visible positions. A caller that ran a leg
    itself passes its result: `vector_first` (the first vector pass, best first) and
    `bm25_hits`; `cosines` must then be known at least at those positions. `seen`: the
    positions whose statistics BM25 scores with (`BM25Index.search`; all when None).
    `ties` breaks equal scores in each leg and in the fusion (see `Ties`); a caller passing
    `vector_first` or `bm25_hits` broke them so already.
    """
    vector_pos = (
        _vector_leg(qvec, embeddings, cosines, allowed, nearest, cfg, vector_first, ties)
        if cfg.vector_weight > 0
        else []
    )
    if cfg.bm25_weight <= 0:
        bm25_hits = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))
    elif bm25_hits is None:
        bm25_hits = index.search(query, cfg.candidates, allowed=allowed, seen=seen, ties=ties)
    bm_pos_arr, bm_scores_arr = bm25_hits
    bm_pos = [int(p) for p in bm_pos_arr]
    bm_scores = [float(s) for s in bm_scores_arr]
    legs: dict[int, list[str]] = {}
    for name, positions in (("vector", vector_pos), ("bm25", bm_pos)):
        for rank, p in enumerate(positions, 1):
            legs.setdefault(p, []).append(f"{name} #{rank}")
    if not legs:
        return Ranking([], [], {})
    lists: list[list[int]] = []
    scores: list[list[float]] = []
    weights: list[float] = []
    if cfg.fusion != "rrf" and vector_pos and bm_pos:
        v_ids, v_scores, b_ids, b_scores = _complete_scores(
            query, vector_pos, bm_pos, bm_scores, cosines, index, allowed, seen, ties
        )
        lists, scores, weights = (
            [v_ids, b_ids],
            [v_scores, b_scores],
            [
                cfg.vector_weight,
                cfg.bm25_weight,
            ],
        )
    else:
        if vector_pos:
            lists.append(vector_pos)
            scores.append([float(cosines[p]) for p in vector_pos])
            weights.append(cfg.vector_weight)
        if bm_pos:
            lists.append(bm_pos)
            scores.append(bm_scores)
            weights.append(cfg.bm25_weight)
    fused = fuse(lists, scores, weights, method=cfg.fusion, ties=ties, rrf_k=cfg.rrf_k)
    unit_scores = _to_unit_range(fused.scores, zscore=cfg.fusion == "zscore")
    return Ranking(fused.ids, unit_scores, {p: ", ".join(legs[p]) for p in legs})


def fuse(
    lists: Sequence[Sequence[int]],
    scores: Sequence[Sequence[float]],
    weights: Sequence[float] | None = None,
    *,
    method: str,
    ties: Ties,
    rrf_k: float = 60.0,
) -> fusion.Fused:
    """`fusion.rrf` (method ``"rrf"``, `scores` unused) or `fusion.score_fusion` of lists of
    positions, equal fused scores broken by `ties[position]` rather than by position."""
    # The fusion breaks its ties by id: hand it the tie keys, and read positions back.
    keyed = [_keys(np.asarray(ids, dtype=np.int64), ties).tolist() for ids in lists]
    position_of = {
        k: p for ids, keys in zip(lists, keyed, strict=True) for p, k in zip(ids, keys, strict=True)
    }
    if method == "rrf":
        fused = fusion.rrf(keyed, weights, k=rrf_k)
    else:
        fused = fusion.score_fusion(keyed, scores, weights, method=method)  # type: ignore[arg-type]
    return fusion.Fused([position_of[k] for k in fused.ids], fused.scores)


def _to_unit_range(values: list[float], *, zscore: bool) -> list[float]:
    """Scale fused scores to (0, 1] with the best at 1 (RRF and min-max: divide by the top).

    A z-score becomes exp(z - z_best): the gap to the best candidate in standard deviations,
    made multiplicative and kept the same size wherever it lies. So the bounded multipliers
    downstream trade against a fixed amount of evidence — a ×0.9 (trust) equals 0.1 standard
    deviation, the ×0.1 of a superseded memory 2.3 — and reorder near-ties only. (A normal CDF,
    used before, squeezed every strong candidate towards 1, where a 5 % multiplier outweighed
    a whole standard deviation of match.) Every score stays positive, so a multiplier can
    still reorder the last two candidates, which a min-max map would pin at exactly 0."""
    if not values:
        return []
    if zscore:
        best = max(values)
        return [math.exp(v - best) for v in values]
    hi = max(values)
    return [v / hi if hi > 0 else 0.0 for v in values]
