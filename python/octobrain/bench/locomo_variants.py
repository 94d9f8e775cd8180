"""`bench locomo --variant`: mechanisms for session Recall@5 measured against the shipped path.

Both re-rank the turns `remember` returned (the first `DEPTH`), outside the product, adding one
more leg's evidence to each turn's fused score: `log(score) + LEG_WEIGHT · z`, where `z` is the
turn's standardised score on that leg among the returned turns (the fused score is
`exp(z_fused - z_best)`, so its log is on the same scale). `LEG_WEIGHT` = 0.5 is what one leg
weighs in the product's two-leg z-score fusion.

- `session-words`: BM25 of the question against one document per session (all the session's
  turns' words, photo captions included), so a session that talks about the topic throughout
  ranks up even when no single turn of it matches well;
- `window-vector`: the cosine of the question to the turn embedded with its context (speaker,
  session and date, the turn before and after: `Memory.searchable_text`), a second dense leg
  beside the turn's own vector. Relevance stays the turn's own cosine either way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from octobrain.embed.base import Embedder
from octobrain.kernels.bm25 import BM25Index
from octobrain.memory.conversation import Conversation
from octobrain.memory.search import Hit

__all__ = ["LEG_WEIGHT", "VARIANTS", "SessionWords", "WindowVectors", "rerank"]

VARIANTS = ("session-words", "window-vector")
LEG_WEIGHT = 0.5


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
