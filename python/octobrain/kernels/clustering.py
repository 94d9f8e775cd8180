"""Cosine clustering of embeddings, used by sleep consolidation.

Agglomerative clustering cut at a threshold on true cosine similarity. Complete linkage (the
default) guarantees every pair inside a cluster is at least `threshold` similar, so a chain of
neighbours A~B~C cannot glue A and C together; average linkage requires the mean pairwise
similarity to reach it. The work runs in Rust with the GIL released.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt

from octobrain import _core
from octobrain.errors import InvalidInput

__all__ = ["TIE_TOLERANCE", "Linkage", "cosine_clusters", "unit_rows"]

Linkage = Literal["complete", "average"]

#: A similarity this far below the threshold still counts as meeting it (float rounding).
TIE_TOLERANCE = 1e-5


def as_float32_matrix(vectors: npt.ArrayLike, field: str = "vectors") -> npt.NDArray[np.float32]:
    """Return `vectors` as a C-contiguous float32 matrix, or raise `InvalidInput` naming `field`."""
    arr = np.asarray(vectors)
    if arr.dtype.kind not in "fiu":
        raise InvalidInput(field, f"must be a numeric array, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise InvalidInput(field, f"must be 2-D (n x d), got {arr.ndim}-D")
    # Overflow to inf is reported by the kernel as a non-finite row; no warning needed here.
    with np.errstate(over="ignore", invalid="ignore"):
        return np.ascontiguousarray(arr, dtype=np.float32)


def unit_rows(vectors: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """Rows scaled to unit length (a zero row stays zero), so a matrix product is cosines."""
    matrix = np.asarray(vectors, dtype=np.float32)
    out: npt.NDArray[np.float32] = matrix / np.maximum(
        np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12
    )
    return out


def cosine_clusters(
    vectors: npt.ArrayLike,
    threshold: float = 0.85,
    min_cluster_size: int = 3,
    linkage: Linkage = "complete",
) -> list[list[int]]:
    """Group rows of `vectors` whose cosine similarity reaches `threshold`.

    Args:
        vectors: an (n x d) numeric matrix; rows need not be unit length (a normalised copy is
            used). A zero row or a NaN/inf value raises `ValueError` naming the row.
        threshold: cosine similarity in [-1, 1]; a value within `TIE_TOLERANCE` below counts.
        min_cluster_size: smallest cluster returned (>= 2).
        linkage: "complete" (every pair similar) or "average" (mean pair similar).

    Returns:
        Clusters as lists of row positions, each sorted ascending, ordered by size (largest
        first) then by first row. A row is in at most one cluster; unclustered rows are omitted.
    """
    matrix = as_float32_matrix(vectors)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise InvalidInput("threshold", "must be a number in [-1, 1]")
    if isinstance(min_cluster_size, bool) or not isinstance(min_cluster_size, int):
        raise InvalidInput("min_cluster_size", "must be an integer >= 2")
    if linkage not in ("complete", "average"):
        raise InvalidInput("linkage", f'must be "complete" or "average", got {linkage!r}')
    return _core.cosine_clusters(matrix, float(threshold), min_cluster_size, linkage)
