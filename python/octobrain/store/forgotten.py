"""The ids of conversation turns a user forgot, so that ingesting the conversation again does
not bring them back.

A turn's id derives from its scope, conversation and place (`memory.ingest.turn_id`), and
ingesting a transcript again stores the turns the store does not hold: after `forget`, that
was every forgotten one, so a turn forgotten for holding a password came back with the next
`SessionEnd` or the next client that handed the transcript over. `forget` records them here
first, under the store's write lock and before the rows go (a process killed between the two
leaves an id recorded for a row still held, which changes nothing), and ingest counts a
recorded id as forgotten instead of storing it. `memory restore` brings a forgotten turn back
as it brings back any row; the record then names a held row, which ingest already skips.

The table is made by the first forget of a turn; reading never makes it (a store that never
forgot a turn has none).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from octobrain.store import manifest
from octobrain.store.sql import sql_in
from octobrain.times import utcnow

if TYPE_CHECKING:
    from octobrain.store.memories import MemoryStore

FORGOTTEN = "forgotten_turns"


def forgotten_schema() -> pa.Schema:
    """Schema of the `forgotten_turns` table."""
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("scope", pa.string(), nullable=False),
            pa.field("forgotten_at", pa.timestamp("us", tz="UTC"), nullable=False),
        ]
    )


def record(store: MemoryStore, turns: Sequence[tuple[str, str]]) -> None:
    """Record the turns `(id, scope)` as forgotten (one commit; call under the write lock,
    before deleting them)."""
    if not turns:
        return
    table = _table(store)
    # Should the table be lost together with the store's manifest, memories still shows that
    # it existed (`manifest.existed`): read as "none forgotten", every turn would come back.
    manifest.stamp_made(store.memories, FORGOTTEN)
    now = utcnow()
    held = _among(table, [turn_id for turn_id, _ in turns])
    rows = [{"id": i, "scope": s, "forgotten_at": now} for i, s in turns if i not in held]
    if rows:
        table.add(pa.Table.from_pylist(rows, schema=forgotten_schema()))
        store.wrote(table)


def among(store: MemoryStore, ids: Sequence[str]) -> set[str]:
    """Which of `ids` were forgotten (none when no turn ever was). A table the store's manifest
    records and that is gone or does not open is `TableDamaged`: read as "none forgotten", it
    would bring every forgotten turn back with the next ingest."""
    if not ids or not store.made(FORGOTTEN):
        return set()
    return _among(_table(store), ids)


def _table(store: MemoryStore) -> Any:
    # One handle per store, kept by the store: brought to its latest commit under the write
    # lock, and opened again once another process started the table over.
    return store.open_table(FORGOTTEN, forgotten_schema())


def _among(table: Any, ids: Sequence[str]) -> set[str]:
    query = table.search().where(sql_in("id", list(ids))).select(["id"]).limit(None)
    return set(query.to_arrow().column("id").to_pylist())
