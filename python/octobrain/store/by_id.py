"""Memories looked up by id: the rows of some ids, and the ids some prefixes name (the short
ids a person or agent gives), each a read per `ID_BATCH` ids or prefixes however many."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from octobrain.models import Memory
from octobrain.store import schema
from octobrain.store.sql import Sight, sql_in

if TYPE_CHECKING:
    from octobrain.store.memories import MemoryStore

ID_BATCH = 256  # ids or id prefixes a read looks up (an `IN` or `OR` list's cost grows with it)
_HEX = frozenset("0123456789abcdef-")


def rows_by_id(store: MemoryStore, ids: Sequence[str], sight: Sight) -> dict[str, dict[str, Any]]:
    """The rows of the memories among `ids` `sight` sees (archived included), by id."""
    unique = sorted(set(ids))
    visible = sight.where(include_archived=True)
    rows: dict[str, dict[str, Any]] = {}
    for at in range(0, len(unique), ID_BATCH):
        rows.update(
            (row["id"], row)
            for row in store.scan(f"{sql_in('id', unique[at : at + ID_BATCH])} AND {visible}")
        )
    return rows


def get_many(
    store: MemoryStore, ids: Sequence[str], sight: Sight, *, checked: bool = True
) -> dict[str, Memory]:
    """The visible memories among `ids`, keyed by id (`checked`: `schema.row_to_memory`)."""
    rows = rows_by_id(store, ids, sight)
    return {i: schema.row_to_memory(row, checked=checked) for i, row in rows.items()}


def ids_with_prefixes(
    store: MemoryStore, prefixes: Sequence[str], sight: Sight, limit: int | None = None
) -> dict[str, list[tuple[str, str]]]:
    """For each of `prefixes` (lowercase hex and hyphens only), `(id, title)` of the memories
    `sight` sees (archived included) whose id starts with it, sorted; of one that no
    longer matches its checksum, `schema.DAMAGED_TITLE` (`schema.shown_title`). `limit`: rows
    read at most per batch of prefixes (one prefix's candidates, when it is given alone)."""
    for prefix in prefixes:
        if not prefix or set(prefix) - _HEX:
            raise ValueError(f"not an id prefix: {prefix!r}")
    found: dict[str, list[tuple[str, str]]] = {p: [] for p in prefixes}
    visible = sight.where(include_archived=True)
    unique = sorted(found)
    for at in range(0, len(unique), ID_BATCH):
        batch = unique[at : at + ID_BATCH]
        likes = " OR ".join(f"id LIKE '{p}%'" for p in batch)
        columns = [*schema.CHECKED, schema.CHECKSUM]
        for row in store.scan(f"({likes}) AND {visible}", columns=columns, limit=limit):
            for prefix in batch:
                if row["id"].startswith(prefix):
                    found[prefix].append((row["id"], schema.shown_title(row)))
    return {p: sorted(rows) for p, rows in found.items()}


def ids_with_prefix(
    store: MemoryStore, prefix: str, sight: Sight, limit: int
) -> list[tuple[str, str]]:
    """`ids_with_prefixes` of one prefix, reading at most `limit` rows."""
    return ids_with_prefixes(store, [prefix], sight, limit)[prefix]
