"""Text analysis: the one analyser BM25 uses for documents and queries alike.

Steps: Unicode words (UAX #29 word bounds; segments holding a letter or digit) → lowercase →
ASCII folding (`é`→`e`, `ﬁ`→`fi`; non-Latin letters such as Greek or CJK stay as they are) →
English stopwords (Lucene's 33-word list, as bm25s uses) → Snowball English stemming.
"""

from __future__ import annotations

from collections.abc import Sequence

from octobrain import _core
from octobrain.errors import InvalidInput

__all__ = ["analyze"]


def _texts(name: str, texts: Sequence[str]) -> list[str]:
    """Validate a batch of texts (a lone string is a common mistake, so it is rejected)."""
    if isinstance(texts, str):
        raise InvalidInput(name, "must be a sequence of strings, not a single string")
    out = list(texts)
    for i, text in enumerate(out):
        if not isinstance(text, str):
            raise InvalidInput(name, f"item {i} is {type(text).__name__}, expected str")
    return out


def analyze(texts: Sequence[str], stem: bool = True, stopwords: bool = True) -> list[list[str]]:
    """Analyse each text into its index terms, in one call to the Rust core.

    >>> analyze(["The cafés are running"])
    [['cafe', 'run']]
    """
    return _core.analyze(_texts("texts", texts), stem=bool(stem), stopwords=bool(stopwords))
