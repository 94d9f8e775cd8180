"""A deterministic, dependency-free embedder (`hash:<dim>`) for fast tests of search logic."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from octobrain.embed.base import BaseEmbedder, Kind

__all__ = ["HashEmbedder"]

_WORD = re.compile(r"\w+")
# Function words would dominate a bag of words without carrying any topic.
_STOPWORDS = frozenset(
    ("a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "from", "has", "have",
     "he", "her", "his", "i", "in", "into", "is", "it", "its", "of", "on", "or", "our", "she",
     "so", "that", "the", "their", "them", "they", "this", "to", "was", "we", "were", "what",
     "when", "which", "who", "will", "with", "you", "your")
)  # fmt: skip


@lru_cache(maxsize=65536)
def _slot(feature: str, dim: int) -> tuple[int, float]:
    h = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
    return h % dim, (1.0 if (h >> 63) & 1 else -1.0)


class HashEmbedder(BaseEmbedder):
    """Deterministic, dependency-free embedder: hashed words plus character trigrams
    (English function words skipped), signed feature hashing, L2-normalised.

    Texts sharing words (or word stems, via trigrams) get similar vectors, so search logic can be
    tested quickly; it knows nothing of synonyms.
    """

    def __init__(self, dim: int, batch_size: int = 256) -> None:
        super().__init__(f"hash:{dim}", batch_size)
        self._dim = dim

    @property
    def dim(self) -> int:
        """Vector dimension."""
        return self._dim

    def _embed_batch(self, texts: list[str], kind: Kind) -> npt.NDArray[Any]:
        out = np.zeros((len(texts), self._dim), dtype=np.float64)
        for row, text in enumerate(texts):
            counts = Counter(w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS)
            features = [(_features(word, self._dim), n) for word, n in counts.items()]
            if not features:
                features = [(_features("\x00empty", self._dim), 1)]
            slots = np.concatenate([slot for (slot, _weight), _n in features])
            weights = np.concatenate([weight * n for (_slot, weight), n in features])
            out[row] = np.bincount(slots, weights=weights, minlength=self._dim)
        return out


@lru_cache(maxsize=65536)
def _features(word: str, dim: int) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]:
    """The slots and signed weights one occurrence of `word` adds: the word's own, and each of
    its character trigrams' (`#word#`) weighted by 1 / their number. Once per distinct word
    (a text's words counted first): one 1 MB document took 2.8 s word by word."""
    padded = f"#{word}#"
    grams = [padded[i : i + 3] for i in range(len(padded) - 2)]
    pairs = [_slot("w:" + word, dim)] + [_slot("g:" + gram, dim) for gram in grams]
    slots = np.array([slot for slot, _sign in pairs], dtype=np.intp)
    weights = np.array([sign for _slot, sign in pairs], dtype=np.float64)
    weights[1:] /= len(grams)
    return slots, weights
