"""`bench locomo --variant`: mechanisms for session Recall@5 measured against the shipped path.

The first two re-rank the turns `remember` returned (the first `DEPTH`), outside the product,
adding one more leg's evidence to each turn's fused score: `log(score) + LEG_WEIGHT · z`, where
`z` is the turn's standardised score on that leg among the returned turns (the fused score is
`exp(z_fused - z_best)`, so its log is on the same scale). `LEG_WEIGHT` = 0.5 is what one leg
weighs in the product's two-leg z-score fusion.

- `session-words`: BM25 of the question against one document per session (all the session's
  turns' words, photo captions included), so a session that talks about the topic throughout
  ranks up even when no single turn of it matches well;
- `window-vector`: the cosine of the question to the turn embedded with its context (speaker,
  session and date, the turn before and after: `Memory.searchable_text`), a second dense leg
  beside the turn's own vector. Relevance stays the turn's own cosine either way.

The other two ask `remember` again:

- `decompose`: a question that coordinates two or more things ("What have Caroline and Melanie
  both painted?", "a national park or a theme park", "What ... and how many ...") is asked once
  per part (`decompose`), each through `remember`, and the rankings are interleaved by rank, so
  each part's best turns — and their sessions — come first; other questions are asked as they are;
- `dense-feedback`: Rocchio on the query vector, q' = q + β · mean of the top `FEEDBACK_TURNS`
  returned turns' stored vectors (β = `FEEDBACK_BETA`, the textbook 10 documents and 0.75), and
  the question asked again with q' as its vector (`FeedbackEmbedder`), so the vector leg ranks
  by q' and can reach turns the first vector did not; relevance stays that of the question's
  own vector (`relevance_of`);
- `no-names`: the vector leg asked without the names of the conversations' speakers
  (`without_names`: "What did Caroline realize …" embedded as "What did realize …"). A turn's
  vector carries who said it, so a name in the question pulls towards everything that person
  said; the speaker preference (×2 after fusion) already does that. Relevance is the cosine
  to the vector asked, as it would be in the product.

One asks the words leg for more words, inside `remember` (`Retriever.words_query`):

- `word-neighbours`: each content word of the question brings the `NEIGHBOURS` words of the
  conversations nearest to it by the model's vector of the word alone (cosine ≥
  `NEIGHBOUR_COSINE`; "outdoor" → hiking, beach, camping), each weighing half a question word
  (the question's words are counted twice), so a turn that says "surfing" can be found for
  "outdoor activities" by its words too. Relevance (cosine, word coverage) stays the question's.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from octobrain.bench.variant_names import VARIANTS
from octobrain.embed.base import Embedder, EmbedderView
from octobrain.kernels.bm25 import BM25Index
from octobrain.kernels.hybrid import calibrated_relevance
from octobrain.memory.conversation import Conversation
from octobrain.memory.corpus import Corpus
from octobrain.memory.search import Hit
from octobrain.text import analyze

__all__ = [
    "FEEDBACK_BETA",
    "FEEDBACK_TURNS",
    "LEG_WEIGHT",
    "NEIGHBOURS",
    "NEIGHBOUR_COSINE",
    "VARIANTS",
    "FeedbackEmbedder",
    "SessionWords",
    "WindowVectors",
    "WordNeighbours",
    "decompose",
    "interleave",
    "relevance_of",
    "rerank",
    "without_names",
]

LEG_WEIGHT = 0.5
FEEDBACK_TURNS = 10
FEEDBACK_BETA = 0.75
NEIGHBOURS = 3
NEIGHBOUR_COSINE = 0.5


def _z(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    spread = float(values.std())
    return (values - values.mean()) / spread if spread > 0 else np.zeros_like(values)


def rerank(hits: Sequence[Hit], leg: Sequence[float]) -> list[Hit]:
    """`hits` ordered by their fused score combined with one more leg's scores (module doc)."""
    if not hits:
        return []
    z = _z(np.asarray(leg, dtype=np.float64))
    combined = [
        math.log(max(h.score, 1e-300)) + LEG_WEIGHT * float(v) for h, v in zip(hits, z, strict=True)
    ]
    order = sorted(range(len(hits)), key=lambda i: (-combined[i], hits[i].memory.id))
    return [hits[i] for i in order]


class SessionWords:
    """One BM25 document per session of a conversation; a turn's leg score is its session's."""

    def __init__(self, conversation: Conversation) -> None:
        texts: dict[str, list[str]] = {}
        for turn in conversation.turns:
            texts.setdefault(turn.session, []).append(turn.text)
        self.sessions = list(texts)
        self.index = BM25Index.build([" ".join(t) for t in texts.values()])
        self.session_of = {turn.key: turn.session for turn in conversation.turns}

    def scores(self, question: str, turn_keys: Sequence[str]) -> list[float]:
        """Each turn's session's BM25 score for `question` (0: no shared word)."""
        pos, values = self.index.search(question, len(self.sessions))
        found = zip(pos.tolist(), values.tolist(), strict=True)
        by_session = {self.sessions[p]: float(s) for p, s in found}
        return [by_session.get(self.session_of.get(k, ""), 0.0) for k in turn_keys]


class WindowVectors:
    """Each returned turn's embedded context window (computed once per turn, then cached)."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.vectors: dict[str, npt.NDArray[np.float32]] = {}

    def scores(self, question: str, hits: Sequence[Hit]) -> list[float]:
        """The cosine of `question` to each hit's window vector."""
        missing = [h.memory for h in hits if h.memory.id not in self.vectors]
        if missing:
            rows = self.embedder.embed_documents([m.searchable_text() for m in missing])
            self.vectors.update(zip((m.id for m in missing), rows, strict=True))
        query = self.embedder.embed_query(question)
        return [float(self.vectors[h.memory.id] @ query) for h in hits]


# ---- decompose ------------------------------------------------------------------------------

_WH = {"what", "which", "who", "whom", "whose", "when", "where", "why", "how"}
# Closed-class words end a conjunct: auxiliaries, modals, prepositions, pronouns, wh-words.
_CLOSED = _WH | {
    *("is", "are", "was", "were", "be", "been", "being", "am", "do", "does", "did", "have"),
    *("has", "had", "can", "could", "will", "would", "shall", "should", "may", "might", "must"),
    *("in", "on", "at", "to", "for", "with", "by", "from", "of", "about", "as", "into", "during"),
    *("while", "after", "before", "since", "than", "like", "through", "over", "under", "out"),
    *("between", "among", "up", "and", "or", "nor", "but", "both", "either", "neither", "that"),
    *("i", "you", "he", "she", "it", "we", "they", "me", "him", "us", "them", "not"),
}
_DETERMINERS = {
    *("a", "an", "the", "his", "her", "their", "its", "my", "our", "your", "this", "these"),
    *("those", "some", "any"),
}
# "both X and Y": meaningless once X stands alone.
_PAIRED = re.compile(r"\b(?:both|either|neither)\b", re.IGNORECASE)
_WORD = re.compile(r"\w[\w'.-]*")


def _words(text: str) -> list[tuple[int, int, str]]:
    """Each word's span and lowercased form (a trailing full stop dropped, initials kept)."""
    out = []
    for m in _WORD.finditer(text):
        end = m.end()
        if text[m.start() : end].endswith(".") and end - m.start() > 2:
            end -= 1
        out.append((m.start(), end, text[m.start() : end].lower()))
    return out


def _content(text: str) -> bool:
    """Whether `text` holds a word that is not a closed-class one."""
    return any(w not in _CLOSED | _DETERMINERS for _, _, w in _words(text))


def decompose(question: str) -> list[str]:
    """The parts of a question that coordinates things, each asked on its own: "What have X and
    Y both painted?" → "What have X painted?", "What have Y painted?" (lists "A, B and C" too);
    two questions joined ("What … and how many …?") → each clause. A conjunct runs from the
    conjunction to the nearest punctuation or closed-class word (auxiliary, preposition,
    pronoun), a determiner before it included, and all conjuncts take as many words as the
    shorter side has, the usual balance of a coordination. [] when there is nothing to split."""
    words = _words(question)
    for c, (start, _end, word) in enumerate(words):
        if word not in ("and", "or") or c == 0 or c + 1 == len(words):
            continue
        if words[c + 1][2] in _WH:  # two questions in one
            parts = [question[:start].rstrip(" ,;") + "?", question[words[c + 1][0] :]]
            parts = [p[0].upper() + p[1:] for p in parts if _content(p)]
            return parts if len(parts) == 2 else []
        spans = _conjuncts(question, words, c)
        if len(spans) < 2:
            continue
        prefix = _PAIRED.sub("", question[: spans[0][0]])
        suffix = _PAIRED.sub("", question[spans[-1][1] :])
        return [" ".join((prefix + question[a:b] + suffix).split()) for a, b in spans]
    return []


def _gap(question: str, words: list[tuple[int, int, str]], i: int) -> str:
    """The text between word `i - 1` and word `i`."""
    return question[words[i - 1][1] : words[i][0]]


def _punctuated(gap: str) -> bool:
    return any(ch in gap for ch in ',;:?!.()"')


def _conjuncts(question: str, words: list[tuple[int, int, str]], c: int) -> list[tuple[int, int]]:
    """The character spans of the conjuncts around the conjunction at word `c`, left to right."""
    # Right: an optional determiner, then content words up to punctuation or a closed word.
    j = c + 1
    first = j + (words[j][2] in _DETERMINERS)
    k = first
    while k < len(words) and words[k][2] not in _CLOSED | _DETERMINERS:
        if k > first and _punctuated(_gap(question, words, k)):
            break
        k += 1
    right_len = k - first

    def left_run(end: int) -> tuple[int, int]:
        """(content words, determiner start) of the run ending at word `end`, leftwards."""
        i = end
        while i >= 0 and words[i][2] not in _CLOSED | _DETERMINERS:
            if i < end and _punctuated(_gap(question, words, i + 1)):
                break
            i -= 1
        return end - i, i

    left_len, _ = left_run(c - 1)
    n = min(left_len, right_len)
    if n == 0:
        return []
    spans = [(words[j][0], words[first + n - 1][1])]  # (with its determiner)
    end, size = c - 1, n
    while True:
        run, at = left_run(end)
        if run == 0:
            break
        lo = end - min(run, size) + 1
        with_det = size >= run and at >= 0 and words[at][2] in _DETERMINERS
        spans.append((words[at if with_det else lo][0], words[end][1]))
        before = (at if with_det else lo) - 1
        # A list goes on leftwards past a comma ("A, B and C").
        if before < 0 or "," not in _gap(question, words, before + 1):
            break
        end, size = before, max(n, run)  # an earlier list item: as long as it runs
    spans.reverse()
    return spans


def interleave(rankings: Sequence[Sequence[Hit]]) -> list[Hit]:
    """One ranking from several: first the first hit of each, then the second of each, …, each
    memory once, at its best place, with the best relevance any ranking gave it."""
    best: dict[str, float] = {}
    for ranking in rankings:
        for h in ranking:
            best[h.memory.id] = max(best.get(h.memory.id, 0.0), h.relevance)
    out: list[Hit] = []
    seen: set[str] = set()
    for row in itertools.zip_longest(*rankings):
        for h in row:
            if h is not None and h.memory.id not in seen:
                seen.add(h.memory.id)
                out.append(dataclasses.replace(h, relevance=best[h.memory.id]))
    return out


# ---- dense-feedback -------------------------------------------------------------------------


class FeedbackEmbedder(EmbedderView):
    """An `Embedder` view whose query vector for a text can be replaced (`feedback`)."""

    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self.replaced: dict[str, npt.NDArray[np.float32]] = {}

    def embed_query(self, query: str | Sequence[str]) -> npt.NDArray[np.float32]:
        items = [query] if isinstance(query, str) else list(query)
        rows = np.stack(
            [self.replaced[t] if t in self.replaced else self.inner.embed_query(t) for t in items]
        )
        out: npt.NDArray[np.float32] = rows[0] if isinstance(query, str) else rows
        return out

    def feedback(self, question: str, corpus: Corpus, hits: Sequence[Hit]) -> None:
        """Replace `question`'s vector by Rocchio's q + β · mean of its top hits' vectors."""
        query = self.inner.embed_query(question)
        top = corpus.positions_of([h.memory.id for h in hits[:FEEDBACK_TURNS]])
        top = top[top >= 0]
        if len(top):
            moved = query + FEEDBACK_BETA * np.asarray(corpus.vectors[top]).mean(axis=0)
            query = (moved / np.linalg.norm(moved)).astype(np.float32)
        self.replaced[question] = query

    def forget(self, question: str) -> None:
        self.replaced.pop(question, None)


def relevance_of(
    question: str, query: npt.NDArray[np.float32], corpus: Corpus, hits: Sequence[Hit]
) -> list[Hit]:
    """`hits` with the relevance `remember` gives for `question`'s own vector `query` (cosine,
    or the mean of cosine and word coverage when higher, as `Retriever._one` computes it)."""
    pos = corpus.positions_of([h.memory.id for h in hits])
    cos = corpus.exact_cosines(query, pos)
    cover = corpus.coverage(question, pos.tolist())
    return [
        dataclasses.replace(h, relevance=calibrated_relevance(float(c), float(w)), cosine=float(c))
        for h, c, w in zip(hits, cos, cover, strict=True)
    ]


def without_names(question: str, names: Sequence[str]) -> str:
    """`question` without any of `names` (a possessive "'s" with it), spaces closed up; the
    question itself when no word is left."""
    if not names:
        return question
    spoken = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    left = " ".join(re.sub(rf"\b(?:{spoken})(?:'s)?\b", " ", question).split())
    return left if re.search(r"\w", left) else question


# ---- word-neighbours ------------------------------------------------------------------------

_LETTERS = re.compile(r"[a-z]{3,}")


class WordNeighbours:
    """The question's words with the conversations' words nearest to each (module doc)."""

    def __init__(self, embedder: Embedder, conversations: Sequence[Conversation]) -> None:
        self._embedder = embedder
        self._skip = (
            _CLOSED
            | _DETERMINERS
            | {
                n
                for c in conversations
                for t in c.turns
                for n in _LETTERS.findall(t.speaker.lower())
            }
        )
        said = {w for c in conversations for t in c.turns for w in _LETTERS.findall(t.text.lower())}
        self._words = sorted(said - self._skip)
        self._stems = [s[0] if s else "" for s in analyze(self._words)]
        self._vectors = embedder.embed_documents(self._words)
        self._index = {w: i for i, w in enumerate(self._words)}

    def __call__(self, question: str) -> str:
        asked = [w for w in _LETTERS.findall(question.lower()) if w not in self._skip]
        stems = {s[0] for s in analyze(asked) if s}
        added: list[str] = []
        for word in dict.fromkeys(asked):
            at = self._index.get(word)
            vector = self._vectors[at] if at is not None else self._embedder.embed_query(word)
            cosines = self._vectors @ vector
            taken = 0
            for j in np.argsort(-cosines):
                if cosines[j] < NEIGHBOUR_COSINE or taken == NEIGHBOURS:
                    break
                if self._stems[j] and self._stems[j] not in stems:
                    stems.add(self._stems[j])
                    added.append(self._words[j])
                    taken += 1
        return " ".join([question, question, *added])
