"""Extractive summaries for consolidation parents: the distinct facts of the members.

No model writes anything: every sentence of a summary is a sentence some member said. Members'
sentences are taken most-central member first; a sentence is dropped when an already kept one
says all of it: its analysed terms (stemmed, stopwords removed) are a subset of the kept
sentence's, its numbers too, and the two are negated alike. Numbers and negations are compared
apart on purpose, since the analyser drops "not" and "no" as stopwords: "100 requests per
minute" and "120 requests per minute", "use tabs" and "do not use tabs" are different facts,
and both stay. Two sentences that differ by a word each way stay too ("owned by Alice" and
"owned by Bob"): words cannot tell a rewording from a changed fact, so a summary never silently
picks one side of a conflict.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache

from octobrain.text import analyze

__all__ = [
    "Claims",
    "claims",
    "distinct_sentences",
    "negations",
    "same_claims",
    "split_sentences",
    "summarise",
]

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[`])|\n+")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
# Negation cues, besides every word ending in "n't" (the analyser keeps "don't" whole).
_NEGATIONS = frozenset(
    ["not", "no", "never", "none", "nobody", "nothing", "neither", "nor", "cannot", "without"]
)


def split_sentences(text: str) -> list[str]:
    """Sentences (and list items) of a text, trimmed, empty ones dropped."""
    out = []
    for part in _SENTENCE_END.split(text):
        sentence = _BULLET.sub("", part).strip()
        if sentence:
            out.append(sentence)
    return out


def negations(words: Sequence[str]) -> int:
    """How many negation cues are among `words` (analysed without stopwords removed)."""
    return sum(1 for w in words if w in _NEGATIONS or w.endswith("n't"))


@dataclass(frozen=True)
class Claims:
    """What `same_claims` compares of a text: its numbers, its negation cues and its terms."""

    numbers: frozenset[str]
    negated: int
    words: frozenset[str]  # analysed, neither stemmed nor stopwords removed
    text: str

    @cached_property
    def terms(self) -> frozenset[str]:
        """The text's analysed terms (stemmed, stopwords removed), analysed when first asked."""
        (terms,) = analyze([self.text])
        return frozenset(terms)

    def same_as(self, other: Claims) -> bool:
        """Whether the two texts state the same (`same_claims`)."""
        return (
            self.numbers == other.numbers
            and self.negated == other.negated
            and (_kept_word(self.words & other.words) or not self.terms.isdisjoint(other.terms))
        )


def _kept_word(common: frozenset[str]) -> bool:
    """Whether a word of `common` (two texts' `Claims.words`) is no stopword: the analyser
    stems each word it keeps, so that word's stem is a term of both. Then neither text is
    stemmed: a briefing's 2,400 near-duplicates at 100,000 memories were, for 0.1 s of CPU."""
    if not common:
        return False
    (kept,) = analyze([" ".join(common)], stem=False)  # (a stopword is never a word kept)
    return not common.isdisjoint(kept)


@lru_cache(maxsize=1_024)
def claims(text: str) -> Claims:
    """A text's `Claims`, kept for the last 1,024 texts asked (at most 10 kB each): a briefing
    compares a near-duplicate with each chosen item like it and a chosen item with each of its
    near-duplicates, and the resident service briefs on the same memories session after
    session."""
    (said,) = analyze([text], stem=False, stopwords=False)
    return Claims(frozenset(_NUMBER.findall(text)), negations(said), frozenset(said), text)


def same_claims(one: str, other: str) -> bool:
    """Whether two texts quote the same numbers, are negated alike and share a word: what tells
    "the timeout is 30 s" from "… 45 s", and "use tabs" from "do not use tabs", when their
    vectors are near-identical. The shared word is for text the model cannot read: it maps
    Amharic, Thai or emoji to one unknown token, so three unrelated rules in Amharic had
    near-identical vectors, and the briefing showed one of them "+2 similar"."""
    return claims(one).same_as(claims(other))


COMPARISONS = 2_000_000
"""How many pairs of sentences `distinct_sentences` compares at most (about a second): each new
sentence is compared with every one kept, so a cluster's members full of short distinct
sentences (256 members of 10 kB: some 600,000) would take hours of the sleep pass. Past it the
rest are kept as they come, repeats of a sentence aside; a real cluster's few hundred sentences
stay far below it."""


def distinct_sentences(sentences: Sequence[str]) -> list[str]:
    """`sentences` in order without restatements; a later, fuller sentence replaces an earlier
    one it contains (within `COMPARISONS`)."""
    terms = analyze(list(sentences))
    words = analyze(list(sentences), stem=False, stopwords=False)
    kept: list[tuple[str, frozenset[str], frozenset[str], int]] = []
    budget = COMPARISONS
    for sentence, analysed, said in zip(sentences, terms, words, strict=True):
        t, n, neg = frozenset(analysed), frozenset(_NUMBER.findall(sentence)), negations(said)
        if not t:
            continue
        budget -= len(kept)
        if budget < 0:
            kept.append((sentence, t, n, neg))
            continue
        for i, (_, kt, kn, kneg) in enumerate(kept):
            if neg != kneg:
                continue
            if t <= kt and n <= kn:
                break
            if kt < t and kn <= n:  # the new sentence says all of the kept one, and more
                kept[i] = (sentence, t, n, neg)
                break
        else:
            kept.append((sentence, t, n, neg))
    # A replacement can make two kept sentences identical; keep the first.
    return list(dict.fromkeys(s for s, _, _, _ in kept))


def summarise(contents: Sequence[str], max_bytes: int = 10_000) -> str:
    """One readable text holding each distinct fact of `contents` once, in the given order,
    as a bulleted list (a single fact is returned as plain text). At most `max_bytes`: facts
    that do not fit are counted on a last line, which says where they are."""
    facts = distinct_sentences([s for text in contents for s in split_sentences(text)])
    if len(facts) == 1:
        return facts[0][:max_bytes]
    lines = [f"- {fact}" for fact in facts]
    sizes = [len(line.encode()) + 1 for line in lines]
    if sum(sizes) - 1 <= max_bytes:
        return "\n".join(lines)
    room = sum(sizes)
    while lines:
        room -= sizes.pop()  # (the lines before the last, each with its line end)
        tail = f"- … and {len(facts) - len(lines) + 1} more sentences, in the memories merged here"
        if room + len(tail.encode()) <= max_bytes:
            return "\n".join([*lines[:-1], tail])
        lines.pop()
    return ""
