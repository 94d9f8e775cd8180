"""Pseudo-relevance feedback for the words leg of `remember` (RM3-style), `[search.feedback]`.

Off by default: on LoCoMo it raised turn Recall@10 on both halves but lowered nDCG@10 and
session Recall@5 on one (README, "Conversation memory: LoCoMo"). When enabled, one query runs:

1. the usual fused ranking (vector + BM25 legs);
2. a relevance model from its top `docs` memories: each term's share of a memory's indexed
   words, weighted by that memory's fused score, summed; the `terms` best terms not in the
   query, by that weight times their idf among the visible memories (a conversational filler
   word such as "great" is in most turns and so carries little);
3. the expansion's BM25 score of every visible memory (the weighted sum of its terms' BM25
   scores: a weighted query, scored exactly);
4. a fusion (`search.fusion`) of three legs over the union of their candidates: the vector leg
   (weight `vector_weight`), the query's own BM25 (`bm25_weight` × (1 − `weight`)) and the
   expansion's (`bm25_weight` × `weight`), as RM3 interpolates the original query with its
   feedback model.

Relevance is untouched: the caller computes it from the original query's cosine and word
coverage, so the expansion can reorder memories but never make one look more relevant.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from octobrain.config import SearchConfig
from octobrain.kernels import fusion
from octobrain.kernels.bm25 import BM25Index
from octobrain.kernels.hybrid import Ranking
from octobrain.models import Memory
from octobrain.text import analyze

__all__ = ["expand", "expansion_terms"]

CANDIDATE_TERMS = 4  # × `terms`: the relevance model's best terms whose idf is looked up


def expansion_terms(
    query: str,
    memories: Sequence[Memory],
    weights: Sequence[float],
    index: BM25Index,
    allowed: npt.NDArray[np.bool_],
    terms: int,
) -> dict[str, float]:
    """The expansion terms of `query` from its top `memories` (fused scores `weights`), each
    with its weight (summing to 1); {} when the memories hold no term besides the query's."""
    asked = set(analyze([query])[0])
    model: dict[str, float] = {}
    for w, words in zip(weights, analyze([m.searchable_text() for m in memories]), strict=True):
        for term, n in Counter(words).items():
            if term not in asked and not term.isdigit():
                model[term] = model.get(term, 0.0) + w * n / len(words)
    ranked = sorted(model, key=lambda t: (-model[t], t))
    candidates = ranked[: CANDIDATE_TERMS * terms]
    if not candidates:
        return {}
    visible = int(allowed.sum())
    found = index.search_batch(candidates, visible, allowed=allowed)
    scored = {
        t: model[t] * math.log((visible + 1) / (len(pos) + 0.5))
        for t, (pos, _) in zip(candidates, found, strict=True)
        if len(pos)
    }
    best = sorted(scored, key=lambda t: (-scored[t], t))[:terms]
    total = sum(scored[t] for t in best)
    return {t: scored[t] / total for t in best} if total > 0 else {}


def expand(
    query: str,
    ranking: Ranking,
    *,
    memories_at: Callable[[list[int]], list[Memory]],
    index: BM25Index,
    allowed: npt.NDArray[np.bool_],
    cosines: npt.NDArray[np.float32],
    score_cosines: Callable[[list[int]], object],
    cfg: SearchConfig,
) -> Ranking:
    """`ranking` re-fused with the expansion leg (see the module doc); unchanged when feedback
    is off, the words leg is off, or the top memories hold no expansion term.
    `score_cosines(positions)` makes `cosines` exact at those positions (the ANN path knows
    only its candidates')."""
    fb = cfg.feedback
    if not fb.enabled or cfg.bm25_weight <= 0 or not ranking.ids:
        return ranking
    top = ranking.ids[: fb.docs]
    terms = expansion_terms(
        query, memories_at(top), ranking.scores[: fb.docs], index, allowed, fb.terms
    )
    if not terms:
        return ranking
    visible = int(allowed.sum())
    expansion: dict[int, float] = {}
    names = list(terms)
    for term, (pos, bm25) in zip(names, index.search_batch(names, visible, allowed), strict=True):
        for p, s in zip(pos.tolist(), bm25.tolist(), strict=True):
            expansion[p] = expansion.get(p, 0.0) + terms[term] * s
    found = sorted(expansion, key=lambda p: (-expansion[p], p))[: cfg.candidates]
    union = list(dict.fromkeys([*ranking.ids, *found]))
    score_cosines([p for p in found if p not in ranking.legs])
    words = _bm25(index, query, union, allowed)
    legs = [
        {p: float(cosines[p]) for p in union},
        {p: words.get(p, 0.0) for p in union},
        {p: expansion.get(p, 0.0) for p in union},
    ]
    lists = [_ranked(leg) for leg in legs]
    weights = [cfg.vector_weight, cfg.bm25_weight * (1.0 - fb.weight), cfg.bm25_weight * fb.weight]
    if cfg.fusion == "rrf":
        fused = fusion.rrf(lists, weights, k=cfg.rrf_k)
    else:
        scores = [[leg[p] for p in ids] for leg, ids in zip(legs, lists, strict=True)]
        fused = fusion.score_fusion(lists, scores, weights, method=cfg.fusion)  # type: ignore[arg-type]
    how = dict(ranking.legs)
    for rank, p in enumerate(found, 1):
        how[p] = f"{how[p]}, feedback #{rank}" if p in how else f"feedback #{rank}"
    best = max(fused.scores)
    if cfg.fusion == "zscore":  # as `hybrid_rank` scales them: exp(z - z_best)
        unit = [math.exp(s - best) for s in fused.scores]
    else:
        unit = [s / best if best > 0 else 0.0 for s in fused.scores]
    return Ranking(fused.ids, unit, how)


def _ranked(leg: dict[int, float]) -> list[int]:
    return sorted(leg, key=lambda p: (-leg[p], p))


def _bm25(
    index: BM25Index, query: str, positions: list[int], allowed: npt.NDArray[np.bool_]
) -> dict[int, float]:
    """The query's BM25 score at `positions` (0 where it shares no term)."""
    mask = np.zeros(len(allowed), dtype=bool)
    mask[positions] = True
    pos, scores = index.search(query, len(positions), allowed=mask & allowed)
    return dict(zip(pos.tolist(), scores.tolist(), strict=True))
