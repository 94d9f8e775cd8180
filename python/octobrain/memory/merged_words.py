"""What a synthesised parent (a sleep merge's, a goal's summary) is made to say from its members,
so it is known which of its fields the user edited since: those are theirs, never written over
when a member is edited or forgotten, and a parent the user edited is kept by `unconsolidate`
instead of deleted (`consolidation.Consolidator`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from octobrain.kernels.clustering import unit_rows
from octobrain.memory.summary import summarise
from octobrain.models import MAX_FILES, MAX_TAGS, Memory
from octobrain.store.consolidations import ConsolidationRecord
from octobrain.store.schema import row_to_memory, stored_float

TEXT_FIELDS = ("title", "content", "tags", "related_files")  # what a parent says
Boost = Callable[[Sequence[float]], float]  # the members' importances → the parent's


def first_of(lists: Iterable[Sequence[str]]) -> list[str]:
    """The values of `lists` in order, each once (a merged memory's tags or files)."""
    return list(dict.fromkeys(value for values in lists for value in values))


def same_importance(stored: float, given: float) -> bool:
    """Whether a stored importance is still `given`: compared as read (`stored_float`), since an
    edit of other fields writes the row back from its read value, whose float32 may differ in
    the last bit (0.6 × 0.2 is 0.12000000477 as given, 0.11999999732 once written back)."""
    return stored_float(stored) == stored_float(given)


def cosines(vectors: np.ndarray) -> np.ndarray:
    """The pairwise cosines of `vectors`' rows."""
    unit = unit_rows(vectors)
    sims: np.ndarray = unit @ unit.T
    return sims


def central_first(sims: np.ndarray) -> list[int]:
    """Positions most central first (mean cosine to the cluster; ties by position): the order a
    sleep pass summarises a cluster in."""
    centrality = sims.mean(axis=1)
    return sorted(range(len(sims)), key=lambda i: (-centrality[i], i))


def made(record: ConsolidationRecord, members: Sequence[Memory], boosted: Boost) -> dict[str, Any]:
    """The fields a synthesised parent of `members` (in this order) is given: what a sleep pass
    or a rewrite writes. A goal's parent keeps its title ("Goal reached: …")."""
    given = dict(zip(record.member_ids, record.member_prev_importance, strict=True))
    return {
        "title": members[0].title if record.kind == "sleep" else None,
        "content": summarise([m.content for m in members]),
        "tags": first_of(m.tags for m in members)[:MAX_TAGS],
        "related_files": first_of(m.related_files for m in members)[:MAX_FILES],
        "importance": boosted([given[m.id] for m in members]),
    }


def said(
    record: ConsolidationRecord, members: Sequence[Memory], rows: dict[str, Any], boosted: Boost
) -> list[dict[str, Any]]:
    """What the parent of `members` was made to say: in the record's order (a rewrite's), and,
    for a parent a sleep pass wrote and nothing rewrote since, most central first by their
    vectors in `rows` (passes recorded their members in cluster order)."""
    out = [made(record, members, boosted)]
    if record.kind == "sleep" and all(m.id in rows for m in members):
        vectors = np.stack([np.asarray(rows[m.id]["embedding"], np.float32) for m in members])
        ranked = [members[i] for i in central_first(cosines(vectors))]
        if ranked != list(members):
            out.append(made(record, ranked, boosted))
    return out


def users_fields(
    record: ConsolidationRecord, parent: Memory, made_to_say: list[dict[str, Any]]
) -> set[str]:
    """The fields of `parent` that say what no consolidation made it say: the user's."""
    out = set()
    for name in TEXT_FIELDS:
        value = getattr(parent, name)
        if name == "title" and record.kind == "goal":  # its own title, not a member's
            mine = value.startswith("Goal reached: ")
        elif name == "related_files" and record.kind == "goal" and not value:
            mine = True  # (a goal's summary was made without files)
        else:
            mine = any(fields[name] == value for fields in made_to_say)
        if not mine:
            out.add(name)
    if all(not same_importance(parent.importance, f["importance"]) for f in made_to_say):
        out.add("importance")
    return out


def edited_by_user(
    record: ConsolidationRecord, rows: dict[str, dict[str, Any]], boosted: Boost
) -> bool:
    """Whether the synthesised parent in `rows` says anything its members in `rows` did not make
    it say (its title, content, tags or files: an importance alone is no words)."""
    members = [row_to_memory(rows[m], checked=False) for m in record.member_ids if m in rows]
    if not members:
        return True  # nothing to tell its words by: keep them
    parent = row_to_memory(rows[record.parent_id], checked=False)
    theirs = users_fields(record, parent, said(record, members, rows, boosted))
    return bool(theirs & set(TEXT_FIELDS))
