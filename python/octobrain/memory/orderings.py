"""Orderings the store knows, applied among the hits `remember` found: a consolidated memory
ranks below its parent, a memory a `conflicts` edge outranks ranks below the one stating the
other value, unless the question asks for it by a word of its own, and a memory stored twice
is shown once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from octobrain.memory import conflicts
from octobrain.memory.conversation import is_turn
from octobrain.models import Memory
from octobrain.text import analyze

if TYPE_CHECKING:
    from octobrain.memory.search import Hit

BELOW = 0.95  # a memory ranked below another (its parent, a prevailing value) scores at most


def rank_below(hits: list[Hit], conflicting: dict[str, list[str]], queries: Sequence[str]) -> None:
    """Orderings the store knows, applied to scores among the found hits: a consolidated
    memory ranks below its parent, and a memory that a `conflicts` edge outranks ranks below
    the memory stating the other value (the edge's source, written by the sleep pass for the
    more trusted or newer statement, or by an agent for the one it stores now), unless it is
    the more trusted of the two, that memory is itself superseded, or the question names what
    only the outranked one is about (`asks_for`).

    Scores only ever drop, so chains (a member of a parent that is itself outranked) settle
    by repeating; a cycle of agent-written edges stops after one round per hit."""
    by_id = {h.memory.id: h for h in hits}
    above_of: dict[str, list[str]] = {}
    asked = _terms(" ".join(queries)) if any(h.memory.id in conflicting for h in hits) else set()
    for hit in hits:
        above = [p for p in hit.consolidated_into if p in by_id]
        for winner in conflicting.get(hit.memory.id, []):
            other = by_id.get(winner)
            if (
                other is not None
                and conflicts.holds(
                    other.memory, hit.memory, winner_superseded=bool(other.superseded_by)
                )
                and not asks_for(hit.memory, other.memory, asked)
            ):
                hit.outranked_by.append(winner)
                above.append(winner)
        if above:
            above_of[hit.memory.id] = above
    for _ in range(len(above_of)):
        changed = False
        for mid, above in above_of.items():
            cap = BELOW * min(by_id[p].score for p in above)
            if by_id[mid].score > cap:
                by_id[mid].score = cap
                changed = True
        if not changed:
            break


def copies_below(hits: Sequence[Hit]) -> set[int]:
    """The places in `hits` (best first) of memories with the scope, type, title and content of
    a better-ranked one: `memorize` stores such a copy no more, but a store written before it
    did, and an import may bring one. Each is named in that one's `copies` and left out, so
    an answer shows a fact once and the next memory takes its place. Turns of conversations
    are kept: the same words said twice are two things said."""
    first: dict[tuple[str, str, str, str], Hit] = {}
    below = set()
    for place, hit in enumerate(hits):
        m = hit.memory
        if is_turn(m.tags):
            continue
        key = (m.scope, m.memory_type.value, m.title, m.content)
        if key in first:
            first[key].copies.append(m.id)
            below.add(place)
        else:
            first[key] = hit
    return below


def asks_for(loser: Memory, winner: Memory, asked: set[str]) -> bool:
    """Whether the question names the outranked memory's own subject: it asks a word only
    that memory has, where the other has a word of its own instead ("catalog" against
    "inventory"). Near-identical wording with other numbers is then two things' settings, not
    one thing's two values, and the conflict's order must not hide the one asked for. Numbers
    are left out: they are the values in conflict. `asked`: the question's terms."""
    mine, theirs = (_terms(m.searchable_text()) for m in (loser, winner))
    return bool(asked & (mine - theirs)) and bool(theirs - mine - asked)


def _terms(text: str) -> set[str]:
    (terms,) = analyze([text])
    return {t for t in terms if not t.isdigit()}
