"""Text and JSON renderings of memories and search results, shared by the CLI and MCP."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from octobrain.memory.consolidation import Consolidation
from octobrain.memory.reads import Neighbour, Recall
from octobrain.memory.search import Empty
from octobrain.models import KEEP_VERSIONS_DAYS, Memory, Relationship, RelationshipType, to_plain
from octobrain.safe_text import one_line, quoted

if TYPE_CHECKING:
    from octobrain.memory.copies import Already
    from octobrain.memory.edits import Edited
    from octobrain.memory.writes import Forgotten

NO_RESULTS = (
    "No relevant memories found (nothing passed the relevance threshold). "
    "Try other words, several phrasings at once, or a lower min_relevance."
)
# How each front end asks for archived memories too (the MCP tool cannot).
ARCHIVED_CLI = "`--include-archived` searches them too."
ARCHIVED_MCP = (
    "This tool leaves them out; `octobrain memory remember --include-archived` finds them."
)


def released_lines(forgotten: Forgotten) -> list[str]:
    """What a forget changed in the consolidations it touched, one line each (none if none)."""
    lines = []
    if forgotten.restored:
        lines.append(
            f"On their own again (a merged memory deleted gave them back): "
            f"{', '.join(forgotten.restored)}"
        )
    if forgotten.rewritten:
        lines.append(
            "Written again without what was deleted (merged memories that held it): "
            + ", ".join(forgotten.rewritten)
        )
    if forgotten.kept:
        lines.append(
            "Left as you wrote them (merged memories you edited since the merge; they may still "
            "say what was deleted): " + ", ".join(forgotten.kept)
        )
    return lines


def edited_lines(edited: Edited) -> list[str]:
    """What an edit of a merged memory's member changed in it, one line each (none if none)."""
    lines = []
    if edited.rewritten:
        lines.append("Merged memories written again with this edit: " + ", ".join(edited.rewritten))
    if edited.kept:
        lines.append(
            "Left as you wrote them (merged memories you edited since the merge; they may still "
            "say what this memory said before): " + ", ".join(edited.kept)
        )
    return lines


# What a delete leaves behind: the store's kept versions (`memory history` / `memory restore`).
UNDO_NOTE = (
    f"`octobrain memory restore` can bring them back for {KEEP_VERSIONS_DAYS} days "
    "(see `octobrain memory history`)"
)


def undo_line(deleted: int, version: int | None) -> str:
    """What a person types to undo a delete: the version it went back to, named."""
    gone = f"{deleted} {'memory' if deleted == 1 else 'memories'}"
    if version is None:
        return f"Deleted {gone}; {UNDO_NOTE}."
    return (
        f"Deleted {gone}; `octobrain memory restore {version} --yes` brings "
        f"{'it' if deleted == 1 else 'them'} back for {KEEP_VERSIONS_DAYS} days (it also "
        "undoes any memory write made since; see "
        "`octobrain memory history`)."
    )


LINKS_LISTED = 8  # links of one type listed one by one in `memorize`'s answer; more: counted


def format_stored(
    memory: Memory,
    edges: list[Relationship],
    findings_left: int = 0,
    already: Already | None = None,
) -> str:
    """What `memorize` answers, on the CLI and over MCP: the id (or, for a memory `already`
    held, that it was, and what the call added to it), then the memory in one line, its links
    written (a closed goal's findings counted, not listed) and, when closing a goal left
    findings working, how many."""
    first = f"Memory stored: {memory.id}"
    if already is not None:
        first = (
            f"Memory already stored: {memory.id} (this scope holds a memory of the same type, "
            f"title and content, stored {already.stored_at:%Y-%m-%d %H:%M} UTC): no copy made; "
            + (f"added to it: {'; '.join(already.added)}" if already.added else "nothing added")
            + (f"; not added: {'; '.join(already.left_out)}" if already.left_out else "")
        )
    lines = [
        first,
        f"{memory.source.label} {one_line(memory.title)} | Type: {memory.memory_type.value} | "
        f"Importance: {memory.importance:.2f} | Scope: {memory.scope or '(global)'}",
    ]
    if edges:
        lines.append(f"Links ({len(edges)}):")
        by_type: dict[str, list[Relationship]] = {}
        for e in edges:
            by_type.setdefault(e.relationship_type.value, []).append(e)
        for kind, group in by_type.items():
            if len(group) > LINKS_LISTED:
                lines.append(f"  this {kind} → {len(group)} memories")
            else:
                lines += [f"  this {kind} → {e.target_id}" for e in group]
    lines += settled_lines(already.settled if already is not None else ())
    if findings_left:
        goal = next(e.target_id for e in edges if e.relationship_type is RelationshipType.CLOSES)
        taken = sum(e.relationship_type is RelationshipType.CONSOLIDATED_FROM for e in edges)
        lines.append(
            f"Goal {goal} still has {findings_left} working findings: one close consolidates "
            f"{taken}; close it again (`octobrain memory consolidate {goal}`) for the next."
        )
    return "\n".join(lines)


def settled_lines(settled: Sequence[Relationship]) -> list[str]:
    """A line for each `conflicts` edge a supersession replaced (`relate`, `memorize`)."""
    return [
        f"Dispute settled: {e.source_id} conflicts {e.target_id} removed (a memory replaced is "
        "not in conflict with its replacement)"
        for e in settled
    ]


def memory_to_dict(memory: Memory) -> dict[str, Any]:
    """Every stored field of a memory, JSON-ready (the export/import line format)."""
    return to_plain(memory, iso_times=True)


def relationship_to_dict(rel: Relationship) -> dict[str, Any]:
    """A relationship, JSON-ready."""
    return to_plain(rel, iso_times=True)


def recall_to_dict(recall: Recall) -> dict[str, Any]:
    """`remember` results as JSON."""
    return {
        "scope": recall.scope,
        "empty": recall.empty.value or None,
        "results": [
            {
                **memory_to_dict(h.memory),
                "score": round(h.score, 4),
                "relevance": round(h.relevance, 4),
                "why": h.why,
                "superseded_by": h.superseded_by,
                "consolidated_into": h.consolidated_into,
                "outranked_by": h.outranked_by,
                "copies": h.copies,
                "gist": h.gist or None,
                "effective_importance": (
                    None if h.effective_importance is None else round(h.effective_importance, 4)
                ),
            }
            for h in recall.hits
        ],
        "related": [
            {
                **memory_to_dict(n.memory),
                "relationship_type": n.relationship_type.value,
                "direction": "outgoing" if n.outgoing else "incoming",
                "via": n.via,
                "strength": n.strength,
            }
            for n in recall.neighbours
        ],
    }


def format_memory(
    memory: Memory, *, header: str = "", gist: str = "", effective: float | None = None
) -> str:
    """One memory as a readable block (a faded episode shows its `gist` instead). Importance
    is the stored value, and with `effective` also the decayed, access-boosted one that
    ranking used."""
    importance = f"stored {memory.importance:.2f}" + (
        "" if effective is None else f", effective {effective:.2f}"
    )
    lines = [
        f"{header}{memory.source.label} {one_line(memory.title)}",
        f"Type: {memory.memory_type.value} | Importance: {importance} | "
        f"State: {memory.state.value} | Scope: {memory.scope or '(global)'} | "
        f"Created: {memory.created_at:%Y-%m-%d %H:%M} UTC",
    ]
    if memory.tags:
        lines.append(f"Tags: {one_line(', '.join(memory.tags))}")
    if memory.related_files:
        lines.append(f"Files: {one_line(', '.join(memory.related_files))}")
    if memory.git_commit:
        lines.append(f"Git: {memory.git_commit[:12]}")
    lines.append(f"ID: {memory.id}")
    if gist:
        lines += [f"Gist (faded; full text: octobrain memory get {memory.id}):", quoted(gist)]
    else:
        lines.append(quoted(memory.content))
    return "\n".join(lines)


def _edge(n: Neighbour) -> str:
    if n.relationship_type is RelationshipType.SAME_SESSION:
        return f"same session as {n.via[:8]}"
    kind = n.relationship_type.value
    return f"this {kind} → {n.via[:8]}" if not n.outgoing else f"{n.via[:8]} {kind} → this"


def no_results(recall: Recall, archived_hint: str = ARCHIVED_CLI) -> str:
    """What an empty `remember` says: what actually left the candidates out."""
    where = "the global scope" if not recall.scope else f"{recall.scope} or the global scope"
    if recall.empty is Empty.NO_MEMORIES:
        return f"No memories found: none are stored in {where} yet."
    if recall.empty is Empty.FILTERS:
        return (
            f"No memories found: none in {where} meets the filters (memory types, tags, files, "
            "dates), so nothing was ranked. Drop or widen a filter."
        )
    if recall.empty is Empty.ARCHIVED:
        return (
            f"No relevant memories found among active ones; only archived ones match. "
            f"{archived_hint}"
        )
    return NO_RESULTS


def format_recall(recall: Recall, archived_hint: str = ARCHIVED_CLI) -> str:
    """`remember` results as text for an agent or a terminal (`archived_hint`: how this front
    end searches archived memories, said when only those match)."""
    if not recall.hits:
        return no_results(recall, archived_hint)
    blocks = [f"MEMORIES ({len(recall.hits)} found, scope {recall.scope or '(global)'})"]
    for i, hit in enumerate(recall.hits, 1):
        block = format_memory(
            hit.memory, header=f"{i}. ", gist=hit.gist, effective=hit.effective_importance
        )
        blocks.append(
            f"{block}\nScore: {hit.score:.2f} | Relevance: {hit.relevance:.2f}\nWhy: {hit.why}"
        )
    if recall.neighbours:
        blocks.append("--- Related context (via graph) ---")
        for n in recall.neighbours:
            m = n.memory
            edge = f"{_edge(n)}, strength {n.strength:.2f}"
            blocks.append(
                f"{m.source.label} {one_line(m.title)} (ID: {m.id}; {edge})\n{quoted(m.content)}"
            )
    return "\n\n".join(blocks)


def consolidation_to_dict(c: Consolidation) -> dict[str, Any]:
    """A consolidation (done or planned), JSON-ready."""
    return {
        "record_id": c.record_id,
        "kind": c.kind,
        "description": c.description,
        "synthesised_parent": c.synthesised,
        "parent": memory_to_dict(c.parent),
        "members": [{"id": m.id, "title": m.title} for m in c.members],
    }


def format_consolidation(c: Consolidation) -> str:
    """A consolidation as text: the parent, its summary and what went under it."""
    head = (
        f"{one_line(c.parent.title)}  ({c.parent.id if c.record_id else 'planned'}; "
        f"{one_line(c.description)})"
    )
    members = "\n".join(f"  <- {m.id}  {one_line(m.title)}" for m in c.members)
    return f"{head}\n{quoted(c.parent.content)}\n{members}"
