"""The first vector pass through LanceDB's ANN index, for stores past `search.ann_min_rows`.

The index proposes ANN_REFINE × the wanted candidates and their exact cosines from the
mirror's vectors decide, equal cosines broken by the rows' tie keys (as the exact scan does).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from octobrain.memory.corpus import Corpus
from octobrain.store import MemoryStore

# Past `search.ann_min_rows`, LanceDB's ANN index proposes ANN_REFINE × the wanted candidates
# (partitions probed: ANN_NPROBES), and their exact cosines from the mirror's vectors decide.
# ×8 rather than ×5: the index is trained afresh on every store, and on one of two 1M stores
# ×5 fell to recall@10 0.978 / 0.977 (two query sets) where ×8 held 0.990 / 0.985 (README).
ANN_REFINE = 8
ANN_NPROBES = 128
ANN_EXACT_BELOW = 10_000  # fewer allowed rows than this are scored exactly
# From this share of the mirror's rows allowed, the index is searched unfiltered for
# 1/share × as many candidates and the allowed ones kept: LanceDB's prefilter evaluates the
# SQL filter over every row per query (~45 ms of 75 at 1M rows, README "Scale"), and the
# mirror's mask says the same thing for free. A filter that keeps fewer falls back to it.
ANN_POSTFILTER_SHARE = 0.5


def ann_scored(
    store: MemoryStore,
    corpus: Corpus,
    vector: npt.NDArray[np.float32],
    where: str,
    want: int,
    allowed: npt.NDArray[np.bool_],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """Top-`want` allowed positions, best first, with their exact cosines to `vector`: the ANN
    index's `ANN_REFINE`×`want` nearest (prefiltered by `where`), re-ranked exactly."""
    count = int(np.count_nonzero(allowed))
    if count <= ANN_EXACT_BELOW:  # a narrow filter is scored exactly, index or not
        pos = np.flatnonzero(allowed)
    else:
        wanted = want * ANN_REFINE
        share = count / max(1, len(corpus))
        pos = np.zeros(0, dtype=np.int64)
        if share >= ANN_POSTFILTER_SHARE:
            pos = _positions(store, corpus, vector, None, math.ceil(wanted / share), allowed)
        if len(pos) < min(want, count):  # the filter kept too few of them
            pos = _positions(store, corpus, vector, where, wanted, allowed)
    exact = corpus.exact_cosines(vector, pos)
    order = np.lexsort((corpus.pos_of.tie_keys()[pos], -exact))[:want]
    return pos[order].astype(np.int64), exact[order]


def _positions(
    store: MemoryStore,
    corpus: Corpus,
    vector: npt.NDArray[np.float32],
    where: str | None,
    k: int,
    allowed: npt.NDArray[np.bool_],
) -> npt.NDArray[np.int64]:
    """The allowed mirror positions among the index's `k` nearest rows (matching `where`,
    or unfiltered when None), each once."""
    addrs, _ = store.vector_search(vector, where, k, nprobes=ANN_NPROBES)
    pos = corpus.positions_at(addrs)
    pos = pos[pos >= 0]
    return np.unique(pos[allowed[pos]])
