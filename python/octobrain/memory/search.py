"""The hybrid retrieval pipeline behind `remember`.

Per query: embed → vector candidates from LanceDB (prefiltered by scope/state/type/time) and BM25
candidates from the Rust index over the same visible set → fuse (Rust) → calibrated relevance
(true cosine, or idf-weighted word coverage for exact matches) decides what may be returned →
bounded adjustments (decayed importance, recency, trust) reorder near-ties; a superseded memory
sinks far below its replacement. Several queries: their fused scores, min-max normalised per
query, are summed (Rust).
"""

from __future__ import annotations

import copy
import itertools
import math
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import Enum

import numpy as np
import numpy.typing as npt

from octobrain.config import Config
from octobrain.embed.base import Embedder, ahead, unreadable
from octobrain.kernels import decay
from octobrain.kernels.hybrid import Scored, calibrated_relevance, fuse, hybrid_rank
from octobrain.memory.ann import ann_scored
from octobrain.memory.conversation import SPEAKER_PREFIX
from octobrain.memory.corpus import Corpus
from octobrain.memory.gist import gist_for
from octobrain.memory.orderings import copies_below, rank_below
from octobrain.memory.query import Filters, named_periods
from octobrain.models import (
    Memory,
    RelationshipType,
)
from octobrain.store import MemoryStore
from octobrain.store.sql import Sight

SUPERSEDED_FACTOR = 0.1
LISTED_EDGES = 8  # superseding memories or parents listed per hit (the rest are not needed)
COPIES_LISTED = 3  # copies of a hit's text named in its `Why:` line; more: counted
# this share of that one's score
# A turn said by a person the question names: worth about 0.7 standard deviation of match
# (scores are exp(z - z_best)): on LoCoMo such a question is answered by that person's own
# words 19 times in 20, and ×2 ranked better than ×1.2 on both halves (README). Only memories
# with a `speaker:` tag (ingested turns) can get it.
SPEAKER_FACTOR = 2.0
# The same preference on how well a turn answers: when the person a question names said some
# of the turns found, a turn someone else said shows its relevance divided by it. It stays
# returned (what its words and meaning matched chose it), but the question's best relevance
# is that person's: what they never said is not answered with another's words at full
# relevance (LoCoMo's adversarial questions swap the person: AUC 0.590 -> 0.621, both halves).
OTHER_SPEAKER_RELEVANCE = 1.0 / SPEAKER_FACTOR
# A memory from a day, month or year the question names ("on 3 June, 2023", "in January
# 2022"; its `created_at`: for an ingested turn, when its session was held): it meets a
# constraint the question states, as a turn of the person it names does, and weighs the same.
# On LoCoMo a question naming a date is answered in a session within it 9 times in 10.
PERIOD_FACTOR = SPEAKER_FACTOR
UNKNOWN_COSINE = -2.0  # below any cosine: positions the ANN path did not score


def _same(query: str) -> str:
    return query


class Empty(Enum):
    """What left a `remember` with no results."""

    NONE = ""  # it has results
    NO_MEMORIES = "no_memories"  # none stored in the visible scopes (archived included)
    FILTERS = "filters"  # memories exist, but none meets the types / tags / files / dates
    ARCHIVED = "archived"  # only archived memories match (`include_archived` finds them)
    THRESHOLD = "min_relevance"  # candidates were ranked; none was relevant enough


@dataclass
class Hit:
    """One returned memory and how it was found."""

    memory: Memory
    score: float
    relevance: float
    cosine: float
    why: str
    superseded_by: list[str] = field(default_factory=list)
    consolidated_into: list[str] = field(default_factory=list)
    outranked_by: list[str] = field(default_factory=list)  # found memories stating another value
    gist: str = ""  # a faded episode's compressed text (the full content is still `memory`)
    effective_importance: float | None = None  # stored importance, decayed and access-boosted
    copies: list[str] = field(default_factory=list)  # worse-ranked memories of the same text


class Retriever:
    """Runs queries against one store through its in-process mirror."""

    def __init__(self, store: MemoryStore, corpus: Corpus, embedder: Embedder, config: Config):
        self.store = store
        self.corpus = corpus
        self.embedder = embedder
        self.config = config
        # What the words (BM25) leg is asked for a query: the query itself. `bench locomo
        # --variant word-neighbours` measures it asked with related words added.
        self.words_query: Callable[[str], str] = _same

    def search(
        self,
        queries: Sequence[str],
        sight: Sight,
        filters: Filters,
        *,
        limit: int,
        min_relevance: float,
        now: datetime,
    ) -> list[Hit]:
        """The best `limit` memories `sight` sees for `queries` whose relevance is ≥
        `min_relevance`."""
        return self.corpus.read_or_rebuild(
            lambda: self._search(queries, sight, filters, limit, min_relevance, now)
        )

    def _search(
        self,
        queries: Sequence[str],
        sight: Sight,
        filters: Filters,
        limit: int,
        min_relevance: float,
        now: datetime,
    ) -> list[Hit]:
        # A new process loads the model and embeds the queries while the mirror catches up.
        vectors = ahead(lambda: self.embedder.embed_query(list(queries)))
        self.corpus.refresh()
        allowed = self._allowed(sight, filters)
        if not allowed.any():
            return []
        where = filters.where(sight)
        seen = self.corpus.seen_by(sight)  # what BM25 counts: nothing of another project
        per_query = [
            self._one(q, v, where, allowed, seen) for q, v in zip(queries, vectors(), strict=True)
        ]
        merged = per_query[0] if len(per_query) == 1 else self._merge(per_query)
        kept = [s for s in merged if s.relevance >= min_relevance]
        kept = self._lift_parents(kept, sight, allowed)
        return self._rank(kept, limit, now, queries=queries, sight=sight)

    def _allowed(self, sight: Sight, filters: Filters) -> npt.NDArray[np.bool_]:
        return self.corpus.allowed(
            sight,
            memory_types=[t.value for t in filters.memory_types],
            tags=filters.tags,
            related_files=filters.related_files,
            created_after=filters.created_after,
            created_before=filters.created_before,
            include_archived=filters.include_archived,
        )

    def why_empty(
        self,
        queries: Sequence[str],
        sight: Sight,
        filters: Filters,
        *,
        min_relevance: float,
        now: datetime,
    ) -> Empty:
        """Why `search` with these arguments found nothing; asked only then. Costs one more
        search, for one result, only when archived memories meet the filters and the first
        search left them out."""
        allowed = self._allowed(sight, filters)
        if not filters.include_archived:
            archived = replace(filters, include_archived=True)
            if (self._allowed(sight, archived) & ~allowed).any() and self.search(
                queries, sight, archived, limit=1, min_relevance=min_relevance, now=now
            ):
                return Empty.ARCHIVED
        if allowed.any():
            return Empty.THRESHOLD
        if self._allowed(sight, Filters(include_archived=filters.include_archived)).any():
            return Empty.FILTERS
        # Only archived memories (none relevant, or the search above would have said so).
        held = self._allowed(sight, Filters(include_archived=True)).any()
        return Empty.THRESHOLD if held else Empty.NO_MEMORIES

    # ---- one query ------------------------------------------------------------------------

    def _one(
        self,
        query: str,
        qvec: npt.NDArray[np.float32],
        where: str,
        allowed: npt.NDArray[np.bool_],
        seen: npt.NDArray[np.bool_],
    ) -> list[Scored]:
        cfg = self.config.search
        words = self.words_query(query)
        ties = self.corpus.pos_of.tie_keys()
        if not self._use_ann():
            cos_all = self.corpus.vectors.cosines(qvec)
            ranking = hybrid_rank(
                words,
                qvec,
                embeddings=self.corpus.vectors,
                cosines=cos_all,
                nearest=lambda vec, k: self.corpus.nearest(vec, allowed, k),
                index=self.corpus.index,
                allowed=allowed,
                cfg=cfg,
                seen=seen,
                ties=ties,
            )
        else:
            # Only the candidates' cosines are computed: the index proposes the vector leg's,
            # the BM25 leg its own; every other position stays below any real cosine.
            cos_all = np.full(self.corpus.position_count, UNKNOWN_COSINE, dtype=np.float32)

            def scored(positions: list[int]) -> list[int]:
                at = np.asarray(positions, dtype=np.int64)
                cos_all[at] = self.corpus.exact_cosines(qvec, at)
                return positions

            near, near_cos = ann_scored(
                self.store, self.corpus, qvec, where, cfg.candidates, allowed
            )
            cos_all[near] = near_cos  # (already exact: not read again)
            bm25 = self.corpus.index.search(
                words, cfg.candidates, allowed=allowed, seen=seen, ties=ties
            )
            first = near.tolist() if cfg.vector_weight > 0 else []
            bm25_pos = bm25[0][cos_all[bm25[0]] == UNKNOWN_COSINE]
            scored(bm25_pos.tolist())
            ranking = hybrid_rank(
                words,
                qvec,
                embeddings=self.corpus.vectors,
                cosines=cos_all,
                nearest=lambda vec, k: scored(self._ann(vec, where, k, allowed)),
                index=self.corpus.index,
                allowed=allowed,
                cfg=cfg,
                vector_first=first,
                bm25_hits=bm25,
                seen=seen,
                ties=ties,
            )
        coverage = self.corpus.coverage(query, ranking.ids, seen)
        # A query the model cannot read (emoji, Thai, Amharic: [UNK] pieces) has a vector that
        # says nothing of it, so its cosines are no evidence: an emoji question was answered
        # with a Japanese note at relevance 0.41. Its words alone count, at half weight.
        blind = unreadable(self.embedder, query)
        out = []
        for i, pos in enumerate(ranking.ids):
            cos, covered = float(cos_all[pos]), float(coverage[i])
            relevant = calibrated_relevance(0.0 if blind else cos, covered)
            out.append(Scored(pos, ranking.scores[i], relevant, cos, covered, ranking.legs[pos]))
        return out

    def _use_ann(self) -> bool:
        """Whether the first vector pass goes to LanceDB's ANN index: from `ann_min_rows`
        rows an exact scan of the mirror's vectors would touch every one of them per query."""
        return len(self.corpus) >= self.config.search.ann_min_rows > 0

    def _ann(
        self, vector: npt.NDArray[np.float32], where: str, want: int, allowed: npt.NDArray[np.bool_]
    ) -> list[int]:
        """Top-`want` allowed positions: the ANN index's `ANN_REFINE`×`want` nearest
        (prefiltered by `where`), re-ranked by their exact cosines to `vector`."""
        return [
            int(p) for p in ann_scored(self.store, self.corpus, vector, where, want, allowed)[0]
        ]

    # ---- several queries, adjustments -----------------------------------------------------

    def _merge(self, per_query: list[list[Scored]]) -> list[Scored]:
        best: dict[int, Scored] = {}
        for scored in per_query:
            for s in scored:
                if s.pos not in best or s.relevance > best[s.pos].relevance:
                    best[s.pos] = s
        # By score, not rank: RRF summed ranks, so what every query found at middling ranks
        # came before each query's best (two questions asked at once: Recall@10 of each
        # 0.29 / 0.31 on LoCoMo, 0.73 / 0.79 on SciFact, against 0.68 / 0.65 and 0.82 / 0.85
        # so; `benches/multi_query.py`, README).
        lists = [scored for scored in per_query if scored]
        fused = fuse(
            [[s.pos for s in scored] for scored in lists],
            [[s.fused for s in scored] for scored in lists],
            method="minmax",
            ties=self.corpus.pos_of.tie_keys(),
        )
        top = max(fused.scores) if fused.scores else 1.0
        out = []
        for pos, score in zip(fused.ids, fused.scores, strict=True):
            s = best[pos]
            out.append(Scored(s.pos, score / top, s.relevance, s.cosine, s.coverage, s.legs))
        return out

    def _lift_parents(
        self, kept: list[Scored], sight: Sight, allowed: npt.NDArray[np.bool_]
    ) -> list[Scored]:
        """A consolidation parent matches at least as well as its best-matching member found.

        A sleep parent's text keeps each distinct fact once, in its most central member's
        wording; the member whose wording happened to match the query was absorbed into it. So
        the parent takes that member's match (and is added if the query missed it, when the
        filters allow it); the member itself is then ranked below the parent as before. Without
        this, consolidating a fact's restatements made the fact harder to find."""
        ids = [m.id for m in self.corpus.memories_at([s.pos for s in kept])]
        _, parents, _ = self._edges_in(ids, sight)
        best = {s.pos: s for s in kept}
        for s, mid in zip(kept, ids, strict=True):
            for pid in parents.get(mid, []):
                pos = self.corpus.pos_of.get(pid)
                if pos is None or not allowed[pos]:
                    continue
                have = best.get(pos)
                if have is None or have.fused < s.fused:
                    legs = f"{s.legs} via consolidated member"
                    best[pos] = Scored(pos, s.fused, s.relevance, s.cosine, s.coverage, legs)
        return list(best.values())

    def _rank(
        self,
        kept: list[Scored],
        limit: int,
        now: datetime,
        queries: Sequence[str],
        sight: Sight,
    ) -> list[Hit]:
        if not kept:
            return []
        mems = self.corpus.memories_at([s.pos for s in kept])
        mcfg, scfg = self.config.memory, self.config.search
        importance = decay.memory_strength(mems, now, mcfg)
        superseded, parents, conflicting = self._edges_in([m.id for m in mems], sight)
        named = _named_speakers(queries)
        periods = named_periods(queries)
        # The question names a speaker of the found turns: a turn someone else said may be on
        # topic but is not that person's word (LoCoMo's adversarial questions swap the person).
        asks_about = bool(named) and any(named.intersection(m.tags) for m in mems)
        # Each candidate's score is needed to rank it; its `Why:` line only if it is returned.
        rows: list[tuple[Hit, Scored, float, str]] = []  # hit, its match, age (days), notes
        for s, m, imp in zip(kept, mems, importance, strict=True):
            age_days = max(0.0, (now - m.created_at).total_seconds() / 86400.0)
            recency = math.exp(-age_days / scfg.recency_decay_days)
            # Bounded multipliers around 1: they reorder near-ties, never relevance tiers.
            f_imp = 1.0 + scfg.importance_weight * (float(imp) - 0.5)
            f_rec = 1.0 + scfg.recency_weight * (recency - 0.5)
            f_trust = 1.0 - 0.5 * (1.0 - m.source.trust)
            f_sup = SUPERSEDED_FACTOR if superseded.get(m.id) else 1.0
            f_who = SPEAKER_FACTOR if named and named.intersection(m.tags) else 1.0
            by_other = (
                f_who == 1.0 and asks_about and any(t.startswith(SPEAKER_PREFIX) for t in m.tags)
            )
            in_period = bool(periods) and any(p.holds(m.created_at) for p in periods)
            f_when = PERIOD_FACTOR if in_period else 1.0
            score = s.fused * f_imp * f_rec * f_trust * f_sup * f_who * f_when
            notes = "; superseded" if f_sup != 1.0 else ""
            if f_who != 1.0:
                notes += "; said by the person the question names"
            elif by_other:
                notes += (
                    f"; said by someone else than the person the question names (relevance "
                    f"{s.relevance:.2f} matched, x{OTHER_SPEAKER_RELEVANCE:g})"
                )
            if in_period:
                notes += "; from the date the question names"
            relevance = s.relevance * (OTHER_SPEAKER_RELEVANCE if by_other else 1.0)
            hit = Hit(m, score, relevance, s.cosine, "", superseded.get(m.id, []))
            hit.consolidated_into = parents.get(m.id, [])
            hit.effective_importance = float(imp)
            rows.append((hit, s, age_days, notes))
        rank_below([row[0] for row in rows], conflicting, queries)
        rows.sort(key=lambda row: (-row[0].score, -row[0].relevance, row[0].memory.id))
        copies = copies_below([row[0] for row in rows])
        rows = [row for place, row in enumerate(rows) if place not in copies]
        legs = f"{len(queries)} queries (scores summed); " if len(queries) > 1 else ""
        hits = []
        for hit, s, age_days, notes in rows[:limit]:
            m, strength = hit.memory, hit.effective_importance or 0.0  # (set for every hit)
            hit.why = (
                f"{legs}found by {s.legs}; relevance {hit.relevance:.2f} "
                f"(cosine {s.cosine:.2f}, words {s.coverage:.0%}); "
                f"effective importance {strength:.2f} (stored {m.importance:.2f}), "
                f"age {age_days:.0f} d{notes}"
            )
            if hit.consolidated_into:
                hit.why += f"; consolidated into {', '.join(hit.consolidated_into)}"
            if hit.outranked_by:
                hit.why += f"; {', '.join(hit.outranked_by)} states another value and prevails"
            if hit.copies:
                more = len(hit.copies) - COPIES_LISTED
                listed = ", ".join(hit.copies[:COPIES_LISTED]) + (f" and {more} more" * (more > 0))
                hit.why += f"; the same text is stored again as {listed}"
            # A copy: the mirror's objects change in place as accesses are recorded.
            hit.memory = copy.copy(m)
            hit.gist = gist_for(hit.memory, strength, now, self.config.brief)
            hits.append(hit)
        return hits

    def _edges_in(
        self, ids: Sequence[str], sight: Sight
    ) -> tuple[dict[str, list[str]], dict[str, list[str]], dict[str, list[str]]]:
        """For each id, the live memories `sight` sees that supersede it and those it
        was consolidated into (at most `LISTED_EDGES` of each: a memory many others supersede
        is superseded, and one is enough to say by what), and those among `ids` that
        `conflict` with it (one lookup for all three)."""
        superseded: dict[str, list[str]] = {}
        parents: dict[str, list[str]] = {}
        conflicting: dict[str, list[str]] = {}
        kinds = {
            RelationshipType.SUPERSEDES.value: superseded,
            RelationshipType.CONSOLIDATED_FROM.value: parents,
            RelationshipType.CONFLICTS.value: conflicting,
        }
        sources, targets, types = self.corpus.edges_into(ids, list(kinds))
        if not sources:
            return superseded, parents, conflicting
        # The sources' scopes from the mirror's columns at once: building each source's row
        # cost a hub with many incoming edges seconds per query.
        seen = self.corpus.in_sight(self.corpus.positions_of(sources), sight).tolist()
        among = set(ids)
        conflicts_kind = RelationshipType.CONFLICTS.value
        for source, target, kind, visible in zip(sources, targets, types, seen, strict=True):
            if not visible:
                continue
            if kind == conflicts_kind:
                if source in among:  # a conflict orders two found memories: both are found
                    conflicting.setdefault(target, []).append(source)
                continue
            listed = kinds[kind].setdefault(target, [])
            if len(listed) < LISTED_EDGES:
                listed.append(source)
        return superseded, parents, conflicting


def _named_speakers(queries: Sequence[str]) -> set[str]:
    """The speaker tags (`speaker:<name>`, as ingest writes them) of every one- or two-word
    name in the queries: a question about what a person said prefers that person's turns."""
    # In NFC, as names are stored (a decomposed "José" splits at its accent: "jose"), and each
    # name also decomposed, as stores written before names were in NFC may tag it.
    words = re.findall(r"\w+", unicodedata.normalize("NFC", " ".join(queries)).lower())
    pairs = [f"{a}-{b}" for a, b in itertools.pairwise(words)]
    named = [SPEAKER_PREFIX + w for w in (*words, *pairs)]
    return {*named, *(unicodedata.normalize("NFD", tag) for tag in named)}
