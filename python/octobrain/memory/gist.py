"""Gist: old, faded episodic memories are shown compressed; the full text stays stored.

Fuzzy-trace theory in one function: after `gist_after_days`, an episodic memory (a bug-fix log, a
session digest) whose decayed strength fell below `gist_strength` is shown as its gist — its
first sentence plus its most central ones (the sentences sharing the most analysed terms with
the whole text), in their original order, within `gist_max_chars`. Computed when shown, never
stored: the memory itself is untouched and `memory get <id>` returns the full text.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from datetime import datetime

from octobrain.config import BriefConfig
from octobrain.memory.summary import split_sentences
from octobrain.models import Memory, MemoryType
from octobrain.text import analyze

__all__ = ["DIGEST_TAG", "compress", "gist_for", "is_episodic"]

DIGEST_TAG = "session-digest"
EPISODIC_TYPES = frozenset({MemoryType.BUG_FIX})


def is_episodic(memory: Memory) -> bool:
    """Whether a memory records something that happened (rather than something that holds)."""
    return memory.memory_type in EPISODIC_TYPES or DIGEST_TAG in memory.tags


def compress(text: str, max_chars: int) -> str:
    """The first sentence and the most central others, in text order, within `max_chars`, each
    run of sentences left out marked "…". A bare label ("Decisions:", a digest's) goes with the
    sentence after it: alone, the labels were the shortest "sentences" and filled a gist with
    "Decisions: Errors fixed: …". A list item or paragraph without a closing stop gets a full
    stop (`_stopped`)."""
    sentences = _labelled(split_sentences(_stopped(text)))
    if not sentences:
        return text[:max_chars]
    terms = analyze(sentences)
    weight = Counter(t for words in terms for t in set(words))

    def centrality(i: int) -> float:
        words = set(terms[i])
        total: int = sum(weight[t] for t in words)
        return total / math.sqrt(1 + len(words))

    order = [0, *sorted(range(1, len(sentences)), key=lambda i: (-centrality(i), i))]
    chosen: list[int] = []
    for i in order:
        if len(_elided(sentences, [*chosen, i])) <= max_chars:
            chosen.append(i)
    if not chosen:  # even the first sentence is too long: cut it at a word boundary
        cut = sentences[0][: max(1, max_chars - 1)].rsplit(" ", 1)[0]
        return cut + "…"
    return _elided(sentences, chosen)


def _elided(sentences: list[str], chosen: list[int]) -> str:
    """The `chosen` sentences in text order, each run of sentences left out shown as "…": kept
    sentences with others skipped between them were joined as if they followed each other."""
    parts: list[str] = []
    after = 0  # the index after the last sentence kept
    for i in sorted(chosen):
        if i > after:
            parts.append("…")
        parts.append(sentences[i])
        after = i + 1
    if after < len(sentences):
        parts.append("…")
    return " ".join(parts)


# Where a point of a text ends: its line is followed by a blank line or by a list item. (A line
# break inside a paragraph, hard-wrapped prose, is no end: the sentence goes on.)
_POINT_END = re.compile(r"(?<=\S)(?=[^\S\n]*\n(?:[^\S\n]*\n|\s*(?:[-*•]|\d+[.)])\s))")
# What a point that ends as a sentence ends with: a stop, then maybe closing quotes or emphasis.
_STOP = re.compile(r"[.!?…:;。！？][\"'”’»)\]*_]*$")


def _stopped(text: str) -> str:
    """`text` with a full stop after each point that ends without one: a digest's bullets
    ("- we decided that last week") ran into the next once joined on one line ("… last week
    Here is …")."""
    return _POINT_END.sub(
        lambda m: "" if _STOP.search(text, max(0, m.start() - 16), m.start()) else ".", text
    )


def _labelled(sentences: list[str]) -> list[str]:
    """`sentences` with each bare label (a few words ending in ':') joined to the next one."""
    out: list[str] = []
    label = ""
    for sentence in sentences:
        if sentence.endswith(":") and len(sentence.split()) <= 4:
            label = f"{label} {sentence}".strip()
            continue
        out.append(f"{label} {sentence}" if label else sentence)
        label = ""
    return out


def gist_for(memory: Memory, strength: float, now: datetime, config: BriefConfig) -> str:
    """The gist to show for `memory` now, or "" when it should be shown in full."""
    age_days = (now - memory.created_at).total_seconds() / 86400.0
    if (
        not is_episodic(memory)
        or age_days < config.gist_after_days
        or strength >= config.gist_strength
        or len(memory.content) <= config.gist_max_chars
    ):
        return ""
    return compress(memory.content, config.gist_max_chars)
