"""`octobrain doctor --recreate`: tables whose loss loses no memory (the knowledge tables, the
forgotten turns, the consolidation journal) started over, empty, their old directories moved
aside and their names taken off the store's manifest.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from octobrain.errors import InvalidInput, as_json
from octobrain.store import deletion_sums, seen
from octobrain.store.manifest import KNOWN_TABLES, LOCK_TIMEOUT_S, STAMPED_ON, retable
from octobrain.store.stamps import stamp_made

if TYPE_CHECKING:
    from octobrain.store.location import StoreLocation
    from octobrain.store.memories import MemoryStore

# What `octobrain doctor --recreate` may start over, empty: tables whose loss loses no memory
# (the memories table and its companions go back with `memory restore` instead).
RECREATABLE = {
    "knowledge": ("knowledge_sources", "knowledge_chunks"),
    "forgotten_turns": ("forgotten_turns",),
    # The journal of sleep consolidations, what `memory unconsolidate` reads: the memories
    # stay as they are; a consolidation made before can no longer be undone.
    "consolidations": ("consolidations",),
}


def recreate(location: StoreLocation, what: str, damaged: set[str]) -> list[str]:
    """Start the tables of `what` (a `RECREATABLE` key) over: under their write lock, each
    one's directory is moved aside (`<name>.lance.lost-<time>`; dropped on an object store)
    and taken off the manifest, so the next use makes it empty. Only when one of them is in
    `damaged` (what `doctor` found): a table that reads whole is never thrown away. The
    store's mark (`store.seen`) is dropped only when no table of the store is left. Returns
    what was moved aside or dropped."""
    tables = RECREATABLE.get(what)
    if tables is None:
        raise InvalidInput(
            "--recreate", f"must be one of {', '.join(RECREATABLE)}, got {as_json(what)}"
        )
    if not damaged & set(tables):
        raise InvalidInput(
            "--recreate",
            f"{what} opens and reads whole (`octobrain doctor`): nothing to start over",
        )
    family = "knowledge" if what == "knowledge" else "write"
    done: list[str] = []
    with location.lock(family, LOCK_TIMEOUT_S):
        db = location.connect()
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        # Made again, a table counts its versions from 1: its recorded newest goes first,
        # with the checksums of the deletion files the old one read.
        location.high_water.record(dict.fromkeys(tables))
        deletion_sums.forget(location, tables)
        for name in tables:
            if location.path is not None:
                folder = location.path / f"{name}.lance"
                if folder.exists():
                    aside = folder.with_name(f"{folder.name}.lost-{stamp}")
                    folder.rename(aside)
                    done.append(str(aside))
            elif name in set(db.list_tables().tables):
                db.drop_table(name)
                done.append(f"{name} (dropped)")
            bearer = STAMPED_ON.get(name)
            if bearer is not None and bearer in set(db.list_tables().tables):
                # Started over: no longer a table that was made and is gone.
                stamp_made(db.open_table(bearer), name, made=False)
        retable(location, lambda listed: listed - set(tables))
        if not set(db.list_tables().tables) & set(KNOWN_TABLES):
            # The whole store started over on purpose: an empty store is no store gone. (Else
            # the store is still there, and its mark keeps the day it was first used.)
            seen.forget(location.uri)
    return done


def forget_damaged_records(store: MemoryStore) -> dict[str, list[str]]:
    """Delete the rows of the journals (`doctor_tables.JOURNALS`) that no longer match their
    checksum, as `doctor` finds them, under the write lock; their ids by table. Only those
    rows: a flipped bit in one record otherwise had `--recreate` as its way out, which lost
    every record of every project (each consolidation's undo, each forgotten turn). The model
    is neither checked nor used."""
    from octobrain.store import row_sums, scans
    from octobrain.store.doctor_tables import CHECKED_BY, JOURNALS
    from octobrain.store.schema import CHECKSUM
    from octobrain.store.sql import DELETE_BATCH, sql_in

    out: dict[str, list[str]] = {}
    with store.write_lock(check_model=False):
        for name in JOURNALS:
            if not store.made(name):
                continue
            table = store.open_db().open_table(name)
            if CHECKSUM not in table.schema.names:
                continue  # (made before the column: nothing to check a row against)
            columns, check = CHECKED_BY[name]
            batches = scans.scan_batches(table, "true", [*columns, CHECKSUM], DELETE_BATCH)
            ids = row_sums.damaged_ids(batches, check)
            for at in range(0, len(ids), DELETE_BATCH):
                store.check_lease()
                table.delete(sql_in("id", ids[at : at + DELETE_BATCH]))
                store.wrote(table)
            if ids:
                out[name] = ids
    return out
