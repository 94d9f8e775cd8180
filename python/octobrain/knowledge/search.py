"""Hybrid search over knowledge sections: the memory pipeline's legs and fusion, per section.

The unit ranked is the section a hit prints (a parent, or a chunk without one; see
`knowledge.sections`): vector leg = its best chunk's cosine (MaxP over chunks sized for the
model), BM25 leg (Rust) = over its whole text → reciprocal-rank or score fusion (Rust) → a
calibrated relevance (cosine, or idf-weighted word coverage averaged with it) must reach the
floor. The hit shows the parent, or its best chunk when the parent is too long to print.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from octobrain.config import Config
from octobrain.kernels.hybrid import (
    Scored,
    calibrated_relevance,
    cosines,
    exact_top,
    hybrid_rank,
)
from octobrain.knowledge.index import ChunkIndex
from octobrain.knowledge.results import KnowledgeHit
from octobrain.store.schema import CHUNKS, check_knowledge

DISPLAY_CHARS = 2000  # a parent longer than this is shown as its matching chunk instead


def search_chunks(
    index: ChunkIndex,
    query: str,
    qvec: npt.NDArray[np.float32],
    allowed: npt.NDArray[np.bool_],
    config: Config,
    *,
    limit: int,
    min_relevance: float,
    seen: npt.NDArray[np.bool_] | None = None,
) -> list[KnowledgeHit]:
    """The best `limit` sections for `query` among `allowed` chunk positions; BM25 weighs
    words by their rarity among the sections of the `seen` chunk positions (every one when
    None): what the asker may see, however many other sources `allowed` leaves out."""
    if not allowed.any():
        return []
    sections = index.sections
    view = sections.scores(cosines(index.embeddings, qvec), allowed)
    counted = None if seen is None else sections.holding(seen)
    # Section vectors (each section's best chunk) only feed the HyDE centroid.
    vectors = index.embeddings[view.best] if config.search.hyde.enabled else index.embeddings
    ranking = hybrid_rank(
        query,
        qvec,
        embeddings=vectors,
        cosines=view.cosine,
        nearest=lambda vec, k: exact_top(
            sections.scores(cosines(index.embeddings, vec), allowed).cosine,
            view.allowed,
            k,
        ),
        index=sections.index,
        allowed=view.allowed,
        cfg=config.search,
        seen=counted,
    )
    coverage = sections.coverage(query, ranking.ids, counted)
    scored: list[Scored] = []
    for i, pos in enumerate(ranking.ids):
        cos, covered = float(view.cosine[pos]), float(coverage[i])
        if (relevant := calibrated_relevance(cos, covered)) < min_relevance:  # (as for memories)
            continue
        best = int(view.best[pos])
        scored.append(Scored(best, ranking.scores[i], relevant, cos, covered, ranking.legs[pos]))
    return _group(index, scored, limit)


def _group(index: ChunkIndex, scored: list[Scored], limit: int) -> list[KnowledgeHit]:
    """One hit per parent section (or per chunk without a parent), in fused order."""
    hits: list[KnowledgeHit] = []
    seen: dict[tuple[str, str], int] = {}
    for s in scored:
        row = index.row(s.pos)
        parent = row["parent_content"]
        key = (row["source_id"], parent or row["id"])
        if key in seen:
            continue
        seen[key] = len(hits)
        check_knowledge(row, CHUNKS)  # never a changed text shown as the document's
        # `content` is "header\n\nbody"; the header is printed from section_path instead.
        shown = (
            parent
            if parent and len(parent) <= DISPLAY_CHARS
            else row["content"].partition("\n\n")[2]
        )
        hits.append(
            KnowledgeHit(
                uri=row["uri"],
                title=row["title"],
                section_path=tuple(row["section_path"] or ()),
                text=shown,
                relevance=s.relevance,
                score=s.fused,
                session=bool(row["session_id"]),
                scope=row["scope"],
                why=(
                    f"found by {s.legs}; relevance {s.relevance:.2f} "
                    f"(cosine {s.cosine:.2f}, words {s.coverage:.0%})"
                ),
            )
        )
        if len(hits) >= limit:
            break
    return hits
