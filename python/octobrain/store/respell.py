"""Scopes an earlier version spelt otherwise, brought to the spelling derived now, once.

A remote's host was kept as written (`github.com./acme/api`, fullwidth `ｇｉｔｈｕｂ.com/…`,
punycode `xn--bcher-kva.…`) until stop 60 and 61 read those as the scope derived now
(`github.com/acme/api`, `bücher.…`): rows stored under the former spelling were in a scope no
checkout derives any more, the project's memories out of its sight. The first process that
opens such a store rewrites those rows' `scope` (and checksum, one commit per table, under the
write lock), records what it moved (`RESPELT`, read by ingest: a turn's id was made from its
scope as spelt then) and marks the store done (`SPELT`).

Rewritten, not aliased: every read filters by scope (SQL, the snapshot's masks, the briefing),
so the rows are made to carry the one spelling they all ask for. Ids are kept: links,
consolidation records and forgotten turns name rows by id.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from octobrain.errors import OctobrainError
from octobrain.scope import read_now
from octobrain.store import manifest, schema
from octobrain.store.forgotten import FORGOTTEN, forgotten_schema
from octobrain.store.journal_rows import consolidations_schema
from octobrain.store.scans import scan_arrow, scan_batches
from octobrain.store.sql import DELETE_BATCH, sql_in

if TYPE_CHECKING:
    import lancedb
    import pyarrow as pa

    from octobrain.store.location import StoreLocation
    from octobrain.store.memories import MemoryStore

log = logging.getLogger(__name__)

SPELLING = manifest.SCOPE_SPELLING  # the scope spelling the rows are brought to (stop 61's)
SPELT = manifest.SCOPES_SPELT  # the manifest's mark: the `SPELLING` its rows carry
RESPELT = "scopes_respelt"  # the manifest's record: {former spelling: the scope it is now}
_LATER = {  # the tables made on demand, beside memories and relationships
    schema.CONSOLIDATIONS: consolidations_schema,
    FORGOTTEN: forgotten_schema,
}


def bring_up(store: MemoryStore) -> None:
    """Respell `store`'s scopes if an earlier version wrote them, or a restore took them back
    (its manifest read; a store that cannot be written is read as it is, with a warning)."""
    when_due(store.location, SPELT, lambda: respell(store), "scopes")


def when_due(
    location: StoreLocation, mark: str, respelt: Callable[[], dict[str, str]], what: str
) -> None:
    """Run `respelt` (a respelling pass) unless the manifest's `mark` says the rows are spelt
    as now, or there is no store yet (made now, with its mark); `what` names them in the log."""
    try:
        record = manifest.read(location)
    except OctobrainError:
        return  # (a damaged manifest: the store's open names it, once)
    if record is None or record.get(mark) == SPELLING:
        return
    try:
        moved = respelt()
    except OctobrainError as exc:  # (a store this process cannot write, a lock held too long)
        log.warning("%s an earlier version spelt otherwise left as they are: %s", what, exc)
        return
    if moved:
        log.info("%s spelt as now: %s", what, moved)


def respell(store: MemoryStore) -> dict[str, str]:
    """Under the write lock: each row of `store` whose scope reads as another now (`read_now`)
    given that scope; returns {former spelling: scope} of this pass."""
    from octobrain.store.upkeep import LATER_COLUMNS

    later = [name for name in _LATER if store.made(name)]
    for name in later:  # (opened before the lock: it brings them to the current columns)
        store.open_table(name, _LATER[name]())
    with store.write_lock():
        record = manifest.read(store.location) or {}
        if record.get(SPELT) == SPELLING:
            return {}
        tables = {
            schema.MEMORIES: store.memories,
            schema.RELATIONSHIPS: store.relationships,
            **{name: store.open_table(name, _LATER[name]()) for name in later},
        }
        moves = {name: scope_moves(table) for name, table in tables.items()}
        moved = {old: new for each in moves.values() for old, new in each.items()}
        record_moves(store.location, moved)
        for name, table in tables.items():
            if moves[name]:
                _, checked, sum_of = LATER_COLUMNS[name]
                _rewrite(store, table, moves[name], checked, sum_of)
        manifest.note(store.location, SPELT, SPELLING)
    return moved


def former_spellings(store: MemoryStore, scope: str) -> list[str]:
    """The spellings rows of `scope` had before `respell` (a turn's id was made from one)."""
    try:
        record = manifest.read(store.location) or {}
    except OctobrainError:
        return []
    moved = record.get(RESPELT)
    if not isinstance(moved, dict):
        return []
    return sorted(old for old, new in moved.items() if new == scope and isinstance(old, str))


def record_moves(location: StoreLocation, moved: Mapping[str, str]) -> None:
    """Add `moved` to the manifest's record (before the rows move: a pass cut short is done
    again, its record kept)."""
    if moved:
        record = manifest.read(location) or {}
        manifest.note(location, RESPELT, {**record.get(RESPELT, {}), **moved})


def scope_moves(table: lancedb.table.Table) -> dict[str, str]:
    """{scope: the scope it reads as now} of the scopes of `table`'s rows spelt otherwise."""
    scopes = scan_arrow(table, "true", ["scope"], None)["scope"].unique().to_pylist()
    return {s: read_now(s) for s in scopes if isinstance(s, str) and read_now(s) != s}


def _rewrite(
    store: MemoryStore,
    table: lancedb.table.Table,
    moves: Mapping[str, str],
    checked: Sequence[str],
    sum_of: Callable[[Mapping[str, Any]], int],
) -> None:
    """Give `table`'s rows of the scopes in `moves` their new scope and its checksum, in one
    commit (merged by id)."""
    columns = list(dict.fromkeys(["id", "scope", *checked]))
    batches = scan_batches(table, sql_in("scope", list(moves)), columns, DELETE_BATCH)
    rows = ({**row, "scope": moves[row["scope"]]} for b in batches for row in b.to_pylist())
    data = respelt_rows(rows, ["scope"], sum_of)
    store.check_lease()
    table.merge_insert("id").when_matched_update_all().execute(data)
    store.wrote(table)


def respelt_rows(
    rows: Iterable[Mapping[str, Any]],
    changed: Sequence[str],
    sum_of: Callable[[Mapping[str, Any]], int],
) -> pa.Table:
    """The `id`, the `changed` (string) columns and the checksum (`sum_of` the row) of each
    of `rows`, as respelt: what a respelling pass merges into its table by id (read once:
    only these columns are kept, not the rows)."""
    import pyarrow as pa

    kept: dict[str, list[Any]] = {name: [] for name in dict.fromkeys(["id", *changed])}
    sums: list[int] = []
    for row in rows:
        for name, values in kept.items():
            values.append(row[name])
        sums.append(sum_of(row))
    return pa.table(
        {
            **{name: pa.array(values, pa.string()) for name, values in kept.items()},
            schema.CHECKSUM: pa.array(sums, pa.int64()),
        }
    )
