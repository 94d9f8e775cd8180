"""Token counting for budgets: the embedder's own tokenizer where we ship it, else an estimate.

The bundled all-MiniLM-L6-v2 tokenizer (WordPiece) is read from the package's assets with the
`tokenizers` library (which also runs the bundled model). Other models fall back to a documented
estimate: one token per punctuation mark and one per started 3 characters of each word — more
than subword tokenizers produce for English prose and code, so a budget is kept, not overrun.
"""

from __future__ import annotations

import functools
import json
import math
import re
import threading
from collections.abc import Callable
from importlib import resources
from typing import Any

from octobrain.modelspec import BUNDLED_MODEL_ID

__all__ = ["TokenCounter", "estimate_tokens", "input_window", "token_counter"]

TokenCounter = Callable[[str], int]
COUNTS_KEPT = 8192  # texts whose bundled-tokenizer count a process remembers (LRU) …
COUNTED_CHARS = 1024  # … of those at most this long (a briefing line, not the whole briefing)
_PIECE = re.compile(r"\w+|[^\w\s]")
_lock = threading.Lock()
_bundled: Any = None


def estimate_tokens(text: str) -> int:
    """Punctuation marks + ceil(len / 3) per word: the fallback without the model's tokenizer."""
    return sum(math.ceil(len(piece) / 3) for piece in _PIECE.findall(text))


def _bundled_tokenizer() -> Any:
    global _bundled
    with _lock:
        if _bundled is None:
            from tokenizers import Tokenizer  # lazy: a compiled extension

            path = resources.files("octobrain") / "assets" / "all-MiniLM-L6-v2" / "tokenizer.json"
            tokenizer = Tokenizer.from_str(path.read_text(encoding="utf-8"))
            # The file pads and truncates to 128 for the model; a count needs neither.
            tokenizer.no_truncation()
            tokenizer.no_padding()
            _bundled = tokenizer
        return _bundled


@functools.cache
def token_counter(model_id: str) -> TokenCounter:
    """A function counting the tokens of a text as the embedder `model_id` would see them (one
    per model and process, so its memory of counted texts lasts)."""
    if model_id == BUNDLED_MODEL_ID:
        try:
            tokenizer = _bundled_tokenizer()
        except ImportError:
            return estimate_tokens

        unknown = tokenizer.token_to_id("[UNK]")

        def counted(text: str) -> int:
            # A word the vocabulary lacks (Thai, Amharic, an emoji) is one [UNK] however long:
            # 50 emoji counted 1 token, a Thai line 12 against 85 by `estimate_tokens`. Each
            # is counted as a token per 3 bytes of UTF-8 instead (a Thai or Amharic letter).
            encoded = tokenizer.encode(text, add_special_tokens=False)
            total = len(encoded.ids)
            for token, (start, end) in zip(encoded.ids, encoded.offsets, strict=True):
                if token == unknown:
                    total += max(1, len(text[start:end].encode("utf-8")) // 3) - 1
            return total

        # A resident process counts the same lines again on every briefing: remember them
        # (short texts only, so the memory this takes stays under COUNTS_KEPT x 1 KiB or so).
        remembered = functools.lru_cache(maxsize=COUNTS_KEPT)(counted)

        def count(text: str) -> int:
            return remembered(text) if len(text) <= COUNTED_CHARS else counted(text)

        return count
    return estimate_tokens


@functools.cache
def input_window(model_id: str) -> tuple[int, TokenCounter] | None:
    """(tokens the embedder `model_id` reads, special tokens included; a counter of a text's
    tokens as the model receives it), or None when the model's tokenizer is not at hand.

    The bundled MiniLM is truncated at its tokenizer's `model_max_length` (256); text
    beyond that never reaches the vector. Other models have no known window here, so their
    chunks keep the byte sizes alone."""
    if model_id != BUNDLED_MODEL_ID:
        return None
    try:
        tokenizer = _bundled_tokenizer()
    except ImportError:
        return None
    config = resources.files("octobrain") / "assets" / "all-MiniLM-L6-v2" / "tokenizer_config.json"
    window = int(json.loads(config.read_text(encoding="utf-8"))["model_max_length"])

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=True).ids)

    return window, count
