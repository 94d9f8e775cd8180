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
forgot a turn has none). Each row carries the CRC-32 of its fields beside its `forgotten_at`
(`schema.checksum`; a row is never rewritten): Lance keeps no checksum of its pages, and an
id read changed brings the turn back with the next ingest while `doctor` said ok. A table made
before the column gains it with the next write (`upkeep.LATER_COLUMNS`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from octobrain.store import stamps
from octobrain.store.journal_rows import journal_damaged
from octobrain.store.schema import CHECKSUM, CHECKSUM_FIELD, checksum
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
            CHECKSUM_FIELD,  # (added later: a table made before it gains it with a write)
        ]
    )


FORGOTTEN_FIELDS = (("id", "scope"), (), (), ("forgotten_at",))
FORGOTTEN_CHECKED = ("id", "scope", "forgotten_at")


def forgotten_checksum(row: Mapping[str, Any]) -> int:
    """The `checksum` of a `forgotten_turns` row: the CRC-32 of its fields, beside its
    `forgotten_at` (`schema.checksum`)."""
    return checksum(row, FORGOTTEN_FIELDS, "forgotten_at")


def forgotten_verified(row: Mapping[str, Any]) -> bool | None:
    """Whether a `forgotten_turns` row matches its checksum; None when it has none (recorded
    before the column, or by an older octobrain)."""
    stored = row.get(CHECKSUM)
    return None if stored is None else stored == forgotten_checksum(row)


def record(store: MemoryStore, turns: Sequence[tuple[str, str]]) -> None:
    """Record the turns `(id, scope)` as forgotten (one commit; call under the write lock,
    before deleting them)."""
    if not turns:
        return
    _table(store)  # opened first: the write lock, taken again, brings it up to the columns
    with store.write_lock():
        _record(store, _table(store), turns)


def _record(store: MemoryStore, table: Any, turns: Sequence[tuple[str, str]]) -> None:
    # Should the table be lost together with the store's manifest, memories still shows that
    # it existed (`manifest.existed`): read as "none forgotten", every turn would come back.
    stamps.stamp_made(store.memories, FORGOTTEN)
    now = utcnow()
    held = _among(table, [turn_id for turn_id, _ in turns])
    rows = [{"id": i, "scope": s, "forgotten_at": now} for i, s in turns if i not in held]
    for row in rows:
        row[CHECKSUM] = forgotten_checksum(row)
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
    """Which of `ids` `table` records; `RowDamaged` when a row no longer matches its checksum.
    Every row is checked (a few bytes each): one whose id read changed matches no id asked
    for, and its turn would come back with this ingest without a word."""
    names = [c for c in (*FORGOTTEN_CHECKED, CHECKSUM) if c in table.schema.names]
    asked = set(ids)
    held: set[str] = set()
    for batch in table.search().select(names).limit(None).to_batches():
        for row in batch.to_pylist():
            if forgotten_verified(row) is False:
                raise journal_damaged(str(row["id"]), FORGOTTEN)
            if row["id"] in asked:
                held.add(str(row["id"]))
    return held
