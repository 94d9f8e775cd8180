"""Markdown and JSON renderings of a briefing (CLI, SessionStart hook, MCP prompt/resource)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from octobrain.models import Source
from octobrain.safe_text import one_line
from octobrain.times import iso_z

if TYPE_CHECKING:
    from octobrain.memory.briefing import Briefing, BriefItem

__all__ = [
    "SECTION_TITLES",
    "briefing_header",
    "briefing_markdown",
    "briefing_to_dict",
    "item_line",
]

SECTION_TITLES = {
    "preferences": "How the user likes to work",
    "project": "What is true about this project",
    "goals": "Goals",
    "recent": "Recently, still relevant",
}

EMPTY = "_No memories to brief on yet for this scope._"

# What looks like the start of a markup element (`<system-reminder>`, `</instructions>`,
# `<!--`): a stored memory's text goes into the model's context, where such a tag in it could
# close or open the client's own blocks. Its `<` is written `&lt;`, which reads the same.
_TAG_START = re.compile(r"<(?=/?[A-Za-z!?])")


def briefing_header(briefing: Briefing) -> str:
    """The first line: what the briefing is about."""
    return f"# Memory briefing: {briefing.scope or '(global)'}"


def section_header(key: str) -> str:
    """A section's heading (preceded by a blank line)."""
    return f"\n## {SECTION_TITLES[key]}"


def item_line(item: BriefItem) -> str:
    """One item as a Markdown bullet: status, title, text, and the short id to look it up."""
    m = item.memory
    box = {"open": "[ ] ", "achieved": "[x] "}.get(item.status, "")
    label = "" if m.source is Source.USER_CONFIRMED else f" {m.source.label}"
    facets = [m.memory_type.value] if item.section in ("project", "recent") else []
    if item.section == "recent":
        facets.append(f"{m.created_at:%Y-%m-%d}")
    if m.scope == "" and item.section != "preferences":
        facets.append("global")
    if item.gist:
        facets.append("gist")
    if item.merged:
        facets.append(f"+{len(item.merged)} similar")
    facets.append(f"id {m.id[:8]}")
    text = item.detail if item.status else item.text
    if item.status == "open" and not text:
        text = item.text
    title, said = _inert(one_line(m.title)), _inert(one_line(text))
    return f"- {box}**{title}**{label} — {said} _({', '.join(facets)})_"


def _inert(text: str) -> str:
    return _TAG_START.sub("&lt;", text)


def briefing_markdown(briefing: Briefing) -> str:
    """The briefing as Markdown: a header, then one section per non-empty group."""
    lines = [briefing_header(briefing)]
    if not briefing.items and briefing.pooled:  # (not "no memories": there are some)
        lines.append(
            f"_None of the {briefing.candidates} memories to brief on fits in "
            f"{briefing.max_tokens} tokens (`--max-tokens`, `brief.max_tokens`)._"
        )
    elif not briefing.items and briefing.candidates:  # (no budget would show them)
        lines.append(
            f"_None of the {briefing.candidates} memories is of a kind a briefing shows: a "
            "preference, a project truth (a decision, architecture, requirement, design, "
            "configuration…), a goal, or something from the last `brief.recent_days` days; "
            "`remember` finds the rest._"
        )
    elif not briefing.items:
        lines.append(EMPTY)
    for section in briefing.sections:
        lines.append(section_header(section.key))
        lines.extend(item_line(item) for item in section.items)
    return "\n".join(lines) + "\n"


def briefing_to_dict(briefing: Briefing) -> dict[str, Any]:
    """The briefing as JSON-ready data (full memory text stays reachable by id)."""
    return {
        "scope": briefing.scope,
        "generated_at": iso_z(briefing.generated_at),
        "max_tokens": briefing.max_tokens,
        "tokens": briefing.tokens,
        "candidates": briefing.candidates,
        "sections": [
            {
                "key": s.key,
                "title": s.title,
                "items": [
                    {
                        "id": i.memory.id,
                        "title": i.memory.title,
                        "text": i.text,
                        "gist": i.gist,
                        "memory_type": i.memory.memory_type.value,
                        "scope": i.memory.scope,
                        "source": i.memory.source.value,
                        "created_at": iso_z(i.memory.created_at),
                        "strength": round(i.strength, 4),
                        "score": round(i.score, 4),
                        "status": i.status or None,
                        "detail": i.detail or None,
                        "merged_ids": i.merged,
                    }
                    for i in s.items
                ],
            }
            for s in briefing.sections
        ],
    }
