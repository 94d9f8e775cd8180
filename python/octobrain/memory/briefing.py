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
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

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
from octobrain.models import Memory, MemoryType, RelationshipType, State, utcnow
from octobrain.store.memories import visible_scopes

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
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 50:
        from octobrain.errors import InvalidInput

        raise InvalidInput("max_tokens", f"must be an integer >= 50, got {budget!r}")
    now = now or utcnow()
    count = count_tokens or token_counter(brain.embedder.model_id)
    corpus = brain.retriever.corpus
    corpus.refresh()
    pools, considered = _candidates(brain, now)
    collapsed = _collapse(pools, brain, cfg.duplicate_threshold)
    briefing = Briefing(brain.scope, now, budget, [], considered)
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


def _candidates(brain: Brain, now: datetime) -> tuple[dict[str, list[BriefItem]], int]:
    cfg, mcfg = brain.config.brief, brain.config.memory
    corpus = brain.retriever.corpus
    # The scope's searchable rows by the mirror's masks, made into memories in one batch (one
    # at a time, each was an Arrow call: seconds at 10k memories).
    visible = np.flatnonzero(corpus.allowed(sorted(visible_scopes(brain.scope))))
    live = [m for m in corpus.memories_at(visible.tolist()) if m.state is State.WORKING]
    by_id = {m.id: m for m in live}
    superseded: set[str] = set()
    outranked: list[tuple[Memory, str]] = []
    closed_by: dict[str, Memory] = {}
    findings: dict[str, int] = {}
    for rel in corpus.edges(list(by_id)):
        source = by_id.get(rel.source_id)
        if source is None:
            continue
        if rel.relationship_type is RelationshipType.SUPERSEDES:
            superseded.add(rel.target_id)
        elif rel.relationship_type is RelationshipType.CONFLICTS:
            outranked.append((source, rel.target_id))
        elif rel.relationship_type is RelationshipType.CLOSES:
            if rel.target_id not in closed_by or closed_by[rel.target_id].created_at < (
                source.created_at
            ):
                closed_by[rel.target_id] = source
        elif rel.relationship_type is RelationshipType.ACHIEVES:
            findings[rel.target_id] = findings.get(rel.target_id, 0) + 1
    # The other value of a conflict is not "what is true" either (same rule as `remember`).
    superseded |= {
        target
        for source, target in outranked
        if target in by_id
        and conflicts.holds(source, by_id[target], winner_superseded=source.id in superseded)
    }
    memories = [m for m in live if m.id not in superseded]
    if not memories:
        return {key: [] for key in SECTION_TITLES}, 0
    strength = decay.memory_strength(memories, now, mcfg)
    closers = {m.id for m in closed_by.values()}
    pools: dict[str, list[BriefItem]] = {key: [] for key in SECTION_TITLES}
    for memory, s in zip(memories, strength, strict=True):
        s = float(s)
        age = max(0.0, (now - memory.created_at).total_seconds() / 86400.0)
        score = s * memory.source.trust
        if memory.scope == "" and brain.scope != "":
            score *= GLOBAL_FACTOR if memory.memory_type is not MemoryType.USER_PREFERENCE else 1.0
        item = BriefItem(memory, "", score, s, "")
        if memory.memory_type is MemoryType.USER_PREFERENCE:
            item.section = "preferences"
        elif memory.memory_type is MemoryType.GOAL:
            closer = closed_by.get(memory.id)
            if closer is None:
                item.status = "open"
                n = findings.get(memory.id, 0)
                item.detail = f"{n} finding{'s' * (n != 1)} so far" if n else ""
            else:
                closed_age = (now - closer.created_at).total_seconds() / 86400.0
                if closed_age > cfg.achieved_days:
                    continue
                item.status = "achieved"
                item.detail = f"achieved {closer.created_at:%Y-%m-%d}: {closer.title}"
                item.score = 1.0 + math.exp(-closed_age / cfg.achieved_days)  # after open ones
            item.section = "goals"
        elif memory.id in closers:
            continue  # shown as its goal's "achieved" line
        elif memory.memory_type in TRUTH_TYPES and DIGEST_TAG not in memory.tags:
            item.section = "project"
        elif age <= cfg.recent_days:
            item.section = "recent"
            item.score = score * math.exp(-age / cfg.recent_days)
        else:
            continue
        pools[item.section].append(item)
    for key, items in pools.items():
        if key == "goals":  # open goals first (by strength), then achieved (newest first)
            items.sort(key=lambda i: (i.status != "open", -i.score, i.memory.id))
        else:
            items.sort(key=lambda i: (-i.score, i.memory.id))
        del items[3 * cfg.max_items_per_section :]
        for item in items:  # only the kept few are summarised: the text costs, the rank does not
            item.text = gist_for(item.memory, item.strength, now, cfg)
            item.gist = bool(item.text)
            if not item.gist:
                item.text = compress(item.memory.content, ITEM_CHARS)
    return pools, len(memories)


def _collapse(
    pools: dict[str, list[BriefItem]], brain: Brain, threshold: float
) -> dict[str, list[BriefItem]]:
    """Drop items whose stored embedding is ≥ `threshold` cosine-similar to a stronger one
    (in any section), recording them on the survivor."""
    corpus = brain.retriever.corpus
    ranked = sorted(
        (i for items in pools.values() for i in items), key=lambda i: (-i.score, i.memory.id)
    )
    kept: list[BriefItem] = []
    kept_vectors: list[np.ndarray] = []
    dropped: set[str] = set()
    for item in ranked:
        vector = corpus.vectors[[corpus.pos_of[item.memory.id]]][0]
        if kept_vectors and item.section != "goals":
            sims = np.stack(kept_vectors) @ vector
            best = int(np.argmax(sims))
            if float(sims[best]) >= threshold and kept[best].section != "goals":
                kept[best].merged.append(item.memory.id)
                dropped.add(item.memory.id)
                continue
        kept.append(item)
        kept_vectors.append(vector)
    return {k: [i for i in items if i.memory.id not in dropped] for k, items in pools.items()}


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
