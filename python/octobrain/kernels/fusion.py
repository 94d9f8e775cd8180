"""Rank fusion: merge several ranked lists of document ids into one ranking.

Two fusions, both computed in the Rust core in one call:

- `rrf`: weighted reciprocal-rank fusion, ``score(d) = sum_l w_l / (k + rank_l(d))`` with ranks
  from 1. Uses only ranks, so it needs no score calibration (the hybrid BM25 + vector default).
- `score_fusion`: per-list min-max or z-score normalisation of raw scores, then a convex
  combination (weights rescaled to sum to 1). Keeps score gaps that ranks throw away.

Ids are Python ints in the int64 range (the store passes row positions). Shared conventions:

- A list is ranked best first; the rank of an entry is its 1-based position as given. An id
  repeated within one list counts once, at its first position; later repeats keep their slots.
- Ties are broken deterministically: fused score descending, then the best (lowest) rank the id
  reached in any list, then id ascending.

The Rust path beats a dict-based Python loop even for two lists of ten ids (see
`benches/bench_fusion.py`), so there is no pure-Python fallback.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, NamedTuple, TypeAlias

import numpy as np
import numpy.typing as npt

from octobrain import _core
from octobrain.errors import InvalidInput

__all__ = ["Fused", "rrf", "rrf_batch", "score_fusion"]

IdList: TypeAlias = "Sequence[int] | npt.NDArray[np.integer[Any]]"
ScoreList: TypeAlias = "Sequence[float] | npt.NDArray[np.floating[Any] | np.integer[Any]]"


class Fused(NamedTuple):
    """A fused ranking, best first: ``ids[i]`` has fused score ``scores[i]``."""

    ids: list[int]
    scores: list[float]

    def pairs(self) -> list[tuple[int, float]]:
        """The ranking as ``(id, score)`` pairs."""
        return list(zip(self.ids, self.scores, strict=True))


def rrf(
    lists: Sequence[IdList],
    weights: Sequence[float] | None = None,
    k: float = 60.0,
    limit: int | None = None,
) -> Fused:
    """Weighted reciprocal-rank fusion of ranked id lists.

    Args:
        lists: ranked lists of int ids, best first (sequences or integer numpy arrays).
        weights: one finite weight >= 0 per list, not all 0; default 1.0 each.
        k: rank offset, finite and > 0 (60 is the usual choice; smaller favours top ranks).
        limit: keep at most this many ids (>= 1); ``None`` keeps all.

    Returns:
        The fused ranking, ordered by score desc, best rank asc, id asc.

    Raises:
        ValueError: (or its subclass `InvalidInput`) naming the bad argument.
    """
    ids, scores = _core.rrf(_id_lists(lists, "lists"), weights, k, limit)
    return Fused(ids, scores)


def rrf_batch(
    queries: Sequence[Sequence[IdList]],
    weights: Sequence[float] | None = None,
    k: float = 60.0,
    limit: int | None = None,
) -> list[Fused]:
    """`rrf` for many queries in one call to the core; ``weights``, ``k``, ``limit`` are shared."""
    prepared = [_id_lists(lists, "queries") for lists in queries]
    return [Fused(ids, scores) for ids, scores in _core.rrf_batch(prepared, weights, k, limit)]


def score_fusion(
    lists: Sequence[IdList],
    scores: Sequence[ScoreList],
    weights: Sequence[float] | None = None,
    method: Literal["minmax", "zscore"] = "minmax",
    limit: int | None = None,
) -> Fused:
    """Fuse ranked lists by their normalised raw scores.

    Each list is normalised on its own, then combined as ``sum_l (w_l / sum(w)) * norm_l(d)``:

    - ``"minmax"``: ``(s - min) / (max - min)``; a list whose scores are all equal gives 1.0 to
      each of its ids; an id missing from a list gets 0 from it. Fused scores lie in [0, 1].
    - ``"zscore"``: ``(s - mean) / std`` (population std); a constant list gives 0.0; an id
      missing from a list gets that list's lowest z-score (the worst it could have been).

    Args:
        lists: ranked lists of int ids, best first.
        scores: ``scores[l][i]`` is the raw score of ``lists[l][i]``; finite, |s| <= 1e100.
        weights: one finite weight >= 0 per list, not all 0; default equal weights.
        method: ``"minmax"`` or ``"zscore"``.
        limit: keep at most this many ids (>= 1); ``None`` keeps all.

    Returns:
        The fused ranking, ordered by score desc, best rank asc, id asc.

    Raises:
        ValueError: (or its subclass `InvalidInput`) naming the bad argument.
    """
    raw = [_as_list(s, "scores", "fiu") for s in scores]
    ids, fused = _core.score_fusion(_id_lists(lists, "lists"), raw, weights, method, limit)
    return Fused(ids, fused)


def _id_lists(lists: Sequence[IdList], arg: str) -> Sequence[Sequence[int]]:
    # Plain lists go straight to the core; only numpy arrays need a dtype check and `tolist`.
    if any(isinstance(lst, np.ndarray) for lst in lists):
        return [_as_list(lst, arg, "iu") for lst in lists]
    return lists  # type: ignore[return-value]


_KIND_NAMES = {"iu": "integer ids", "fiu": "numbers"}


def _as_list(values: Any, arg: str, kinds: str) -> Any:
    if isinstance(values, np.ndarray):
        if values.dtype.kind not in kinds:
            raise InvalidInput(arg, f"must hold {_KIND_NAMES[kinds]}, got dtype {values.dtype}")
        if values.ndim != 1:
            raise InvalidInput(arg, f"each list must be 1-D, got shape {values.shape}")
        return values.tolist()
    return values
