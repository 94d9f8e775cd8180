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

import json
import logging
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from octobrain.errors import InvalidInput, StorageError
from octobrain.files import read_regular
from octobrain.store import seen
from octobrain.store.lease import CLOCK_TOLERANCE_S, LEASE_TTL_S

if TYPE_CHECKING:
    import lancedb
    import pyarrow as pa

    from octobrain.store.location import StoreLocation

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
RESTORING = "restoring"  # the manifest's mark of a restore under way: the version it goes to
MIGRATING = "migrating"  # a migrate's mark on the store it fills: where it copies from
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
_LOCK_TIMEOUT_S = 2 * LEASE_TTL_S + 10
_VERSIONS = ("_versions", ".manifest")  # (folder, suffix) of a table's version manifests
_HINT = "latest_version_hint.json"  # in `_versions/`: the newest version Lance committed
# A table every store makes right after another (`MemoryStore` opens memories, then
# relationships): finding the later one means the earlier one was made too.
MADE_AFTER = {"memories": "relationships", "knowledge_sources": "knowledge_chunks"}
# A table made before any write to another (both are made when their store first opens, this
# one first or in the same step): that other one written (past its empty first version) shows
# this one existed, whatever the manifest says.
WRITTEN_AFTER = {"relationships": "memories", "knowledge_chunks": "knowledge_sources"}
# A table made later, on demand (nothing else is made with it): each write to it also stamps
# the `id` field of another table, whose own files then show it existed.
STAMPED_ON = {"forgotten_turns": "memories"}
_STAMP = "octobrain.made."

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

# What `octobrain doctor --recreate` may start over, empty: tables whose loss loses no memory
# (the memories table and its companions go back with `memory restore` instead).
RECREATABLE = {
    "knowledge": ("knowledge_sources", "knowledge_chunks"),
    "forgotten_turns": ("forgotten_turns",),
}


def repair_hint(name: str) -> str:
    """What would bring table `name` back."""
    if name == "forgotten_turns":
        return _FORGOTTEN_REPAIR
    return _KNOWLEDGE_REPAIR if name.startswith("knowledge_") else _MEMORY_REPAIR


class TableDamaged(StorageError):
    """A table the store created earlier is missing or cannot be opened or read."""

    def __init__(self, location: object, name: str, reason: str, repair: str = "") -> None:
        super().__init__(
            f"store: table {name!r} in {location} is damaged or missing ({reason}); it is not "
            f"re-created empty. Run `octobrain doctor` for details. To repair: "
            f"{repair or repair_hint(name)}"
        )
        self.table = name
        self.reason = reason


def short_reason(exc: BaseException) -> str:
    """The first line of a LanceDB error, without its Rust source location."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text.split(", /")[0][:300]


# Failures that say nothing about the table's files: access, space, and the object store's network.
_TRANSIENT = re.compile(
    r"denied|not permitted|read-only|no space|quota|credential|connect|timed? ?out|dns|dispatch"
    r"|unreachable|forbidden|file too large",
    re.I,
)


def version_ranges(numbers: Sequence[int]) -> str:
    """Sorted version numbers as ranges: "1–2, 4–8" (a version lost in between shows); past
    six ranges, the first three and the last three."""
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    shown = [f"{a}" if a == b else f"{a}–{b}" for a, b in spans]
    if len(shown) > 6:
        shown = [*shown[:3], "…", *shown[-3:]]
    return ", ".join(shown)


# What Lance raises as a ValueError, without its "lance error" prefix, when a data file's
# bytes are not a Lance file's (a file zeroed or overwritten at the same size): damage, not
# the caller's input.
_DAMAGED_FILE = re.compile(
    r"does not appear to be a Lance file|outside metadata region|corrupt file"
    r"|failed to decode protobuf",
    re.I,
)


def read_failure(exc: BaseException, done: str = "nothing was changed") -> str | None:
    """One line for a LanceDB error that means a table's files cannot be read, else None
    (`done`: what the write it failed had done before)."""
    text = str(exc)
    if isinstance(exc, ValueError) and not isinstance(exc, InvalidInput):
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


def lost_version(location: StoreLocation, name: str, table: lancedb.table.Table) -> Problem | None:
    """Whether table `name` has lost committed versions newer than the newest that opens.

    Lance writes `_versions/latest_version_hint.json` after each commit's manifest. A hint
    above the newest version that opens means a committed manifest file is gone: opening
    would silently serve (and the next write would bury) the store as it was before those
    writes. A commit killed before its manifest leaves no hint, so it is not taken for this.
    On a bucket Lance writes no hint: octobrain's own record of the versions committed under
    the write lease stands in for it (`highwater`).
    """
    if int(table.version) == 0:
        return _blank_newest(location, name)
    if location.path is None:
        return _lost_on_bucket(location, name, table)
    versions = _versions_dir(location, name)
    if versions is None:
        return None
    try:
        committed = _hinted(versions)
    except (OSError, ValueError):
        committed = None
    if committed is None or committed <= int(table.version):  # (no hint: an older Lance)
        return None
    # `table` may have opened before another process committed: look again, now that the
    # hint has been read (a version it names was committed before it was written).
    table.checkout_latest()  # type: ignore[no-untyped-call]
    opened = int(table.version)
    if committed <= opened:
        return None
    gone = _gone(committed, opened)
    return Problem(
        f"{gone} committed, but the newest version that opens is {opened}: the manifest file "
        f"of {gone} in _versions/ is gone",
        f"put {name}.lance/_versions/ back from a backup; or, to keep the table as of version "
        f"{opened} and lose what was written after it, delete {versions / _HINT}",
    )


def _blank_newest(location: StoreLocation, name: str) -> Problem:
    """Table `name` opened at version 0, which no commit makes: its newest version manifest
    was zeroed or overwritten, and Lance reads it as a manifest of no columns and no rows."""
    versions = _versions_dir(location, name)
    files = sorted(versions.glob(f"*{_VERSIONS[1]}")) if versions is not None else []
    newest = max(files, key=lambda f: _version_of(f.name), default=None)
    where = f"{name}.lance/{_VERSIONS[0]}/{newest.name}" if newest else f"{name}.lance/_versions"
    hint = f"and delete {versions / _HINT} " if versions is not None else ""
    return Problem(
        f"its newest version manifest ({where}) reads as version 0, with no columns and no "
        "rows: the file was zeroed or overwritten",
        f"put that file back from a backup; or, to keep the table as of the version before "
        f"it and lose that one commit, move the file aside {hint}(never `memory reembed`, "
        "which would rewrite the table from no rows)",
    )


def _lost_on_bucket(
    location: StoreLocation, name: str, table: lancedb.table.Table
) -> Problem | None:
    """`lost_version` on an object store, from the versions recorded under the write lease."""
    marks = location.high_water
    committed = marks.recorded(name)
    if committed is None or committed <= int(table.version):
        return None
    table.checkout_latest()  # type: ignore[no-untyped-call]
    opened = int(table.version)
    if committed <= opened:
        return None
    # A cached record may predate the table being dropped and made again (`doctor
    # --recreate`) by another process: only the record as it is now counts.
    committed = marks.recorded(name, fresh=True) or 0
    if committed <= opened or _started_over_since(marks.recorded_at(name), table, opened):
        return None
    gone = _gone(committed, opened)
    return Problem(
        f"{gone} committed (recorded in {marks.key}), but the newest version that opens is "
        f"{opened}: the manifest object of {gone} in {name}.lance/_versions/ is gone",
        f"bring the deleted object back from the bucket's object versioning; or, to keep the "
        f"table as of version {opened} and lose what was written after it, delete the object "
        f"{marks.where()} (the next write records the versions again)",
    )


def _started_over_since(at: float | None, table: lancedb.table.Table, opened: int) -> bool:
    """Whether version `opened` of `table` was committed more than `CLOCK_TOLERANCE_S` after its
    recorded entry was set at `at` (`HighWater.recorded_at`): the table was started over since
    (by a release that keeps no record), so the entry is stale, not a sign of loss (`highwater`
    says which clocks this trusts). Asked only of a table whose entry is above it: one LIST and
    manifest reads."""
    if at is None:
        return False  # an entry that does not say when it was set: taken as it stands
    try:
        versions = table.list_versions()
    except Exception as exc:  # the loss is named as it stands: never a loss let through
        log.warning("could not read the versions of %s: %s", table.name, exc)
        return False
    for version in versions:
        if int(version["version"]) == opened:
            # (Lance gives its UTC time naive, in this machine's zone)
            committed = version["timestamp"].astimezone().timestamp()
            return bool(committed > at + CLOCK_TOLERANCE_S)
    return False


def _gone(committed: int, opened: int) -> str:
    """The versions lost between the newest that opens and the newest committed."""
    if committed == opened + 1:
        return f"version {committed}"
    return f"versions {opened + 1}–{committed}"


@dataclass(frozen=True)
class Problem:
    """What is wrong with a table, and what would repair it."""

    reason: str
    repair: str


def check_versions(location: StoreLocation, name: str, table: lancedb.table.Table) -> None:
    """Refuse a table that lost committed versions (`lost_version`): `TableDamaged`."""
    lost = lost_version(location, name, table)
    if lost is not None:
        raise TableDamaged(location, name, lost.reason, lost.repair)


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


def recorded(location: StoreLocation) -> set[str] | None:
    """The tables the manifest lists, or None when the store has no manifest yet."""
    record = read(location)
    return None if record is None else set(record["tables"])


def read(location: StoreLocation) -> dict[str, Any] | None:
    """The manifest, checked (`tables` a list of names), or None when there is none yet."""
    try:
        record = location.read_json(MANIFEST)
    except (OSError, ValueError) as exc:
        raise StorageError(
            f"store: {location}: _octobrain/{MANIFEST} cannot be read ({short_reason(exc)}); "
            "restore it from a backup, or delete it: the next command records again the tables "
            "that open (`octobrain doctor` lists them)"
        ) from exc
    if record is None:
        return None
    tables = record.get("tables")
    if not isinstance(tables, list) or not all(isinstance(t, str) for t in tables):
        raise StorageError(
            f"store: {location}: _octobrain/{MANIFEST} is not a list of tables; restore it from "
            "a backup, or delete it: the next command records again the tables that open"
        )
    return dict(record)


def record(location: StoreLocation, *names: str) -> None:
    """Add `names` to the manifest."""
    _retable(location, lambda tables: tables | set(names))


def _retable(location: StoreLocation, change: Callable[[set[str]], set[str]]) -> None:
    """Change the manifest's tables (read-modify-write under the manifest's own lock)."""
    with location.lock("manifest", _LOCK_TIMEOUT_S):
        current = location.read_json(MANIFEST) or {}
        tables = change(set(current.get("tables") or []))
        location.write_json(MANIFEST, {**current, "tables": sorted(tables)})


def recreate(location: StoreLocation, what: str, damaged: set[str]) -> list[str]:
    """Start the tables of `what` (a `RECREATABLE` key) over: under their write lock, each
    one's directory is moved aside (`<name>.lance.lost-<time>`; dropped on an object store)
    and taken off the manifest, so the next use makes it empty. Only when one of them is in
    `damaged` (what `doctor` found): a table that reads whole is never thrown away. The
    store's mark (`store.seen`) is dropped only when no table of the store is left. Returns
    what was moved aside or dropped."""
    tables = RECREATABLE.get(what)
    if tables is None:
        raise InvalidInput("--recreate", f"must be one of {', '.join(RECREATABLE)}, got {what!r}")
    if not damaged & set(tables):
        raise InvalidInput(
            "--recreate",
            f"{what} opens and reads whole (`octobrain doctor`): nothing to start over",
        )
    family = "knowledge" if what == "knowledge" else "write"
    done: list[str] = []
    with location.lock(family, _LOCK_TIMEOUT_S):
        db = location.connect()
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
        # Made again, a table counts its versions from 1: its recorded newest goes first.
        location.high_water.record(dict.fromkeys(tables))
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
        _retable(location, lambda listed: listed - set(tables))
        if not set(db.list_tables().tables) & set(KNOWN_TABLES):
            # The whole store started over on purpose: an empty store is no store gone. (Else
            # the store is still there, and its mark keeps the day it was first used.)
            seen.forget(location.uri)
    return done


def mark_restore(location: StoreLocation, version: int | None) -> None:
    """Record that a restore to `version` is under way (None: that it finished). Its tables
    go back one commit at a time, so a restore cut short leaves them at different moments
    (edges of rows that are gone, a journal that names a parent no longer there) until it is
    run again: every open refuses the store meanwhile (`interrupted`)."""
    with location.lock("manifest", _LOCK_TIMEOUT_S):
        current = location.read_json(MANIFEST) or {"tables": []}
        current.pop(RESTORING, None)
        if version is not None:
            current[RESTORING] = version
        location.write_json(MANIFEST, current)


def mark_migrating(location: StoreLocation, source: str | None, tables: list[str]) -> None:
    """Record on the store a migrate fills that the copy from `source` is under way (None: that
    it finished), with the tables it will hold: a copy cut short is refused by every open
    (`interrupted`), never taken for a complete store with fewer rows."""
    with location.lock("manifest", _LOCK_TIMEOUT_S):
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
            "delete this store's location and run the migrate again (the source is unchanged)",
        )
    version = record.get(RESTORING)
    if version is None:
        return None
    return Problem(
        f"a `memory restore {version}` was cut short, so its tables may be at different moments",
        f"run `octobrain memory restore {version} --yes` again to finish it",
    )


def not_regular(location: StoreLocation, name: str) -> str | None:
    """The first file of local table `name` (its versions, data, deletions, transactions and
    each index's folder under `_indices`) that is not a regular file, as a path under the
    store, else None: Lance opens such a file itself and, a FIFO, waits on it for a writer
    for good. Listings, no `stat` (the type comes with the entry), so a table's open costs a
    few directory reads."""
    if location.path is None:
        return None
    root = location.path / f"{name}.lance"
    for folder in ("_versions", "data", "_deletions", "_transactions"):
        for entry in _entries(root / folder):
            if not entry.is_file():
                return f"{name}.lance/{folder}/{entry.name}"
    # One folder per index, its files in it (a folder in there is left to Lance).
    indices = [e for e in _entries(root / "_indices") if e.is_dir()]
    for index in indices:
        for entry in _entries(Path(index.path)):
            if not entry.is_file() and not entry.is_dir():
                return f"{name}.lance/_indices/{index.name}/{entry.name}"
    return None


def _entries(folder: Path) -> list[os.DirEntry[str]]:
    try:
        return list(os.scandir(folder))
    except OSError:
        return []  # absent, or not to be listed: opening the table says what is wrong


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
            f"{odd} is not a regular file, which neither octobrain nor Lance makes",
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
    except (RuntimeError, OSError) as exc:
        if read_failure(exc) is None:
            raise  # permissions, space, network: the caller reports those
        raise TableDamaged(location, name, short_reason(exc)) from exc
    with lock:
        try:
            return db.open_table(name)  # another process created it meanwhile
        except ValueError as exc:
            if name in (recorded(location) or set()):
                raise TableDamaged(location, name, short_reason(exc)) from exc
        present = set(db.list_tables().tables)
        sign = existed(db, name, present)
        if sign is not None:
            # The manifest is gone too (or predates it), but another table shows this one
            # existed: it is lost, not new.
            raise TableDamaged(location, name, f"its directory is gone, yet {sign}")
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
        record(location, name)
    return table


def existed(db: lancedb.DBConnection, name: str, present: set[str]) -> str | None:
    """What shows that table `name` was made, whatever the manifest says (`MADE_AFTER`,
    `WRITTEN_AFTER`, `STAMPED_ON`), or None."""
    later = MADE_AFTER.get(name)
    if later in present:
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
        if stamped(bearer_table, name):
            return f"{bearer} records that it was made"
    return None


def stamp_made(table: lancedb.table.Table, name: str, *, made: bool = True) -> None:
    """Record on `table` (`STAMPED_ON[name]`, under its write lock) that table `name` was
    made (or, with `made=False`, take that back), unless it already says so: a commit of the
    bearer's schema only, once per store (again after a `restore` or `reembed` took the stamp
    away)."""
    if stamped(table, name) != made:
        value = "1" if made else None
        table.update_field_metadata({"path": "id", "metadata": {_STAMP + name: value}})


# What a commit that only adds or takes back a stamp did, in a user's words (`memory history`).
_STAMP_NOTES = {
    "forgotten_turns": (
        "marks the store as having forgotten turns",
        "takes back the mark of forgotten turns",
    )
}


def stamp_note(probe: lancedb.table.Table, before: int, version: int) -> str:
    """What `version` of the table `probe` opens changed of its stamps since version `before`,
    in words ("" when none changed). `probe` is a handle of its own: it is moved to each."""
    stamps = []
    for at in (before, version):
        probe.checkout(at)
        stamps.append({name for name in _STAMP_NOTES if stamped(probe, name)})
    notes = [_STAMP_NOTES[n][0] for n in sorted(stamps[1] - stamps[0])]
    notes += [_STAMP_NOTES[n][1] for n in sorted(stamps[0] - stamps[1])]
    return "; ".join(notes)


def stamped(table: lancedb.table.Table, name: str) -> bool:
    """Whether `table` records that table `name` was made (`stamp_made`)."""
    schema = table.schema
    if schema.get_field_index("id") < 0:  # the version that opened has no columns (damage)
        return False
    metadata = schema.field("id").metadata or {}
    return (_STAMP + name).encode() in metadata


def _written(db: lancedb.DBConnection, name: str) -> bool:
    """Whether table `name` was written past the empty version that made it (one that does
    not open counts as written: it is damage, which opening it names)."""
    try:
        return int(db.open_table(name).version) > 1
    except (ValueError, RuntimeError, OSError):
        return True


def adopt_if_new(db: lancedb.DBConnection, location: StoreLocation) -> dict[str, Any] | None:
    """The manifest; a store made before it records the tables that open (best effort, so a
    read-only store still opens; it is adopted once writable)."""
    current = read(location)
    if current is not None:
        return current
    present = set(db.list_tables().tables)
    found = []
    for name in KNOWN_TABLES:
        if name in present:
            try:
                db.open_table(name)
            except ValueError:
                continue
            found.append(name)
    if not found:
        return None
    try:
        record(location, *found)
    except Exception as exc:
        log.info("could not record the store's tables in its manifest: %s", exc)
    return None


class StoreWatch:
    """Whether a local store's files changed underneath a long-lived process since it last
    looked: the store manifest rewritten, a known table's directory or version folder deleted
    or replaced, a file of the memories table (its data files and version manifests, which
    LanceDB writes once and never again) rewritten in place or a data file of it gone (a
    compaction's cleanup removes old ones: the reopen costs little then), or the newest version
    manifest it saw gone (LanceDB's cleanup never removes the newest: that is a lost commit,
    which the reopen then reports, `lost_version`). An ordinary commit, which only adds files,
    is no change.

    Cheap enough for every request, whatever the store's history (a week of versions can be
    tens of thousands of files): a folder is listed again only when its own `stat` changed (a
    file added or removed), a new file is looked at once, and of the files already known the
    newest manifest and `RESTAT` others in turn are looked at again; a store of up to `RESTAT`
    files has every one looked at on every call, a larger one each within a few calls. (It
    listed and looked at every file on every call: 0.3 s a call at 10,000 versions.)
    """

    RESTAT = 256

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.root = os.fspath(path)
        self._ident: tuple[tuple[int, ...], ...] | None = None
        self._files: dict[str, tuple[int, int]] = {}
        self._folders: dict[str, tuple[int, int, int]] = {}  # folder -> its own stat, listed at
        self._newest: str | None = None  # the newest version manifest seen
        self._order: list[str] = []  # `_files`' names, in the order they are looked at again
        self._turn = 0  # where the next look at known files starts
        self._gone = False  # a known data file is gone (since `changed` last said so)

    def _ident_now(self) -> tuple[tuple[int, ...], ...]:
        def ident(where: str, full: bool = False) -> tuple[int, ...]:
            try:
                st = os.stat(where)
            except OSError:
                return ()
            return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) if full else (st.st_ino,)

        stamp = [ident(os.path.join(self.root, "_octobrain", MANIFEST), full=True)]
        for name in KNOWN_TABLES:
            table = os.path.join(self.root, f"{name}.lance")
            stamp += [ident(table), ident(os.path.join(table, "_versions"))]
        return tuple(stamp)

    def _file(self, name: str) -> tuple[int, int] | None:
        try:
            st = os.stat(os.path.join(self.root, "memories.lance", name))
        except OSError:
            return None
        return (st.st_size, st.st_mtime_ns)

    def _list(self) -> bool:
        """Bring `_files` to the memories table's files now: a folder whose `stat` changed is
        listed again (files gone dropped, new ones looked at). Whether any folder was."""
        table = os.path.join(self.root, "memories.lance")
        relisted = False
        for folder, suffix in (("data", ".lance"), _VERSIONS):
            where = os.path.join(table, folder)
            try:
                st = os.stat(where)
                stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
                if self._folders.get(folder) == stamp:
                    continue
                names = {
                    f"{folder}/{e.name}"
                    for e in os.scandir(where)
                    if e.name.endswith(suffix) and not e.name.startswith("_latest")
                }
            except OSError:
                stamp, names = None, set()
                if folder not in self._folders:
                    continue  # not there before either: nothing of it is known
            relisted = True
            for name in [n for n in self._files if n.startswith(f"{folder}/") and n not in names]:
                del self._files[name]
                # A compaction's cleanup removes old data files; a hand, current ones. Either
                # way the process reopens, and reads of a current file gone then fail.
                self._gone |= folder == "data"
            for name in names - self._files.keys():
                seen = self._file(name)
                if seen is not None:
                    self._files[name] = seen
            if stamp is None:
                self._folders.pop(folder, None)
            else:
                self._folders[folder] = stamp
        if relisted:
            self._order = list(self._files)
        return relisted

    def settle(self) -> None:
        """Take the tables and the manifest as they are now, after this process's own call (a
        table it created, a manifest it rewrote). Its commits only add files, which the next
        `changed` compares with nothing; the newest version manifest is its own commit's,
        which a later loss must be told from."""
        if self._ident is not None:
            self._ident = self._ident_now()
            if self._list():
                self._newest = _newest(self._files)
            # A data file gone stays news for the next `changed`: this call's own compaction,
            # or a hand's meanwhile, which `settle` cannot tell apart (one reopen either way).

    def changed(self) -> bool:
        """Whether anything changed since the last call (the first call only looks)."""
        ident = self._ident_now()
        before = self._newest
        relisted = self._list()
        lost = before is not None and before not in self._files
        # Files known before this call, looked at again (new ones were just looked at).
        again = self._order
        if len(again) > self.RESTAT:
            start = self._turn % len(again)
            self._turn = start + self.RESTAT
            again = (again[start : start + self.RESTAT] + again[: self.RESTAT])[: self.RESTAT]
        if before is not None and before in self._files:
            again = [*again, before]
        rewritten = False
        for name in again:
            seen, now = self._files.get(name), self._file(name)
            if seen is not None and now is not None and now != seen:
                rewritten = True
                self._files[name] = now
        if relisted or lost:
            self._newest = _newest(self._files)
        changed = (self._ident is not None and ident != self._ident) or rewritten or lost
        changed |= self._gone
        self._gone = False
        self._ident = ident
        return changed


def _newest(files: dict[str, tuple[int, int]]) -> str | None:
    """The newest version manifest among `files` (`StoreWatch._files_now`'s keys)."""
    versions = [name for name in files if name.startswith("_versions/")]
    return max(versions, key=_version_of) if versions else None


def _version_of(name: str) -> int:
    """The version a `_versions/<n>.manifest` file holds (LanceDB's names count down from
    2**64 - 1 since its V2 naming, up from 1 before)."""
    number = int(name.rsplit("/", 1)[-1].split(".", 1)[0])
    return (1 << 64) - 1 - number if number >= 1 << 63 else number


def _versions_dir(location: StoreLocation, name: str) -> Path | None:
    """Where table `name` of a local store keeps its version manifests (None: object storage)."""
    return None if location.path is None else location.path / f"{name}.lance" / _VERSIONS[0]


def version_manifest(location: StoreLocation, name: str, version: int) -> Path | None:
    """The file holding `version` of table `name` (either naming, `_version_of`), or None when
    it is not there (object storage, or cleaned up)."""
    versions = _versions_dir(location, name)
    if versions is None:
        return None
    for number in ((1 << 64) - 1 - version, version):
        path = versions / f"{number}{_VERSIONS[1]}"
        if path.is_file():
            return path
    return None


def newest_on_disk(location: StoreLocation, name: str) -> int | None:
    """The newest committed version of table `name` of a local store, read from its version
    folder without LanceDB (a listing and Lance's hint file): the version an open would find.
    None where only an open can tell: object storage, no manifest in the folder, a name that is
    not Lance's, or a hint above every manifest left (a lost commit, which the open reports,
    `lost_version`)."""
    versions = _versions_dir(location, name)
    if versions is None:
        return None
    try:
        names = [n for n in os.listdir(versions) if n.endswith(_VERSIONS[1])]
        newest = max((_version_of(n) for n in names), default=0)
    except (OSError, ValueError):
        return None
    if newest <= 0:
        return None
    try:
        committed = _hinted(versions)
    except (OSError, ValueError):
        return None
    # (An older Lance writes no hint: nothing to compare, as in `lost_version`.)
    return newest if committed is None or committed <= newest else None


def _hinted(versions: Path) -> int | None:
    """The version Lance's hint in the folder `versions` names (None: there is no hint);
    `ValueError` (or `OSError`) when it does not read as one."""
    try:
        data, _ = read_regular(versions / _HINT, 1 << 20)
    except FileNotFoundError:
        return None
    try:
        return int(json.loads(data)["version"])
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{_HINT} names no version ({exc})") from None
