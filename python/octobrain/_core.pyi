"""Type stubs for the compiled core. Users import the wrappers in `octobrain`, not this module."""

import numpy as np
import numpy.typing as npt

__all__ = ["__version__", "cosine_clusters", "match_lines"]

__version__: str

# ---- clustering
def cosine_clusters(
    vectors: npt.NDArray[np.float32],
    threshold: float,
    min_cluster_size: int,
    linkage: str,
) -> list[list[int]]: ...

# ---- regex matching
def match_lines(
    texts: list[str],
    pattern: str,
    case_insensitive: bool,
    max_matches: int,
    context: int,
) -> tuple[list[tuple[int, int, str, int, int, list[str], list[str]]], bool]: ...
