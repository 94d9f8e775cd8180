"""Paired statistics for the recall-under-noise benchmark (`recall_under_noise.py`).

Every configuration answers the same questions, so a mechanism's effect is measured per
question against its baseline: the questions it fixes (baseline wrong, mechanism right at rank
1) and those it breaks. Questions are not independent: in one shared pool every project that
has a setting asks the very same question, and a topic's phrasings share its memories. So the
unit of resampling and of the sign test is the *cluster* of questions about one setting of one
service in one seeded store, never the single question:

- 95% CI of the p@1 difference: percentile bootstrap over clusters (2,000 resamples, seeded);
- p: exact two-sided sign test over the clusters whose net (fixed - broken) is not zero.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

RESAMPLES = 2000


@dataclass(frozen=True)
class Paired:
    """One mechanism against its baseline on the same questions."""

    delta: float  # p@1(mechanism) - p@1(baseline)
    low: float
    high: float
    fixed: int
    broken: int
    p_value: float


def sign_test(pos: int, neg: int) -> float:
    """Exact two-sided binomial sign test of `pos` against `neg` (ties already dropped)."""
    n = pos + neg
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(pos, neg) + 1)) / 2.0**n
    return min(1.0, 2.0 * tail)


def paired(
    mechanism: Sequence[bool], baseline: Sequence[bool], clusters: Sequence[object], seed: int = 0
) -> Paired:
    """Effect of `mechanism` over `baseline` (correct at rank 1 per question, same order),
    with questions grouped into independent `clusters`."""
    mech = np.asarray(mechanism, dtype=np.float64)
    base = np.asarray(baseline, dtype=np.float64)
    diff = mech - base
    keys = {c: i for i, c in enumerate(dict.fromkeys(clusters))}
    index = np.array([keys[c] for c in clusters], dtype=np.int64)
    sums = np.bincount(index, weights=diff, minlength=len(keys))
    sizes = np.bincount(index, minlength=len(keys)).astype(np.float64)
    draws = np.random.default_rng(seed).integers(0, len(keys), size=(RESAMPLES, len(keys)))
    deltas = sums[draws].sum(axis=1) / sizes[draws].sum(axis=1)
    low, high = np.percentile(deltas, [2.5, 97.5])
    return Paired(
        delta=float(diff.mean()),
        low=float(low),
        high=float(high),
        fixed=int((diff > 0).sum()),
        broken=int((diff < 0).sum()),
        p_value=sign_test(int((sums > 0).sum()), int((sums < 0).sum())),
    )


def fmt_p(p: float) -> str:
    """A p-value for a table: three significant digits, or an upper bound when tiny."""
    return "< 0.001" if p < 0.001 else f"{p:.3f}"
