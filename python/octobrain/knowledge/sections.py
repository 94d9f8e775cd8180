"""`Sections`: the unit knowledge search ranks — a parent section, or a chunk without a parent.

A long section is cut into child chunks sized for the embedding model, because the model reads
only its first 256 tokens (MiniLM) and a dense vector of a longer text ignores its tail. Ranking
chunks one by one, though, splits a section's lexical evidence across its children and prints the
same section several times. So the two legs score the section as a whole:

- lexical: BM25 over the section's full text (header and parent text), with its own term
  statistics, so every word of the section counts once;
- dense: the best cosine among the section's chunks (MaxP: a section is as close to the query as
  its closest passage), computed from the chunk cosines the caller already has.

A section is visible when any of its chunks is (all chunks of a section share source,
generation, scope and session, so in practice all or none are).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from octobrain.kernels.bm25 import BM25Index

__all__ = ["SectionScores", "Sections", "section_key", "section_text"]


def section_key(row: dict[str, Any]) -> tuple[str, str]:
    """Chunks with the same key form one section: the children of one parent text within one
    generation of a source; a chunk without a parent is a section of its own. (A tuple, not
    one joined string: the key holds the parent text the rows share, not a copy of it.)"""
    if row["parent_content"]:
        return (f"{row['source_id']}/{row['generation']}", row["parent_content"])
    return (f"chunk/{row['id']}", "")


def section_text(row: dict[str, Any]) -> str:
    """What the lexical leg indexes for a chunk's section: the header and the whole parent."""
    if not row["parent_content"]:
        return str(row["content"])
    header = str(row["content"]).partition("\n\n")[0]
    return f"{header}\n\n{row['parent_content']}"


class SectionScores:
    """Per-query section view: which sections are visible, their MaxP cosine and best chunk."""

    def __init__(
        self,
        allowed: npt.NDArray[np.bool_],
        cosine: npt.NDArray[np.float32],
        best: npt.NDArray[np.int64],
    ) -> None:
        self.allowed = allowed
        self.cosine = cosine
        self.best = best  # chunk position with the highest cosine, per visible section


class Sections:
    """Section positions ↔ chunk positions, with BM25 over section texts (its postings give
    the term statistics)."""

    def __init__(self) -> None:
        self.index = BM25Index()
        self.pos_of: dict[tuple[str, str], int] = {}
        self._refs: list[int] = []  # live chunks per section; 0 once removed
        # Each section's key, by position: its parent text is the one object every row of the
        # section holds (a parent is read once per chunk, up to 4,800 bytes for each).
        self._keys: list[tuple[str, str]] = []
        self.of_chunk = np.zeros(0, dtype=np.int64)  # section position of each chunk position

    def __len__(self) -> int:
        return len(self.pos_of)

    def add(self, rows: Sequence[dict[str, Any]]) -> None:
        """Register newly mirrored chunk rows (appended at the next chunk positions). Each
        row's `parent_content` is replaced by its section's own copy of that text."""
        keys = [section_key(r) for r in rows]
        fresh: dict[tuple[str, str], str] = {}
        for key, row in zip(keys, rows, strict=True):
            if key not in self.pos_of and key not in fresh:
                fresh[key] = section_text(row)
        if fresh:
            texts = list(fresh.values())
            positions = self.index.add(texts)
            for key, pos in zip(fresh, positions, strict=True):
                self.pos_of[key] = int(pos)
                self._refs.append(0)
                self._keys.append(key)
        of_new = np.array([self.pos_of[k] for k in keys], dtype=np.int64)
        for pos, row in zip(of_new, rows, strict=True):
            self._refs[pos] += 1
            if row["parent_content"]:
                row["parent_content"] = self._keys[pos][1]
        self.of_chunk = np.concatenate([self.of_chunk, of_new])

    def remove(self, rows: Sequence[dict[str, Any]]) -> None:
        """Forget removed chunk rows; a section goes when its last chunk does."""
        gone: list[int] = []
        for row in rows:
            key = section_key(row)
            pos = self.pos_of[key]
            self._refs[pos] -= 1
            if self._refs[pos] == 0:
                del self.pos_of[key]
                self._keys[pos] = ("", "")
                gone.append(pos)
        if gone:
            self.index.remove(gone)

    def scores(
        self, chunk_cosines: npt.NDArray[np.float32], chunk_allowed: npt.NDArray[np.bool_]
    ) -> SectionScores:
        """Each visible section's best chunk cosine (MaxP) and which chunk holds it."""
        n = len(self._refs)
        allowed = np.zeros(n, dtype=bool)
        cosine = np.full(n, -1.0, dtype=np.float32)
        best = np.zeros(n, dtype=np.int64)
        chunks = np.flatnonzero(chunk_allowed)
        if len(chunks):
            owner = self.of_chunk[chunks]
            cos = chunk_cosines[chunks]
            # Sorted by section, best cosine first (ties: lower chunk position): the first
            # entry of each run is the section's best chunk.
            order = np.lexsort((chunks, -cos, owner))
            owner_sorted = owner[order]
            first = np.ones(len(order), dtype=bool)
            first[1:] = owner_sorted[1:] != owner_sorted[:-1]
            pick = order[first]
            allowed[owner[pick]] = True
            cosine[owner[pick]] = cos[pick]
            best[owner[pick]] = chunks[pick]
        return SectionScores(allowed, cosine, best)

    def holding(self, chunks: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
        """A mask over section positions: the sections of the chunks `chunks` marks."""
        held = np.zeros(self.index.position_count, dtype=bool)
        held[self.of_chunk[np.flatnonzero(chunks)]] = True
        return held

    def coverage(
        self, query: str, positions: Sequence[int], seen: npt.NDArray[np.bool_] | None = None
    ) -> npt.NDArray[np.float64]:
        """The idf-weighted share of the query's distinct terms each section contains (idf
        over the sections `seen` marks; every section when None)."""
        return self.index.coverage(query, positions, seen)
