"""The session briefing: what an agent should know when a session starts, within a token budget.

Four sections, in this order: how the user likes to work (`user_preference` memories, global
and this project's), what is true about this project (decisions, architecture and other lasting
facts), goals (open ones, and those achieved lately with what closed them), and what happened
recently that still matters. Candidates are the visible `working` memories — consolidated
members are represented by their parent, archived ones have faded out, and a memory that another
`supersedes`, or that a `conflicts` edge outranks (module `conflicts`), is left out. Each is
ranked by its decayed importance (importance × time since last access, reinforced by use) ×
trust, near-duplicates (cosine ≥ `brief.duplicate_threshold` on the
stored embeddings) collapse into the strongest, and items are added while the Markdown fits
`max_tokens` counted with the embedder's tokenizer. No model writes anything: item texts are
extractive (central sentences, or a faded episode's gist).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from octobrain.config import BRIEF_TOKENS
from octobrain.embed.tokens import TokenCounter, token_counter
from octobrain.kernels import decay
from octobrain.memory import conflicts
from octobrain.memory.gist import DIGEST_TAG, compress, gist_for
from octobrain.memory.render_brief import (
    SECTION_TITLES,
    briefing_header,
    briefing_markdown,
    item_line,
    section_header,
)
from octobrain.memory.summary import Claims, claims
from octobrain.models import Memory, MemoryType, RelationshipType, Source, State
from octobrain.times import EPOCH, utcnow

if TYPE_CHECKING:
    from octobrain.memory.brain import Brain

__all__ = ["SECTION_TITLES", "BriefItem", "BriefSection", "Briefing", "build_briefing"]

TRUTH_TYPES = frozenset(
    {
        MemoryType.DECISION,
        MemoryType.ARCHITECTURE,
        MemoryType.REQUIREMENT,
        MemoryType.DESIGN,
        MemoryType.CONFIGURATION,
        MemoryType.SECURITY,
        MemoryType.LEARNING,
        MemoryType.INSIGHT,
        MemoryType.PERFORMANCE,
        MemoryType.INTEGRATION,
    }
)
# First-pass share of the budget per section; what a section leaves unused, later ones get.
_SHARES = {"preferences": 0.25, "project": 0.35, "goals": 0.2, "recent": 0.2}
ITEM_CHARS = 280  # longest item text (extractive) before the title
GLOBAL_FACTOR = 0.8  # global truths rank a little below this project's own


@dataclass
class BriefItem:
    """One line of a briefing."""

    memory: Memory
    section: str
    score: float
    strength: float  # decayed importance
    text: str  # what is shown: central sentences, or the gist of a faded episode
    gist: bool = False
    status: str = ""  # goals: "open" | "achieved"
    detail: str = ""  # goals: findings so far, or what closed it
    merged: list[str] = field(default_factory=list)  # ids of near-duplicates collapsed into it


@dataclass
class BriefSection:
    """A titled group of items."""

    key: str
    title: str
    items: list[BriefItem]


@dataclass
class Briefing:
    """What `octobrain brief`, the SessionStart hook and the MCP prompt show."""

    scope: str
    generated_at: datetime
    max_tokens: int
    sections: list[BriefSection]
    candidates: int  # memories considered
    tokens: int = 0  # tokens of the Markdown rendering
    pooled: int = 0  # of them, those a section would show were the budget no bound

    @property
    def items(self) -> list[BriefItem]:
        """Every item, in display order."""
        return [item for section in self.sections for item in section.items]


def build_briefing(
    brain: Brain,
    *,
    max_tokens: int | None = None,
    now: datetime | None = None,
    count_tokens: TokenCounter | None = None,
) -> Briefing:
    """The briefing for `brain`'s scope (reads the mirror; records no access)."""
    cfg = brain.config.brief
    budget = cfg.max_tokens if max_tokens is None else max_tokens
    low, high = BRIEF_TOKENS  # (the setting's bounds too: 60 was refused there, not here)
    if isinstance(budget, bool) or not isinstance(budget, int) or not low <= budget <= high:
        from octobrain.errors import InvalidInput, as_json

        # (no upper bound was checked: `--max-tokens 100000000`, or an MCP client's, passed)
        raise InvalidInput(
            "max_tokens", f"must be an integer in [{low}, {high}], got {as_json(budget)}"
        )
    now = now or utcnow()
    count = count_tokens or token_counter(brain.embedder.model_id)
    # (the snapshot is read lazily: damage found as read is never served, the store is)
    pools, considered, collapsed = brain.retriever.corpus.read_or_rebuild(
        lambda: _ranked(brain, now)
    )
    pooled = sum(len(items) for items in pools.values())
    briefing = Briefing(brain.scope, now, budget, [], considered, pooled=pooled)
    chosen = _fit(collapsed, briefing, cfg.max_items_per_section, count)
    briefing.sections = [
        BriefSection(key, SECTION_TITLES[key], items) for key, items in chosen.items() if items
    ]
    # The per-line sum bounds the whole text's count; trim from the end if a tokenizer disagrees.
    while True:
        briefing.tokens = count(briefing_markdown(briefing))
        if briefing.tokens <= budget or not briefing.items:
            return briefing
        last = briefing.sections[-1]
        last.items.pop()
        if not last.items:
            briefing.sections.pop()


# ---- candidates ----------------------------------------------------------------------------


def _ranked(
    brain: Brain, now: datetime
) -> tuple[dict[str, list[BriefItem]], int, dict[str, list[BriefItem]]]:
    """`_candidates` of the mirror caught up with the store, and those pools `_collapse`d."""
    brain.retriever.corpus.refresh()
    pools, considered = _candidates(brain, now)
    return pools, considered, _collapse(pools, brain, brain.config.brief.duplicate_threshold)


def _candidates(brain: Brain, now: datetime) -> tuple[dict[str, list[BriefItem]], int]:
    """Each section's best 3 x `max_items_per_section` items, and how many memories were
    considered. Every working memory of the scope is ranked from the mirror's columns; only the
    kept items (and the few an edge asks about) are made into memories."""
    cfg, mcfg = brain.config.brief, brain.config.memory
    corpus = brain.retriever.corpus
    if not len(corpus):
        return {key: [] for key in SECTION_TITLES}, 0
    allowed = corpus.allowed(brain.sight)  # over the mirror's positions
    visible = np.flatnonzero(allowed)
    digest = corpus.holding("tags", [DIGEST_TAG])[visible]  # the scope's, as `visible` is
    f = corpus.fields_at(visible)
    working = np.flatnonzero(corpus.coded_in("state", [State.WORKING.value])[visible])
    candidate = np.zeros(len(allowed), dtype=bool)
    candidate[visible[working]] = True

    def in_pool(mid: str) -> bool:
        pos = corpus.pos_of.get(mid)
        return pos is not None and bool(candidate[pos])

    def memory(mid: str) -> Memory:
        return corpus.memory(corpus.pos_of[mid])

    def marked(ids: Iterable[str]) -> npt.NDArray[np.bool_]:  # over the mirror's positions
        at = corpus.positions_of(list(ids))
        mask = np.zeros(len(allowed), dtype=bool)
        mask[at[at >= 0]] = True
        return mask

    superseded: set[str] = set()
    outranked: list[tuple[str, str]] = []
    closed_by: dict[str, Memory] = {}
    findings: dict[str, int] = {}
    kinds = [
        RelationshipType.SUPERSEDES.value,
        RelationshipType.CONFLICTS.value,
        RelationshipType.CLOSES.value,
        RelationshipType.ACHIEVES.value,
    ]
    for source_id, target_id, kind in zip(*corpus.edges_of_kinds(kinds), strict=True):
        if not in_pool(source_id):  # (the edges of memories it does not rank count for none)
            continue
        if kind == RelationshipType.SUPERSEDES.value:
            superseded.add(target_id)
        elif kind == RelationshipType.CONFLICTS.value:
            outranked.append((source_id, target_id))
        elif kind == RelationshipType.CLOSES.value:
            source = memory(source_id)
            if target_id not in closed_by or closed_by[target_id].created_at < source.created_at:
                closed_by[target_id] = source
        else:
            findings[target_id] = findings.get(target_id, 0) + 1
    # The other value of a conflict is not "what is true" either (same rule as `remember`).
    # Their memories made in one read: one at a time, the 1,682 conflicts of a 100,000-memory
    # store took `hook session-start` 0.9 s of CPU.
    pairs = [(source, target) for source, target in outranked if in_pool(target)]
    ids = list(dict.fromkeys(mid for pair in pairs for mid in pair))
    held = dict(zip(ids, corpus.memories_at([corpus.pos_of[mid] for mid in ids]), strict=True))
    superseded |= {
        target
        for source, target in pairs
        if conflicts.holds(held[source], held[target], winner_superseded=source in superseded)
    }
    rows = working
    if superseded:  # (by position: a test of each id took 10 ms at 100,000 memories)
        rows = working[~marked(superseded)[visible[working]]]
    if not len(rows):
        return {key: [] for key in SECTION_TITLES}, 0
    strengths = decay.decayed_importance(
        f["importance"][rows],
        f["last_accessed"][rows] / 10**6,
        f["access_count"][rows],
        now,
        half_life_days=mcfg.decay_half_life_days,
        access_boost_factor=mcfg.access_boost_factor,
        min_importance=mcfg.min_importance_threshold,
        enabled=mcfg.decay_enabled,
    )
    now_us = (now - EPOCH) // timedelta(microseconds=1)  # exact, as `now - created_at`
    age = np.maximum(0.0, (now_us - f["created"][rows]) / 10**6 / 86400.0)
    mirror_at = visible[rows]

    def of_type(*kinds: MemoryType) -> npt.NDArray[np.bool_]:
        return corpus.coded_in("type", [k.value for k in kinds])[mirror_at]

    trust = np.asarray([Source(name).trust for name in f["sources"]], np.float64)
    scores = strengths * trust[f["source"][rows]]
    is_preference = of_type(MemoryType.USER_PREFERENCE)
    if brain.scope != "":
        foreign = corpus.coded_in("scope", [""])[mirror_at] & ~is_preference
        scores = np.where(foreign, scores * GLOBAL_FACTOR, scores)
    closing = marked(m.id for m in closed_by.values())[mirror_at]
    truth = of_type(*TRUTH_TYPES) & ~digest[rows]
    is_goal = of_type(MemoryType.GOAL)
    rest = ~is_preference & ~is_goal & ~closing  # a closer is shown as its goal's "achieved" line
    recent = rest & ~truth & (age <= cfg.recent_days)
    recent_scores = scores * np.exp(-age / cfg.recent_days)
    keep = 3 * cfg.max_items_per_section
    pools: dict[str, list[BriefItem]] = {key: [] for key in SECTION_TITLES}
    # (score, strength, row) per section, best first; a goal's line needs the memory.
    sections = {
        "preferences": (is_preference, scores),
        "project": (rest & truth, scores),
        "recent": (recent, recent_scores),
    }

    # The texts of the rows `vectors` read (one column, no memory), read once a near-duplicate
    # is first compared, all those unread at once: most scans meet none, and reading them with
    # the vectors cost a briefing at 100,000 memories 20 ms of CPU, its content blocks checked.
    texts: dict[int, str] = {}  # by row
    unread: list[int] = []

    def vectors(at: list[int]) -> npt.NDArray[np.float32]:
        unread.extend(at)
        return np.asarray(corpus.vectors[[int(visible[i]) for i in at]], dtype=np.float32)

    def claims_at(row: int) -> Claims:  # asked only of near-duplicates
        if row not in texts:
            read = corpus.take([int(visible[i]) for i in unread], ["content"])[0].to_pylist()
            texts.update(zip(unread, read, strict=True))
            unread.clear()
        return claims(texts[row])

    for key, (member, by) in sections.items():
        chosen = _best(
            f["id"], rows, member, by, strengths, keep, vectors, cfg.duplicate_threshold, claims_at
        )
        made = corpus.memories_at([int(visible[i]) for _, _, i, _ in chosen])
        pools[key] = [
            BriefItem(m, key, sc, s, "", merged=dups)
            for (sc, s, _, dups), m in zip(chosen, made, strict=True)
        ]
    # Goals: open ones by score, then those achieved within `achieved_days`, most recent
    # first; ranked from the columns and the closers, so only the kept ones are made.
    # (The open ones are a mask; only their best `keep` are sorted: one tuple a goal took 15 ms
    # of CPU for the 4,575 goals of a 100,000-memory store.)
    closed = marked(closed_by)[mirror_at]
    opened = np.flatnonzero(is_goal & ~closed)
    if len(opened) > keep:
        floor = np.partition(scores[opened], len(opened) - keep)[len(opened) - keep]
        opened = opened[scores[opened] >= floor]
    goals: list[tuple[bool, float, str, int]] = [  # (achieved, -score, id, k)
        (False, -float(scores[k]), f["id"][rows[k]], k) for k in opened.tolist()
    ]
    for k in np.flatnonzero(is_goal & closed).tolist():
        gid = f["id"][rows[k]]
        closer = closed_by[gid]
        closed_age = (now - closer.created_at).total_seconds() / 86400.0
        if closed_age <= cfg.achieved_days:  # ranked after the open ones
            goals.append((True, -(1.0 + math.exp(-closed_age / cfg.achieved_days)), gid, k))
    goals.sort()
    del goals[keep:]
    made = corpus.memories_at([int(visible[rows[k]]) for *_, k in goals])
    for (achieved, negative, _, k), goal in zip(goals, made, strict=True):
        item = BriefItem(goal, "goals", -negative, float(strengths[k]), "")
        if achieved:
            closer = closed_by[goal.id]
            item.status = "achieved"
            item.detail = f"achieved {closer.created_at:%Y-%m-%d}: {closer.title}"
        else:
            item.status = "open"
            n = findings.get(goal.id, 0)
            item.detail = f"{n} finding{'s' * (n != 1)} so far" if n else ""
        pools["goals"].append(item)
    for items in pools.values():
        for item in items:  # only the kept few are summarised: the text costs, the rank does not
            item.text = gist_for(item.memory, item.strength, now, cfg)
            item.gist = bool(item.text)
            if not item.gist:
                item.text = compress(item.memory.content, ITEM_CHARS)
    return pools, len(rows)


# Rows of one section looked at for its `keep` distinct best: near-duplicates of a better row
# are passed over (one ingest of forty "ok" turns filled the pool and left one item).
SCAN_ROWS = 2_048


def _best(
    ids: list[str],
    rows: npt.NDArray[np.int64],
    member: npt.NDArray[np.bool_],
    score: npt.NDArray[np.float64],
    strength: npt.NDArray[np.float64],
    keep: int,
    vectors: Callable[[list[int]], npt.NDArray[np.float32]],
    threshold: float,
    claims_at: Callable[[int], Claims],
) -> list[tuple[float, float, int, list[str]]]:
    """The `keep` best (score, strength, row, near-duplicate ids) of the rows in `member`, by
    score, ties by id, none `threshold`-similar to a better one stating the same (whose
    duplicates it lists; `summary.same_claims`, by `claims_at` of a row); only the best
    `SCAN_ROWS` are looked at, and only those are sorted."""
    at = np.flatnonzero(member)
    if len(at) > SCAN_ROWS:
        floor = np.partition(score[at], len(at) - SCAN_ROWS)[len(at) - SCAN_ROWS]
        at = at[score[at] >= floor]
    order = sorted(at.tolist(), key=lambda k: (-float(score[k]), ids[int(rows[k])]))
    chosen: list[tuple[float, float, int, list[str]]] = []
    taken: list[int] = []  # places in `order` of the chosen rows
    matrix = np.zeros((0, 0), dtype=np.float32)
    for j, k in enumerate(order):
        if j == len(matrix):  # the vectors of the next rows: those needed if none is a
            # near-duplicate, or if more, as many as read so far (a scattered vector costs the
            # check of its 64 KiB block: 4 x `keep` rows at a time cost 12 ms more at 100,000)
            more = vectors([int(rows[i]) for i in order[j : j + max(keep + 1 - len(chosen), j)]])
            matrix = more if not len(matrix) else np.concatenate([matrix, more])
        if taken:
            row = int(rows[k])

            def restates(i: int, row: int = row) -> bool:
                return claims_at(chosen[i][2]).same_as(claims_at(row))

            survivor = _first_alike(matrix[taken] @ matrix[j], threshold, restates)
            if survivor is not None:
                chosen[survivor][3].append(ids[row])
                continue
        if len(chosen) == keep:
            break
        chosen.append((float(score[k]), float(strength[k]), int(rows[k]), []))
        taken.append(j)
    return chosen


def _collapse(
    pools: dict[str, list[BriefItem]], brain: Brain, threshold: float
) -> dict[str, list[BriefItem]]:
    """Drop items whose stored embedding is ≥ `threshold` cosine-similar to a stronger one
    (in any section) that states the same (`summary.same_claims`: a value changed, or the same
    rule negated, stays its own item), recording them on the survivor."""
    corpus = brain.retriever.corpus
    ranked = sorted(
        (i for items in pools.values() for i in items), key=lambda i: (-i.score, i.memory.id)
    )
    if not ranked:
        return pools
    vectors = corpus.vectors[[corpus.pos_of[item.memory.id] for item in ranked]]  # one read
    kept: list[int] = []  # places in `ranked`
    dropped: set[str] = set()
    for j, item in enumerate(ranked):
        if kept and item.section != "goals":

            def restates(i: int, mine: str = item.memory.content) -> bool:
                theirs = ranked[kept[i]]
                return theirs.section != "goals" and claims(theirs.memory.content).same_as(
                    claims(mine)
                )

            survivor = _first_alike(vectors[kept] @ vectors[j], threshold, restates)
            if survivor is not None:
                ranked[kept[survivor]].merged.append(item.memory.id)
                dropped.add(item.memory.id)
                continue
        kept.append(j)
    return {k: [i for i in items if i.memory.id not in dropped] for k, items in pools.items()}


def _first_alike(sims: np.ndarray, threshold: float, alike: Callable[[int], bool]) -> int | None:
    """The place of the most similar of `sims` ≥ `threshold` that is `alike`, or None."""
    places: list[int] = np.flatnonzero(sims >= threshold).tolist()
    for place in sorted(places, key=lambda i: -float(sims[i])):
        if alike(place):
            return place
    return None


def _fit(
    pools: dict[str, list[BriefItem]],
    briefing: Briefing,
    limit: int,
    count: TokenCounter,
) -> dict[str, list[BriefItem]]:
    """Choose items per section: first up to each section's share of the budget, then fill
    what is left in section order. Costs are per rendered line (plus the section header)."""
    budget = briefing.max_tokens
    used = count(briefing_header(briefing) + "\n")
    chosen: dict[str, list[BriefItem]] = {key: [] for key in SECTION_TITLES}
    spent = dict.fromkeys(SECTION_TITLES, 0)
    for final in (False, True):
        for key, items in pools.items():
            head = count(section_header(key) + "\n")
            taken = {item.memory.id for item in chosen[key]}
            for item in items:
                if item.memory.id in taken or len(chosen[key]) >= limit:
                    continue
                cost = count(item_line(item) + "\n") + (0 if chosen[key] else head)
                share_left = _SHARES[key] * budget - spent[key]
                if used + cost > budget or (not final and cost > share_left):
                    continue
                chosen[key].append(item)
                taken.add(item.memory.id)
                used += cost
                spent[key] += cost
    for key, items in chosen.items():
        order = {item.memory.id: n for n, item in enumerate(pools[key])}
        items.sort(key=lambda i: order[i.memory.id])
    return chosen
