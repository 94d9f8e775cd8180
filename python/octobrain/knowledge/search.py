"""Hybrid search over knowledge chunks: the memory pipeline's legs and fusion, then grouping.

Vector leg (exact cosine over the mirror) and BM25 leg (Rust) over the same visible chunks →
reciprocal-rank or score fusion (Rust) → a calibrated relevance (cosine, or idf-weighted word
coverage averaged with it) must reach the floor → children of one parent collapse into one
result, so a section is never printed twice.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from octobrain.config import Config
from octobrain.hybrid import hybrid_rank
from octobrain.knowledge.index import ChunkIndex
from octobrain.knowledge.results import KnowledgeHit

DISPLAY_CHARS = 2000  # a parent longer than this is shown as its matching chunk instead


@dataclass(frozen=True)
class _Scored:
    pos: int
    fused: float
    relevance: float
    cosine: float
    coverage: float
    legs: str


def search_chunks(
    index: ChunkIndex,
    query: str,
    qvec: npt.NDArray[np.float32],
    allowed: npt.NDArray[np.bool_],
    config: Config,
    *,
    limit: int,
    min_relevance: float,
) -> list[KnowledgeHit]:
    """The best `limit` sections for `query` among `allowed` chunk positions."""
    if not allowed.any():
        return []
    cos_all = index.embeddings @ qvec
    ranking = hybrid_rank(
        query,
        qvec,
        embeddings=index.embeddings,
        cosines=cos_all,
        nearest=lambda vec, k: index.nearest(vec, allowed, k),
        index=index.index,
        allowed=allowed,
        cfg=config.search,
    )
    coverage = index.coverage(query, ranking.ids)
    scored: list[_Scored] = []
    for i, pos in enumerate(ranking.ids):
        cos = float(cos_all[pos])
        # As for memories: exact words are evidence, but never alone beyond their average
        # with the cosine, so one shared common word does not make a chunk "relevant".
        relevance = max(0.0, cos, 0.5 * (cos + float(coverage[i])))
        if relevance < min_relevance:
            continue
        scored.append(
            _Scored(pos, ranking.scores[i], relevance, cos, float(coverage[i]), ranking.legs[pos])
        )
    return _group(index, scored, limit)


def _group(index: ChunkIndex, scored: list[_Scored], limit: int) -> list[KnowledgeHit]:
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
