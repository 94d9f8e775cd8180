"""BM25 keyword search over document positions, backed by the Rust core.

Scoring is Lucene's BM25: ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))`` and
``tf·(k1+1) / (tf + k1·(1 - b + b·dl/avgdl))``; a query term written twice counts twice (as in
Lucene and bm25s). Documents and queries go through `octobrain.text.analyze`.

Positions are stable: `add` appends, `remove` tombstones, and the statistics (N, df, avgdl)
always describe the live documents, so scores equal those of a fresh build over them. A query
given `seen` (a mask) counts them over the live documents it marks, and scores as a fresh build
over those alone would: what one project sees is ranked the same whatever else the index holds.

`to_parts` gives the index as flat arrays (`Parts`) for a caller to store; `open_parts` reopens
them with the postings left where they are (e.g. memory-mapped ``.npy`` files): a query reads
only its terms' postings, and documents added later are indexed in memory beside them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, TypeAlias

import numpy as np
import numpy.typing as npt

from octobrain import _core
from octobrain.errors import InvalidInput
from octobrain.text import _texts

__all__ = ["PARTS", "BM25Index", "Hits", "Stored"]

PARTS = ("terms", "term_ends", "offsets", "docs", "tfs", "doc_len", "live")
"""The arrays of `BM25Index.to_parts`: the terms' UTF-8 bytes and where each ends, per-term
offsets into the postings' positions (`docs`) and term frequencies (`tfs`), each position's
document length and whether it is live."""


class Stored(NamedTuple):
    """Where a stored base's postings lie (`BM25Index.check_postings`): `docs` and `tfs`,
    each as (the path read, which may be an open descriptor's, `/dev/fd/N`; the file's name in
    messages; where its values start; the CRC-32 of each `block` bytes of the file);
    `damaged` makes the error a merge raises when one of them is not what those say."""

    docs: tuple[str, str, int, list[int]]
    tfs: tuple[str, str, int, list[int]]
    block: int
    damaged: Callable[[str], Exception]


Hits: TypeAlias = tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]
"""(positions, scores): int64 positions, best first, and their float32 BM25 scores."""

Positions: TypeAlias = Sequence[int] | npt.NDArray[np.integer] | npt.NDArray[np.bool_]


def _positions(name: str, values: Positions, size: int | None = None) -> npt.NDArray[np.int64]:
    """Positions as a contiguous int64 array; a bool array of length `size` is a mask."""
    array = np.asarray(values)
    if array.dtype == np.bool_:
        if size is None or array.shape != (size,):
            raise InvalidInput(name, f"a bool mask must have shape ({size},)")
        return np.flatnonzero(array).astype(np.int64)
    if array.size == 0:
        return np.zeros(0, dtype=np.int64)
    if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
        raise InvalidInput(name, "must be a 1-d sequence of integer positions or a bool mask")
    return np.ascontiguousarray(array, dtype=np.int64)


def _k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int | np.integer):
        raise InvalidInput("k", f"must be an int, got {type(k).__name__}")
    if k < 1:
        raise InvalidInput("k", "must be >= 1")
    return int(k)


def _param(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
        raise InvalidInput(name, f"must be a number, got {type(value).__name__}")
    value = float(value)
    if math.isnan(value):
        raise InvalidInput(name, "must not be NaN")
    return value


class BM25Index:
    """A mutable BM25 index. Searching is one call into Rust with the GIL released.

    `allowed` (for scope/state filtering without rebuilding) is either a sequence/array of
    positions or a bool mask of length `position_count`; only those positions are returned.

    Searches may run from several threads at once; `add`/`remove` while another thread is
    searching raise RuntimeError (the Rust handle is borrowed), so guard updates with a lock.
    """

    _parts: dict[str, npt.NDArray[Any]] | None = None  # what `open_parts` opened, while unchanged
    _check: Callable[[npt.NDArray[np.uint32] | None], None] | None = None
    _stored: Stored | None = None

    def __init__(
        self, *, k1: float = 1.2, b: float = 0.75, stem: bool = True, stopwords: bool = True
    ) -> None:
        """Create an empty index (k1 >= 0, 0 <= b <= 1)."""
        self._index = _core.Bm25Index(
            _param("k1", k1), _param("b", b), stem=bool(stem), stopwords=bool(stopwords)
        )

    @classmethod
    def build(
        cls,
        texts: Sequence[str],
        *,
        k1: float = 1.2,
        b: float = 0.75,
        stem: bool = True,
        stopwords: bool = True,
    ) -> BM25Index:
        """Index `texts`; text i gets position i."""
        index = cls.__new__(cls)
        index._index = _core.Bm25Index.build(
            _texts("texts", texts),
            _param("k1", k1),
            _param("b", b),
            stem=bool(stem),
            stopwords=bool(stopwords),
        )
        return index

    def search(
        self,
        query: str,
        k: int = 10,
        allowed: Positions | None = None,
        seen: npt.NDArray[np.bool_] | None = None,
        ties: npt.NDArray[np.int64] | None = None,
    ) -> Hits:
        """Top-`k` documents for `query`: (positions, scores), score descending, ties by
        position ascending, or by `ties[position]` ascending when given (a key per position
        that does not depend on where a row happens to sit, e.g. its id's rank). Only
        documents sharing a term with the query are returned.

        `seen`, a bool mask over positions: the documents whose statistics (N, df, avgdl)
        score the query, the live ones it marks, so that the scores of what one asker may see
        do not depend on what else the index holds (another project's words). Without it,
        or marking every live document, the index's own."""
        if not isinstance(query, str):
            raise InvalidInput("query", f"must be a str, got {type(query).__name__}")
        self._checked([query])
        mask, k = self._seen(seen), _k(k)
        if ties is not None:  # (broken in Rust, also where a tie straddles the cut)
            ties = np.ascontiguousarray(ties, dtype=np.int64)
            if ties.shape != (self.position_count,):
                raise InvalidInput(
                    "ties", f"must hold one key per position ({self.position_count})"
                )
        if isinstance(allowed, np.ndarray) and allowed.dtype == np.bool_:
            if allowed.shape != (self.position_count,):
                raise InvalidInput(
                    "allowed", f"a bool mask must have shape ({self.position_count},)"
                )
            return self._index.search_masked(query, k, np.ascontiguousarray(allowed), mask, ties)
        return self._index.search(query, k, self._allowed(allowed), mask, ties)

    def scores_at(
        self, query: str, positions: Positions, seen: npt.NDArray[np.bool_] | None = None
    ) -> npt.NDArray[np.float32]:
        """`query`'s BM25 score for each of `positions` (0 where a document shares no term
        with it or was removed): the same numbers `search` returns for them (with the same
        `seen`), without reading every posting of the query's terms."""
        if not isinstance(query, str):
            raise InvalidInput("query", f"must be a str, got {type(query).__name__}")
        self._checked([query])
        at = _positions("positions", positions, self.position_count)
        return self._index.scores_at(query, at, self._seen(seen))

    def search_batch(
        self,
        queries: Sequence[str],
        k: int = 10,
        allowed: Positions | None = None,
        seen: npt.NDArray[np.bool_] | None = None,
    ) -> list[Hits]:
        """`search` for many queries in one call (run in parallel); results in query order."""
        queries = _texts("queries", queries)
        self._checked(queries)
        return self._index.search_batch(queries, _k(k), self._allowed(allowed), self._seen(seen))

    def coverage(
        self, query: str, positions: Positions, seen: npt.NDArray[np.bool_] | None = None
    ) -> npt.NDArray[np.float64]:
        """How much of `query`'s information each document holds: the idf-weighted share of
        the query's distinct analysed terms present in it, in [0, 1] (removed positions: 0).
        Absolute, unlike a BM25 score, so an exact identifier or error code can pass a
        relevance threshold alone. Document frequencies come from the postings (of the
        documents `seen` marks, as in `search`)."""
        if not isinstance(query, str):
            raise InvalidInput("query", f"must be a str, got {type(query).__name__}")
        self._checked([query])
        at = _positions("positions", positions, self.position_count)
        return self._index.coverage(query, at, self._seen(seen))

    def _seen(self, seen: npt.NDArray[np.bool_] | None) -> npt.NDArray[np.bool_] | None:
        if seen is None:
            return None
        if not isinstance(seen, np.ndarray) or seen.dtype != np.bool_:
            raise InvalidInput("seen", "must be a bool mask over positions")
        if seen.shape != (self.position_count,):
            raise InvalidInput("seen", f"a bool mask must have shape ({self.position_count},)")
        return np.ascontiguousarray(seen)

    def add(self, texts: Sequence[str]) -> npt.NDArray[np.int64]:
        """Append documents; returns their new (consecutive) positions."""
        texts = _texts("texts", texts)
        self._parts = None
        start = self._index.add(texts)
        return np.arange(start, start + len(texts), dtype=np.int64)

    def remove(self, positions: Positions) -> None:
        """Remove documents by position; other positions keep their meaning.
        Removing an already removed position is a no-op; an out-of-range one is an error."""
        self._parts = None
        self._index.remove(_positions("positions", positions, self.position_count))

    def to_bytes(self) -> bytes:
        """Serialise (versioned, checksummed) for `from_bytes`."""
        return self._index.to_bytes()

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> BM25Index:
        """Load an index written by `to_bytes`; corrupt data raises ValueError naming `data`."""
        if not isinstance(data, bytes | bytearray | memoryview):
            raise InvalidInput("data", f"must be bytes, got {type(data).__name__}")
        index = cls.__new__(cls)
        index._index = _core.Bm25Index.from_bytes(bytes(data))
        return index

    def to_parts(self) -> dict[str, npt.NDArray[Any]]:
        """The index as flat arrays (names in `PARTS`), for `open_parts`. A stored base's
        postings are read from their files where `check_postings` named them (`Stored`),
        each block verified as it is merged, never through their mapping."""
        stored = self._stored
        if self._parts is None and stored is not None:
            try:
                parts = self._index.to_parts_read(stored.docs, stored.tfs, stored.block)
            except ValueError as exc:  # (a file cut or changed in place: named, its block)
                raise stored.damaged(str(exc)) from None
            return dict(zip(PARTS, parts, strict=True))
        if self._check is not None:
            self._check(None)  # everything is about to be read
        if self._parts is not None:
            return dict(self._parts)
        return dict(zip(PARTS, self._index.to_parts(), strict=True))

    def frozen(self) -> BM25Index:
        """A copy that later `add`/`remove` calls on this index do not change."""
        if self._parts is not None:  # its arrays are never written: share them (and checks)
            copy = BM25Index.open_parts(self._parts, self.params())
            copy._check = self._check
            return copy
        return BM25Index.open_parts(self.to_parts(), self.params())

    def check_postings(
        self,
        check: Callable[[npt.NDArray[np.uint32] | None], None],
        stored: Stored | None = None,
    ) -> None:
        """Call `check(term ids)` before a query reads those terms' postings, and
        `check(None)` before all of them are read (a stored base verified as it is read);
        a merge (`to_parts` once documents were added or removed) reads them from the
        `stored` files instead."""
        self._check, self._stored = check, stored

    def _checked(self, queries: Sequence[str]) -> None:
        if self._check is not None:
            for query in queries:
                self._check(self._index.term_ids(query))

    def params(self) -> dict[str, Any]:
        """k1, b, stem and stopwords, as `open_parts` takes them."""
        return {"k1": self.k1, "b": self.b, "stem": self.stem, "stopwords": self.stopwords}

    @classmethod
    def open_parts(
        cls, parts: Mapping[str, npt.NDArray[Any]], params: Mapping[str, Any]
    ) -> BM25Index:
        """An index over stored `parts` (see `to_parts`); the `offsets`, `docs` and `tfs` arrays
        are kept, not copied, and read as queries need them. Inconsistent lengths or offsets
        raise ValueError."""
        dtypes = {"terms": np.uint8, "live": np.bool_, "term_ends": np.uint64, "offsets": np.uint64}
        arrays = [np.asarray(parts[name]) for name in PARTS]
        for name, array in zip(PARTS, arrays, strict=True):
            if array.ndim != 1 or array.dtype != np.dtype(dtypes.get(name, np.uint32)):
                raise InvalidInput(
                    name, f"must be a 1-d {np.dtype(dtypes.get(name, np.uint32))} array"
                )
        terms, term_ends, offsets, docs, tfs, doc_len, live = arrays
        index = cls.__new__(cls)
        index._index = _core.Bm25Index.open_base(
            _param("k1", params["k1"]),
            _param("b", params["b"]),
            bool(params["stem"]),
            bool(params["stopwords"]),
            terms,
            term_ends,
            doc_len,
            live,
            offsets,
            docs,
            tfs,
        )
        index._parts = dict(zip(PARTS, arrays, strict=True))
        return index

    def _allowed(self, allowed: Positions | None) -> npt.NDArray[np.int64] | None:
        if allowed is None:
            return None
        return _positions("allowed", allowed, self.position_count)

    def live_mask(self) -> npt.NDArray[np.bool_]:
        """Bool array over all positions: True where the document was not removed."""
        return self._index.live_mask()

    def __len__(self) -> int:
        """Number of live documents."""
        return self._index.doc_count

    @property
    def doc_count(self) -> int:
        """Number of live documents (the N of BM25)."""
        return self._index.doc_count

    @property
    def position_count(self) -> int:
        """Number of positions ever assigned, removed ones included."""
        return self._index.position_count

    @property
    def vocab_size(self) -> int:
        """Number of distinct terms in live documents."""
        return self._index.vocab_size

    @property
    def k1(self) -> float:
        """Term-frequency saturation."""
        return self._index.k1

    @property
    def b(self) -> float:
        """Length normalisation."""
        return self._index.b

    @property
    def stem(self) -> bool:
        """Whether the analyser stems."""
        return self._index.stem

    @property
    def stopwords(self) -> bool:
        """Whether the analyser drops English stopwords."""
        return self._index.stopwords

    def __repr__(self) -> str:
        return (
            f"BM25Index(docs={self.doc_count}, positions={self.position_count}, "
            f"k1={self.k1}, b={self.b}, stem={self.stem}, stopwords={self.stopwords})"
        )
