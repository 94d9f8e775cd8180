"""Extractive summaries for consolidation parents: the distinct facts of the members.

No model writes anything: every sentence of a summary is a sentence some member said. Members'
sentences are taken most-central member first; a sentence is dropped when an already kept one
says the same thing — its analysed terms (stemmed, stopwords removed) are a subset of the kept
sentence's, or the two overlap heavily and quote the same numbers. Numbers are compared apart on
purpose: "100 requests per minute" and "120 requests per minute" are different facts, and both
stay, so a summary never silently picks one side of a conflict.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from octobrain.text import analyze

__all__ = ["distinct_sentences", "split_sentences", "summarise"]

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[`])|\n+")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
OVERLAP = 0.7  # Jaccard of analysed terms above which same-number sentences are duplicates


def split_sentences(text: str) -> list[str]:
    """Sentences (and list items) of a text, trimmed, empty ones dropped."""
    out = []
    for part in _SENTENCE_END.split(text):
        sentence = _BULLET.sub("", part).strip()
        if sentence:
            out.append(sentence)
    return out


def distinct_sentences(sentences: Sequence[str]) -> list[str]:
    """`sentences` in order without restatements; a later, fuller sentence replaces an earlier
    one it contains."""
    terms = analyze(list(sentences))
    kept: list[tuple[str, frozenset[str], frozenset[str]]] = []
    for sentence, words in zip(sentences, terms, strict=True):
        t, n = frozenset(words), frozenset(_NUMBER.findall(sentence))
        if not t:
            continue
        duplicate = False
        for i, (_, kt, kn) in enumerate(kept):
            if t <= kt and n <= kn:
                duplicate = True
                break
            if kt < t and kn <= n:  # the new sentence says all of the kept one, and more
                kept[i] = (sentence, t, n)
                duplicate = True
                break
            if n == kn and len(t & kt) / len(t | kt) >= OVERLAP:
                duplicate = True
                break
        if not duplicate:
            kept.append((sentence, t, n))
    # A replacement can make two kept sentences identical; keep the first.
    return list(dict.fromkeys(s for s, _, _ in kept))


def summarise(contents: Sequence[str], max_bytes: int = 10_000) -> str:
    """One readable text holding each distinct fact of `contents` once, in the given order,
    as a bulleted list (a single fact is returned as plain text). At most `max_bytes`."""
    facts = distinct_sentences([s for text in contents for s in split_sentences(text)])
    if len(facts) == 1:
        return facts[0][:max_bytes]
    lines: list[str] = []
    size = 0
    for fact in facts:
        line = f"- {fact}"
        size += len(line.encode()) + 1
        if size > max_bytes:
            break
        lines.append(line)
    return "\n".join(lines)
