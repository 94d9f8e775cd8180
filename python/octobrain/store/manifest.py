"""The store's own record of the tables it created, so a lost table is an error, not a fresh one.

LanceDB cannot tell "never created" from "deleted or damaged": both open as "not found". A
store that silently re-creates what it cannot open turns damage into an empty store and the
next write buries the old data. So every table octobrain creates is listed in
`_octobrain/manifest.json` (beside the tables: a local file, or one object in a bucket), and a
listed table that does not open is a `TableDamaged` error naming the table and the way back.

Stores made before the manifest existed adopt it on their first open: the tables that open
are recorded. A read-only store that cannot record them is simply not adopted yet.
"""

from __future__ import annotations

import logging
import os
import re
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from octobrain.errors import InvalidInput, StorageError
from octobrain.store import seen, sighted, stamps
from octobrain.store.lease import LEASE_TTL_S
from octobrain.store.table_files import OTHER_SCHEME, not_regular
from octobrain.store.versions import Problem, lost_version, versions_dir

if TYPE_CHECKING:
    import lancedb
    import pyarrow as pa

    from octobrain.store.location import StoreLocation

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
RESTORING = "restoring"  # the manifest's mark of a restore under way: the version it goes to
MIGRATING = "migrating"  # a migrate's mark on the store it fills: where it copies from
# The scope spelling its rows carry (`store.respell`): a store whose memories table is made
# now has it; one an earlier version made, or a restore took back, has its rows respelt.
SCOPES_SPELT = "scopes_spelt"
KNOWLEDGE_SCOPES_SPELT = "knowledge_scopes_spelt"  # (the knowledge tables', a lock of their own)
SCOPE_SPELLING = 1
_SPELT_ON_MAKING = {"memories": SCOPES_SPELT, "knowledge_sources": KNOWLEDGE_SCOPES_SPELT}
# Every table octobrain makes (a store made before the manifest adopts those that open).
KNOWN_TABLES = (
    "memories",
    "relationships",
    "consolidations",
    "forgotten_turns",
    "knowledge_sources",
    "knowledge_chunks",
)
# Longer than a write lease takes to be taken over on an object store (watched unchanged for
# its TTL), so a holder that crashed never makes the next command give up.
LOCK_TIMEOUT_S = 2 * LEASE_TTL_S + 10
# Tables a store makes only after another (`MemoryStore` makes memories, then relationships,
# and the consolidation journal and forgotten turns later, on demand, from an open store):
# finding a later one means the earlier one was made too. (A manifest that lost its names as
# well let a store whose memories directory was deleted open as a new, empty one.)
MADE_AFTER = {
    "memories": ("relationships", "consolidations", "forgotten_turns"),
    "relationships": ("consolidations", "forgotten_turns"),
    "knowledge_sources": ("knowledge_chunks",),
}
# A table made before any write to another (both are made when their store first opens, this
# one first or in the same step): that other one written (past its empty first version) shows
# this one existed, whatever the manifest says.
WRITTEN_AFTER = {"relationships": "memories", "knowledge_chunks": "knowledge_sources"}
# A table made later, on demand (nothing else is made with it): each write to it also stamps
# the `id` field of another table, whose own files then show it existed.
STAMPED_ON = {"forgotten_turns": "memories"}

# How each table can be got back; memories and its companions have a version history.
_MEMORY_REPAIR = (
    "`octobrain memory history` lists the kept versions and `octobrain memory restore "
    "<version>` goes back to one; otherwise restore the store directory from a backup "
    "(`octobrain memory import` of an export)"
)
_KNOWLEDGE_REPAIR = (
    "`octobrain doctor --recreate knowledge` starts the knowledge tables over, empty (then "
    "index the sources again: `octobrain knowledge index`), or restore the store directory "
    "from a backup"
)


_FORGOTTEN_REPAIR = (
    "restore the store directory from a backup, or `octobrain doctor --recreate "
    "forgotten_turns` starts the table over, empty: a turn forgotten before then comes back "
    "if its conversation is ingested again"
)


_JOURNAL_REPAIR = (
    "`octobrain memory restore <version>` goes back to a kept version (`octobrain memory "
    "history`) while the table's directory is there; else restore the store directory from "
    "a backup, or `octobrain doctor --recreate consolidations` starts the consolidation "
    "journal over, empty: every memory stays as it is, and a consolidation made before then "
    "can no longer be undone (`memory unconsolidate`)"
)


_NO_VERSION_LEFT = (
    "no version of it is left on disk, so `octobrain memory restore` cannot go back to one: "
    "restore the store directory from a backup, or import an export into a new data "
    "directory (`OCTOBRAIN_DATA_DIR=<new dir> octobrain memory import <export.jsonl>`)"
)


def lost_repair(location: StoreLocation, name: str) -> str:
    """What would bring back table `name` that does not open: `repair_hint`, unless that is
    `memory restore` alone (the memories and their edges) and no version is left on disk (its
    directory gone, or no version manifest in it), where pointing there went in a circle."""
    hint = repair_hint(name)
    folder = versions_dir(location, name)
    if folder is None or hint is not _MEMORY_REPAIR:
        return hint
    try:
        left = any(entry.name.endswith(".manifest") for entry in os.scandir(folder))
    except OSError:
        left = False
    return hint if left else _NO_VERSION_LEFT


def repair_hint(name: str) -> str:
    """What would bring table `name` back."""
    if name == "forgotten_turns":
        return _FORGOTTEN_REPAIR
    if name == "consolidations":
        return _JOURNAL_REPAIR
    return _KNOWLEDGE_REPAIR if name.startswith("knowledge_") else _MEMORY_REPAIR


class TableDamaged(StorageError):
    """A table the store created earlier is missing or cannot be opened or read."""

    def __init__(
        self, location: object, name: str, reason: str, repair: str = "", doctor: bool = True
    ) -> None:
        details = " Run `octobrain doctor` for details." if doctor else ""
        super().__init__(
            f"store: table {name!r} in {location} is damaged or missing ({reason}); it is not "
            f"re-created empty.{details} To repair: {repair or repair_hint(name)}"
        )
        self.table = name
        self.reason = reason


def short_reason(exc: BaseException) -> str:
    """The first line of a LanceDB error, without its Rust source location."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if lance_panic(exc):
        text = f"LanceDB panicked reading it: {text}"
    return text.split(", /")[0][:300]


# Failures that say nothing about the table's files: access, space, and the object store's network.
_TRANSIENT = re.compile(
    r"denied|not permitted|read-only|no space|quota|credential|connect|timed? ?out|dns|dispatch"
    r"|unreachable|forbidden|file too large",
    re.I,
)


# What Lance raises as a ValueError, without its "lance error" prefix, when a data file's
# bytes are not a Lance file's (a file zeroed or overwritten at the same size): damage, not
# the caller's input.
_DAMAGED_FILE = re.compile(
    r"does not appear to be a Lance file|outside metadata region|corrupt file"
    r"|failed to decode protobuf|metadata range overflows"
    # a column's name changed in a version manifest (`columns.lacks_read_columns`)
    r"|Schema error: No field named|does not exist in table schema",
    re.I,
)


def lance_panic(exc: BaseException) -> bool:
    """Whether `exc` is LanceDB's Rust side panicking (`pyo3_async_runtimes.RustPanic`, a class
    no module exports): what reading a damaged index file can make it do."""
    return type(exc).__name__ == "RustPanic"


def read_failure(exc: BaseException, done: str = "nothing was changed") -> str | None:
    """One line for a LanceDB error that means a table's files cannot be read, else None
    (`done`: what the write it failed had done before)."""
    text = str(exc)
    if lance_panic(exc):
        pass  # (its text says only that it panicked)
    elif isinstance(exc, ValueError) and not isinstance(exc, InvalidInput):
        if not _DAMAGED_FILE.search(text):
            return None
    elif not isinstance(exc, RuntimeError | OSError) or "lance error" not in text.lower():
        return None
    if _TRANSIENT.search(text):
        return None  # permissions, space, the network: reported as such by the caller
    return (
        f"store: a table cannot be read ({short_reason(exc)}); {done}. "
        "Run `octobrain doctor` to find the damaged table and what would repair it"
    )


def check_versions(location: StoreLocation, name: str, table: lancedb.table.Table) -> None:
    """Refuse a table that lost committed versions (`lost_version`): `TableDamaged`."""
    lost = lost_version(location, name, table)
    if lost is not None:
        raise TableDamaged(location, name, lost.reason, lost.repair, lost.doctor_sees)
    sighted.sight(location, name, int(table.version), accepted=True)


def check_before_write(location: StoreLocation, *tables: lancedb.table.Table | None) -> None:
    """Refuse (`TableDamaged`) a write, on a bucket, to a table whose newest version was deleted
    since this process opened it: moved to its latest, the handle is at the version before,
    and the commit would take the lost one's place and bury it. Costs no request unless the
    version this process last knew recorded is above the table's (`HighWater.last_known`)."""
    if location.path is not None:
        return
    for table in tables:
        if table is None:
            continue
        known = location.high_water.last_known(table.name)
        if known is not None and known > int(table.version):
            check_versions(location, table.name, table)


_REWRITE = "restore it from a backup, or `octobrain doctor --rewrite-manifest` writes it again"


class ManifestDamaged(StorageError):
    """The manifest is not one (`read`): damage, not a request that failed."""


def recorded(location: StoreLocation) -> set[str] | None:
    """The tables the manifest lists, or None when the store has no manifest yet."""
    record = read(location)
    return None if record is None else set(record["tables"])


def read(location: StoreLocation) -> dict[str, Any] | None:
    """The manifest, checked (`tables` a list of names), or None when there is none yet."""
    try:
        record = location.read_json(MANIFEST)
    except (OSError, ValueError) as exc:
        raise ManifestDamaged(
            f"store: {location}: _octobrain/{MANIFEST} cannot be read ({short_reason(exc)}); "
            f"{_REWRITE}"
        ) from exc
    if record is None:
        return None
    tables = record.get("tables")
    if not isinstance(tables, list) or not all(isinstance(t, str) for t in tables):
        raise ManifestDamaged(
            f"store: {location}: _octobrain/{MANIFEST} is not a list of tables; {_REWRITE}"
        )
    return dict(record)


def record(location: StoreLocation, *names: str) -> None:
    """Add `names` to the manifest."""
    retable(location, lambda tables: tables | set(names))


def retable(location: StoreLocation, change: Callable[[set[str]], set[str]]) -> None:
    """Change the manifest's tables (read-modify-write under the manifest's own lock)."""
    with location.lock("manifest", LOCK_TIMEOUT_S):
        current = location.read_json(MANIFEST) or {}
        tables = change(set(current.get("tables") or []))
        location.write_json(MANIFEST, {**current, "tables": sorted(tables)})


def note(location: StoreLocation, key: str, value: Any) -> None:
    """Set the manifest's `key` to `value` (its tables kept)."""
    with location.lock("manifest", LOCK_TIMEOUT_S):
        current = location.read_json(MANIFEST) or {"tables": []}
        location.write_json(MANIFEST, {**current, key: value})


def mark_restore(location: StoreLocation, version: int | None) -> None:
    """Record that a restore to `version` is under way (None: that it finished). Its tables
    go back one commit at a time, so a restore cut short leaves them at different moments
    (edges of rows that are gone, a journal that names a parent no longer there) until it is
    run again: every open refuses the store meanwhile (`interrupted`)."""
    with location.lock("manifest", LOCK_TIMEOUT_S):
        current = location.read_json(MANIFEST) or {"tables": []}
        current.pop(RESTORING, None)
        if version is not None:
            current[RESTORING] = version
            current.pop(SCOPES_SPELT, None)  # (its rows may be spelt as before; not knowledge's)
        location.write_json(MANIFEST, current)


def mark_migrating(location: StoreLocation, source: str | None, tables: list[str]) -> None:
    """Record on the store a migrate fills that the copy from `source` is under way (None: that
    it finished), with the tables it will hold: a copy cut short is refused by every open
    (`interrupted`), never taken for a complete store with fewer rows."""
    with location.lock("manifest", LOCK_TIMEOUT_S):
        record: dict[str, Any] = {"tables": sorted(tables)}
        if source is not None:
            record[MIGRATING] = source
        location.write_json(MANIFEST, record)


def interrupted(record: dict[str, Any] | None) -> Problem | None:
    """A restore, or a migrate into this store, the manifest says was cut short (None: none)."""
    record = record or {}
    if record.get(MIGRATING) is not None:
        return Problem(
            f"a `memory migrate` from {record[MIGRATING]} into this store was cut short, so it "
            "holds only part of the copy",
            "run that migrate again: it starts the copy over (the source is unchanged); or "
            "delete this store's location",
        )
    version = record.get(RESTORING)
    if version is None:
        return None
    return Problem(
        f"a `memory restore {version}` was cut short, so its tables may be at different moments",
        f"run `octobrain memory restore {version} --yes` again to finish it",
    )


def open_or_create(
    db: lancedb.DBConnection,
    location: StoreLocation,
    name: str,
    make_schema: Callable[[], pa.Schema],
    lock: Any,
) -> lancedb.table.Table:
    """Open table `name`; create it (under `lock`, its family's write lock) only if this store
    never did. A table the manifest lists that does not open is `TableDamaged`. Opening an
    existing table takes no lock, so read-only stores open. A table holding a file that is
    not regular (`not_regular`) is `TableDamaged` naming it, never opened."""
    odd = not_regular(location, name)
    if odd is not None:
        raise TableDamaged(
            location,
            name,
            f"{odd} {odd.said}"
            + ", which neither octobrain nor Lance makes" * (odd.said != OTHER_SCHEME),
            f"move {odd} aside, then run `octobrain doctor` again",
        )
    try:
        table = db.open_table(name)
        check_versions(location, name, table)
        seen.note_used(location.uri)
        return table
    except ValueError as exc:
        if _TRANSIENT.search(str(exc)):
            raise StorageError(f"store: cannot open {location}: {short_reason(exc)}") from exc
        if "not found" not in str(exc):
            raise TableDamaged(location, name, short_reason(exc)) from exc
        _let_go(exc)
    except (RuntimeError, OSError) as exc:
        if read_failure(exc) is None:
            raise  # permissions, space, network: the caller reports those
        raise TableDamaged(location, name, short_reason(exc)) from exc
    with lock:
        try:
            return db.open_table(name)  # another process created it meanwhile
        except ValueError as exc:
            if name in (recorded(location) or set()):
                reason = short_reason(exc)
                raise TableDamaged(location, name, reason, lost_repair(location, name)) from exc
            _let_go(exc)
        present = set(db.list_tables().tables)
        sign = existed(db, name, present)
        if sign is not None:
            # The manifest is gone too (or predates it), but another table shows this one
            # existed: it is lost, not new.
            raise TableDamaged(
                location, name, f"its directory is gone, yet {sign}", lost_repair(location, name)
            )
        # The whole store gone: not made again, empty. (Listed again once the mark is found:
        # the other family's first open, under a lock of its own, may have made its table and
        # left the mark since the listing above; the mark is left only once a table is made.)
        if (
            not present & set(KNOWN_TABLES)
            and (why := seen.gone(location.uri)) is not None
            and not set(db.list_tables().tables) & set(KNOWN_TABLES)
        ):
            raise StorageError(f"store: {why[0]} {why[1]}")
        # A listed but unopenable directory is a creator killed before its first commit.
        mode = "overwrite" if name in present else "create"
        table = db.create_table(name, schema=make_schema(), mode=mode)
        seen.note_used(location.uri)
        # (A mark left by a table of that name before it was lost would be above this one's.)
        location.high_water.record({name: int(table.version)})
        sighted.sight(location, name, int(table.version), accepted=True)  # (a new table)
        record(location, name)
        if name in _SPELT_ON_MAKING:  # (none of its rows can be spelt as an earlier version did)
            note(location, _SPELT_ON_MAKING[name], SCOPE_SPELLING)
    return table


def _let_go(exc: BaseException) -> None:
    """Clear the frames of `exc`, a table's "not found" that LanceDB raises through its event
    loop thread: there its future and the error refer to each other, so the frames held
    (and their callers', with what each holds: the first batch of a new store's ingest,
    1,024 memories) lived until a garbage collection, not until the table was made."""
    traceback.clear_frames(exc.__traceback__)


def existed(db: lancedb.DBConnection, name: str, present: set[str]) -> str | None:
    """What shows that table `name` was made, whatever the manifest says (`MADE_AFTER`,
    `WRITTEN_AFTER`, `STAMPED_ON`), or None."""
    later = next((t for t in MADE_AFTER.get(name, ()) if t in present), None)
    if later is not None:
        return f"{later}, made after it, is here"
    witness = WRITTEN_AFTER.get(name)
    if witness is not None and witness in present and _written(db, witness):
        return f"{witness} holds writes made after it"
    bearer = STAMPED_ON.get(name)
    if bearer is not None and bearer in present:
        try:
            bearer_table = db.open_table(bearer)
        except (ValueError, RuntimeError, OSError):
            return None  # damage of its own, which opening it names
        if stamps.stamped(bearer_table, name):
            return f"{bearer} records that it was made"
    return None


def _written(db: lancedb.DBConnection, name: str) -> bool:
    """Whether table `name` was written past the empty version that made it (one that does
    not open counts as written: it is damage, which opening it names)."""
    try:
        return int(db.open_table(name).version) > 1
    except (ValueError, RuntimeError, OSError):
        return True


def adopt_if_new(db: lancedb.DBConnection, location: StoreLocation) -> dict[str, Any] | None:
    """The manifest; a store made before it records the tables that open, and a manifest that
    lost the name of a table that opens gets it back (best effort, so a read-only store
    still opens; it is recorded once writable). Listed, a table lost later is refused rather
    than made again, empty."""
    current = read(location)
    listed = set() if current is None else set(current["tables"])
    if {"memories", "relationships"} <= listed:  # (what every store has: no listing needed)
        return current
    present = set(db.list_tables().tables)
    found = []
    for name in KNOWN_TABLES:
        if name in present and name not in listed:
            try:
                db.open_table(name)
            except ValueError:
                continue
            found.append(name)
    if found:
        try:
            record(location, *found)
        except Exception as exc:
            log.info("could not record the store's tables in its manifest: %s", exc)
    return current
