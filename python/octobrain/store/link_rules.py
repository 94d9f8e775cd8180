"""Which links cannot stand beside each other between two memories, one rule for every writer
(`relate` and a memorize answered by a copy through `edges.link_once`, an import through `sift`):

- `supersedes` never makes a cycle (both memories would rank as replaced, whichever is newer);
- `supersedes` settles a pair: no `conflicts` edge stands beside it, either way. One asked for
  is left out (`Settled`); one already there is replaced by the supersession;
- a one-way link (`conflicts`, `extends`, `implements`, `achieves`) is not made backwards
  beside itself (each memory would prevail over, or build on, the other);
- a memory `closes` one goal: a second is refused (`check_link`, so `relate`; one `memorize`
  closes one by its own check), and left out of an import (`sift`);
- no link runs from a memory to itself (`check_not_self`, on every edge the store appends:
  a writer's mistake is refused, not stored where no command removes it).

Links that hold both ways (`related_to`, `similar`, `depends_on`) pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from octobrain.errors import InvalidInput
from octobrain.models import Relationship, RelationshipType
from octobrain.store import schema
from octobrain.store.scans import scan_arrow
from octobrain.store.sql import sql_in, sql_str

if TYPE_CHECKING:
    from octobrain.store.memories import MemoryStore

SUPERSEDES, CONFLICTS = RelationshipType.SUPERSEDES, RelationshipType.CONFLICTS
CLOSES = RelationshipType.CLOSES
# Links whose reverse between the same two memories says the opposite, and which way each runs.
_ONE_WAY_WHY = {
    CONFLICTS: "a 'conflicts' link runs from the statement that prevails to the one it outranks",
    RelationshipType.EXTENDS: "an 'extends' link runs from the memory that builds on another",
    RelationshipType.IMPLEMENTS: "an 'implements' link runs from the memory that carries "
    "another out",
    RelationshipType.ACHIEVES: "an 'achieves' link runs from a finding to the goal it serves",
}
RULED = frozenset({SUPERSEDES, *_ONE_WAY_WHY})  # the types these rules concern
ONE_GOAL = (
    "a memory closes one (its findings are consolidated under it): store a closing note for "
    "each goal"
)
MAX_SUPERSEDE_STEPS = 64  # how far a chain of `supersedes` links is followed for a cycle

Edge = tuple[str, str, RelationshipType]  # source id, target id, type


class Settled(InvalidInput):
    """A `conflicts` link between two memories one of which supersedes the other: the
    supersession settles them (`memorize` leaves such a link out, `relate` refuses it)."""


SELF_LINK = "a memory does not link to itself"


def self_link_rule(memory_id: str) -> str:
    """The rule a link from `memory_id` to itself breaks."""
    return f"must differ from source_id: both are memory {memory_id}, and {SELF_LINK}"


def check_not_self(rels: Iterable[Relationship], field: str) -> None:
    """Refuse (`field`) a link whose source is its target, whoever writes it."""
    for rel in rels:
        if rel.source_id == rel.target_id:
            raise InvalidInput(field, self_link_rule(rel.source_id))


def _cycle_rule(rel: Relationship) -> str:
    return (
        f"{rel.target_id} already supersedes {rel.source_id} (directly or through memories it "
        "supersedes): a memory cannot supersede one that supersedes it; remove that link first "
        "(`unrelate`), or use another relationship type"
    )


def _against(rel: Relationship, pair: Iterable[Edge]) -> InvalidInput | None:
    """The error `rel` meets beside `pair`, the links between its two memories (field left
    for the caller: ""), or None."""
    kind = rel.relationship_type
    for source, target, other in pair:
        if kind is CONFLICTS and other is SUPERSEDES:
            return Settled(
                "",
                f"{source} supersedes {target}: a memory replaced is settled, not in conflict "
                "with its replacement, so the two are not linked as 'conflicts'; `unrelate` the "
                "supersedes link first to record a dispute instead",
            )
        if kind in _ONE_WAY_WHY and other is kind and source == rel.target_id:
            return InvalidInput(
                "",
                f"{rel.target_id} already {kind.value} {rel.source_id}: {_ONE_WAY_WHY[kind]}, "
                "so it goes one way between two memories; `unrelate` that link first to turn "
                "it round",
            )
    return None


def _named(error: InvalidInput, field: str) -> InvalidInput:
    return type(error)(field, error.rule)


def between(store: MemoryStore, a: str, b: str) -> list[Relationship]:
    """The edges from `a` to `b` and from `b` to `a`."""
    one, two = sql_str(a), sql_str(b)
    where = (
        f"(source_id = {one} AND target_id = {two}) OR (source_id = {two} AND target_id = {one})"
    )
    rows = scan_arrow(store.relationships, where, store.relationships.schema.names, None)
    return [schema.row_to_relationship(r) for r in rows.to_pylist()]


def check_no_supersede_cycle(store: MemoryStore, rel: Relationship, field: str) -> None:
    """Refuse (`field`) a `supersedes` link from a memory to one that supersedes it, directly or
    through memories it supersedes. Other links pass."""
    if rel.relationship_type is not SUPERSEDES or rel.source_id == rel.target_id:
        return
    kind = sql_str(SUPERSEDES.value)
    frontier, reached = {rel.target_id}, {rel.target_id}
    for _ in range(MAX_SUPERSEDE_STEPS):
        where = f"relationship_type = {kind} AND {sql_in('source_id', sorted(frontier))}"
        found = scan_arrow(store.relationships, where, ["target_id"], None)
        replaced = set(found.column("target_id").to_pylist())
        if rel.source_id in replaced:
            raise InvalidInput(field, _cycle_rule(rel))
        frontier = replaced - reached
        if not frontier:
            return
        reached |= frontier


def check_one_goal(store: MemoryStore, rel: Relationship, field: str) -> None:
    """Refuse (`field`) a `closes` link from a memory that closes another goal. Other links
    pass."""
    if rel.relationship_type is not CLOSES:
        return
    where = (
        f"source_id = {sql_str(rel.source_id)} AND target_id != {sql_str(rel.target_id)} "
        f"AND relationship_type = {sql_str(CLOSES.value)}"
    )
    other = scan_arrow(store.relationships, where, ["target_id"], None)["target_id"].to_pylist()
    if other:
        raise InvalidInput(field, f"{rel.source_id} already closes goal {other[0]}; {ONE_GOAL}")


def check_link(store: MemoryStore, rel: Relationship, field: str) -> None:
    """Refuse (`field`) a link that breaks a rule beside what the store holds between its two
    memories (`Settled` for a `conflicts` link a supersession settles), or a second goal its
    source closes. Run under the write lock, as the write is."""
    check_no_supersede_cycle(store, rel, field)
    check_one_goal(store, rel, field)
    pair = [(e.source_id, e.target_id, e.relationship_type) for e in between(store, *_ends(rel))]
    error = _against(rel, pair)
    if error is not None:
        raise _named(error, field)


def _ends(rel: Relationship) -> tuple[str, str]:
    return rel.source_id, rel.target_id


def sift(
    store: MemoryStore, rels: Sequence[Relationship]
) -> tuple[list[Relationship], int, list[str]]:
    """Under the write lock, for a batch of edges to append (an import's): those that may be
    written (in order: each weighed beside the store's links and the batch's kept before
    it), how many were left out for a rule, and the ids of the store's `conflicts` edges the
    kept `supersedes` ones replace (to delete once they are written)."""
    given = len(rels)
    rels = _one_goal_each(store, rels)
    if not any(r.relationship_type in RULED for r in rels):
        return rels, given - len(rels), []
    ends = sorted({i for r in rels if r.relationship_type in RULED for i in _ends(r)})
    pairs: dict[frozenset[str], list[tuple[Edge, str]]] = {}  # (edge, its id: "" for the batch's)
    kinds = sql_in("relationship_type", sorted(k.value for k in RULED))
    wanted = set(ends)
    for i in range(0, len(ends), 256):
        where = f"{kinds} AND {sql_in('source_id', ends[i : i + 256])}"
        columns = ["id", "source_id", "target_id", "relationship_type"]
        for row in scan_arrow(store.relationships, where, columns, None).to_pylist():
            if row["target_id"] in wanted:
                edge = (
                    row["source_id"],
                    row["target_id"],
                    RelationshipType(row["relationship_type"]),
                )
                pairs.setdefault(frozenset(edge[:2]), []).append((edge, row["id"]))
    replaces: dict[str, set[str]] = {}  # supersedes: source → targets (store's and kept)
    if any(r.relationship_type is SUPERSEDES for r in rels):
        where = f"relationship_type = {sql_str(SUPERSEDES.value)}"
        found = scan_arrow(store.relationships, where, ["source_id", "target_id"], None)
        for source, target in zip(*found.to_pydict().values(), strict=True):
            replaces.setdefault(source, set()).add(target)
    kept: list[Relationship] = []
    replaced: list[str] = []
    for rel in rels:
        if rel.relationship_type not in RULED:
            kept.append(rel)
            continue
        key = frozenset(_ends(rel))
        here = pairs.setdefault(key, [])
        if _against(rel, [edge for edge, _ in here]) is not None or _cycle(rel, replaces):
            continue
        if rel.relationship_type is SUPERSEDES:
            replaces.setdefault(rel.source_id, set()).add(rel.target_id)
            disputes = {e for e, _ in here if e[2] is CONFLICTS}
            replaced += [i for e, i in here if e[2] is CONFLICTS and i]
            kept = [k for k in kept if not _is_dispute(k, key, disputes)]
            here[:] = [(e, i) for e, i in here if e[2] is not CONFLICTS]
        here.append(((rel.source_id, rel.target_id, rel.relationship_type), ""))
        kept.append(rel)
    return kept, given - len(kept), replaced


def _one_goal_each(store: MemoryStore, rels: Sequence[Relationship]) -> list[Relationship]:
    """`rels` without the `closes` edges from a memory that closes another goal: in the
    store, or by an edge of `rels` kept before it."""
    sources = sorted({r.source_id for r in rels if r.relationship_type is CLOSES})
    closes: dict[str, str] = {}  # source → the goal it closes
    for i in range(0, len(sources), 256):
        where = f"relationship_type = {sql_str(CLOSES.value)} AND "
        found = scan_arrow(
            store.relationships,
            where + sql_in("source_id", sources[i : i + 256]),
            ["source_id", "target_id"],
            None,
        )
        for source, goal in zip(*found.to_pydict().values(), strict=True):
            closes.setdefault(source, goal)
    return [
        r
        for r in rels
        if r.relationship_type is not CLOSES
        or closes.setdefault(r.source_id, r.target_id) == r.target_id
    ]


def _is_dispute(rel: Relationship, key: frozenset[str], disputes: set[Edge]) -> bool:
    edge = (rel.source_id, rel.target_id, rel.relationship_type)
    return frozenset(_ends(rel)) == key and edge in disputes


def _cycle(rel: Relationship, replaces: dict[str, set[str]]) -> bool:
    """Whether `rel`, a `supersedes` link, closes a cycle of `replaces` (held in memory)."""
    if rel.relationship_type is not SUPERSEDES:
        return False
    frontier, reached = [rel.target_id], {rel.target_id}
    while frontier:
        node = frontier.pop()
        if node == rel.source_id:
            return True
        for nxt in replaces.get(node, ()):
            if nxt not in reached:
                reached.add(nxt)
                frontier.append(nxt)
    return False
