"""Type stubs for the compiled core. Users import the wrappers in `octobrain`, not this module."""

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = [
    "__version__",
    "decayed_importance",
    "rrf",
    "rrf_batch",
    "score_fusion",
]

__version__: str

# ---- fusion ----

def rrf(
    lists: Sequence[Sequence[int]],
    weights: Sequence[float] | None = None,
    k: float = 60.0,
    limit: int | None = None,
) -> tuple[list[int], list[float]]: ...
def rrf_batch(
    queries: Sequence[Sequence[Sequence[int]]],
    weights: Sequence[float] | None = None,
    k: float = 60.0,
    limit: int | None = None,
) -> list[tuple[list[int], list[float]]]: ...
def score_fusion(
    lists: Sequence[Sequence[int]],
    scores: Sequence[Sequence[float]],
    weights: Sequence[float] | None = None,
    method: str = "minmax",
    limit: int | None = None,
) -> tuple[list[int], list[float]]: ...

# ---- decay ----

def decayed_importance(
    importance: npt.NDArray[np.float64],
    last_accessed: npt.NDArray[np.float64],
    access_count: npt.NDArray[np.int64],
    now: float,
    half_life_days: float,
    access_boost_factor: float,
    min_importance: float,
) -> npt.NDArray[np.float64]: ...
