"""Type stubs for the compiled core. Users import the wrappers in `octobrain`, not this module."""

from collections.abc import Sequence
from typing import final

import numpy as np
import numpy.typing as npt

__all__ = [
    "Bm25Index",
    "IdIndex",
    "TimeLimitExceeded",
    "__version__",
    "analyze",
    "block_crcs",
    "cosine_clusters",
    "crc32",
    "decayed_importance",
    "match_lines",
    "row_crcs",
    "rrf",
    "rrf_batch",
    "score_fusion",
]

__version__: str

class TimeLimitExceeded(ValueError):
    """A search ran past its time limit (a `ValueError` naming the slow argument)."""

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

# ---- text analysis
def analyze(texts: list[str], stem: bool = True, stopwords: bool = True) -> list[list[str]]: ...

# ---- BM25
_Hits = tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]
_Parts = tuple[
    npt.NDArray[np.uint8],
    npt.NDArray[np.uint64],
    npt.NDArray[np.uint64],
    npt.NDArray[np.uint32],
    npt.NDArray[np.uint32],
    npt.NDArray[np.uint32],
    npt.NDArray[np.bool_],
]

@final
class Bm25Index:
    def __new__(
        cls, k1: float = 1.2, b: float = 0.75, stem: bool = True, stopwords: bool = True
    ) -> Bm25Index: ...
    @staticmethod
    def build(
        texts: list[str],
        k1: float = 1.2,
        b: float = 0.75,
        stem: bool = True,
        stopwords: bool = True,
    ) -> Bm25Index: ...
    def add(self, texts: list[str]) -> int: ...
    def remove(self, positions: npt.NDArray[np.int64]) -> None: ...
    def search(
        self,
        query: str,
        k: int,
        allowed: npt.NDArray[np.int64] | None = None,
        seen: npt.NDArray[np.bool_] | None = None,
        ties: npt.NDArray[np.int64] | None = None,
    ) -> _Hits: ...
    def coverage(
        self,
        query: str,
        positions: npt.NDArray[np.int64],
        seen: npt.NDArray[np.bool_] | None = None,
    ) -> npt.NDArray[np.float64]: ...
    def search_masked(
        self,
        query: str,
        k: int,
        mask: npt.NDArray[np.bool_],
        seen: npt.NDArray[np.bool_] | None = None,
        ties: npt.NDArray[np.int64] | None = None,
    ) -> _Hits: ...
    def scores_at(
        self,
        query: str,
        positions: npt.NDArray[np.int64],
        seen: npt.NDArray[np.bool_] | None = None,
    ) -> npt.NDArray[np.float32]: ...
    def search_batch(
        self,
        queries: list[str],
        k: int,
        allowed: npt.NDArray[np.int64] | None = None,
        seen: npt.NDArray[np.bool_] | None = None,
    ) -> list[_Hits]: ...
    def term_ids(self, query: str) -> npt.NDArray[np.uint32]: ...
    def to_bytes(self) -> bytes: ...
    @staticmethod
    def from_bytes(data: bytes) -> Bm25Index: ...
    def to_parts(self) -> _Parts: ...
    def to_parts_read(
        self,
        docs: tuple[str, str, int, list[int]],
        tfs: tuple[str, str, int, list[int]],
        block: int,
    ) -> _Parts: ...
    @staticmethod
    def open_base(
        k1: float,
        b: float,
        stem: bool,
        stopwords: bool,
        terms: npt.NDArray[np.uint8],
        term_ends: npt.NDArray[np.uint64],
        doc_len: npt.NDArray[np.uint32],
        live: npt.NDArray[np.bool_],
        offsets: npt.NDArray[np.uint64],
        docs: npt.NDArray[np.uint32],
        tfs: npt.NDArray[np.uint32],
    ) -> Bm25Index: ...
    def live_mask(self) -> npt.NDArray[np.bool_]: ...
    @property
    def k1(self) -> float: ...
    @property
    def b(self) -> float: ...
    @property
    def stem(self) -> bool: ...
    @property
    def stopwords(self) -> bool: ...
    @property
    def doc_count(self) -> int: ...
    @property
    def position_count(self) -> int: ...
    @property
    def vocab_size(self) -> int: ...

# ---- id index
@final
class IdIndex:
    @staticmethod
    def build(columns: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8]]]) -> IdIndex: ...
    def rows_of(
        self, offsets: npt.NDArray[np.int64], data: npt.NDArray[np.uint8]
    ) -> npt.NDArray[np.uint32]: ...
    @property
    def row_count(self) -> int: ...

# ---- row checksums
def row_crcs(
    rows: int,
    columns: list[
        tuple[
            npt.NDArray[np.int64] | None,
            npt.NDArray[np.uint8],
            int,
            npt.NDArray[np.bool_] | None,
            npt.NDArray[np.int64] | None,
            npt.NDArray[np.bool_] | None,
        ]
    ],
) -> npt.NDArray[np.uint32]: ...
def block_crcs(data: npt.NDArray[np.uint8], block: int) -> npt.NDArray[np.uint32]: ...
def crc32(data: npt.NDArray[np.uint8], value: int = 0) -> int: ...

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
    seconds: float | None = None,
    context_chars: int | None = None,
) -> tuple[list[tuple[int, int, str, int, int, list[str], list[str]]], bool]: ...
