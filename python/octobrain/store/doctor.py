"""`octobrain doctor`: open every table, read every fragment, check the manifest and row counts.

Each problem is reported with the table (and fragment) it is in, what is wrong and what would
repair it. The checks of one table are `doctor_tables`'s; this module holds the store's: its
manifest, lock files, temporary files killed writes left, an import cut short, edges to
memories that are gone and consolidations left half-way. Nothing is written, so it runs on a
read-only copy.
"""

from __future__ import annotations

import stat
from collections.abc import Mapping
from typing import TYPE_CHECKING

from octobrain.errors import StorageError
from octobrain.store import (
    accessed,
    highwater,
    import_marks,
    leftover_temps,
    manifest,
    manifest_repair,
    orphan_chunks,
    seen,
    self_links,
)
from octobrain.store.doctor_report import Diagnosis, Problem, TableCheck
from octobrain.store.doctor_tables import check_table
from octobrain.store.failures import LOCK_REFUSED, lock_refused
from octobrain.store.lock_file import held_shared
from octobrain.store.schema import (
    CHUNKS,
    CONSOLIDATIONS,
    MEMORIES,
    RELATIONSHIPS,
    first_columns,
    memories_schema,
    relationships_schema,
)
from octobrain.store.table_files import access_repair

if TYPE_CHECKING:
    import lancedb
    import pyarrow as pa

    from octobrain.store.location import StoreLocation


# How long `doctor` waits for a writer between two commits (a `forget`, a knowledge index)
# before it names what it found: they hold their lock milliseconds; an import, minutes.
WRITER_WAIT_S = 10.0


def _import_cut_short(mark: import_marks.ImportMark) -> Problem:
    return Problem(
        f"_octobrain/{import_marks.RECORD}",
        f"a `memory import` of {mark.named} ({mark.count:,} memories) begun {mark.began} was "
        "cut short (or is running now): what it wrote is stored, the rest is not",
        f"run `octobrain memory import {mark.name}` again"
        + " with the same input" * (mark.name == "-")
        + f" to finish it (without that file, {import_marks.ABANDON} lets go of it, and of "
        "every import named here: what they wrote stays as it is)",
        damage=False,
    )


def _imports_cut_short(location: StoreLocation) -> list[Problem]:
    """The imports cut short, or the damage of the record of them (`import_marks`)."""
    try:
        return [_import_cut_short(mark) for mark in import_marks.cut_short(location)]
    except import_marks.RecordDamaged as exc:
        return [
            Problem(
                f"_octobrain/{import_marks.RECORD}",
                f"{exc.reason}: the `memory import`s cut short it records are no longer known "
                "(one run again would not store the consolidation records naming what its "
                "first run wrote), and `memory import` refuses to run until it is repaired",
                f"{import_marks.ABANDON} clears it; what those imports wrote stays as it is",
                damage=False,
            )
        ]


def diagnose(location: StoreLocation, schemas: Mapping[str, pa.Schema] | None = None) -> Diagnosis:
    """Check the store at `location` without changing it: each table against its schema (the
    store's own tables', and those of `schemas`: the knowledge tables', which this layer does
    not know; without them, their columns that row checks read)."""
    problems: list[Problem] = []
    interrupted = None
    if location.path is not None and not location.path.exists():
        why = seen.gone(location.uri)
        if why is not None:
            problems.append(_gone(why))
        return Diagnosis(str(location), "absent (no store here yet)", [], problems)
    try:
        record = manifest.read(location)
        listed = None if record is None else set(record["tables"])
        state = "ok" if listed is not None else "absent"
        interrupted = manifest.interrupted(record)
        if interrupted is not None:
            problems.append(
                Problem("_octobrain/manifest.json", interrupted.reason, interrupted.repair)
            )
    except StorageError as exc:
        listed, state = None, str(exc)
        problems.append(
            Problem(
                "_octobrain/manifest.json",
                "cannot be read: every command refuses the store",
                f"{manifest_repair.OPTION} writes it again from the tables found (each that "
                "opens, and each another table shows was made); or restore it from a backup",
            )
        )
    problems += _imports_cut_short(location)
    looping = _check_links(location, problems)
    _check_locks(location, problems)
    try:
        accessed.waiting(location)
    except StorageError:
        unreadable = "cannot be read by this user: every command that reads the store fails on it"
        problems.append(Problem(f"_octobrain/{accessed.FOLDER}", unreadable, accessed.REPAIR))
    problems += leftover_temps.problems(location)
    marks = highwater.damaged_record(location)
    if marks is not None:
        problems.append(
            Problem(
                f"_octobrain/{highwater.MARKS}",
                f"{marks}: read as no record, so a table's newest version lost together with "
                "its latest_version_hint.json would go unnoticed",
                "none needed: the next write to each table records its version again (a "
                "folder or a link in its place: move it aside first)",
                damage=False,
            )
        )
    db = location.connect()
    try:
        present = set(db.list_tables().tables)
    except (OSError, RuntimeError):  # (Lance walks the folder: a link in it that loops)
        if not any(p.table in looping for p in problems):
            raise
        return Diagnosis(str(location), state, [], problems)
    if not present & set(manifest.KNOWN_TABLES) and (why := seen.gone(location.uri)):
        problems.append(_gone(why))
    names = sorted(
        (listed or set())
        | (present & set(manifest.KNOWN_TABLES))
        | {name for name in manifest.KNOWN_TABLES if manifest.existed(db, name, present)}
    )
    columns = {
        name: first_columns(schema)
        for name, schema in {**_own_schemas(), **(schemas or {})}.items()
    }
    tables = [
        check_table(db, location, name, listed, present, problems, columns.get(name, ()))
        for name in names
    ]
    if listed is None and state == "absent" and present:
        problems.append(
            Problem(
                "_octobrain/manifest.json",
                "absent: this store does not yet record which tables it made",
                "run any octobrain command on a writable copy; it records the tables that open",
            )
        )
    dangling = _check_edge_ends(location, db, tables, problems, interrupted is not None)
    orphans = orphan_chunks.doctor_check(db, tables)
    if orphans.count and location.path is not None:  # (an index between its two commits?)
        with held_shared(location.path, "knowledge", WRITER_WAIT_S) as held:
            if held:
                orphans = orphan_chunks.doctor_check(db, tables)
    if orphans.count:
        problems.append(Problem(CHUNKS, orphans.describe(), orphan_chunks.REPAIR, damage=False))
    unfinished = _unfinished(db, tables)
    looped = self_links.doctor_check(db, tables, problems)
    return Diagnosis(
        str(location),
        state,
        tables,
        problems,
        unfinished,
        dangling,
        orphans.count,
        len(looped.edges),
        looped.memories[: self_links.NAMED],
    )


# What fails while a lock file is something else, by lock (a memorize takes only `write`: a
# folder at `.manifest.lock` was said to fail every write while memorize went on working).
_LOCKED_OUT = {
    ".write.lock": "every write to the memories fails",
    ".manifest.lock": "a restore, a migrate and the first write of a table made on demand fail",
    ".knowledge.lock": "every write to the knowledge index fails",
}


def _own_schemas() -> dict[str, pa.Schema]:
    """The schemas of the tables this layer writes, by name."""
    from octobrain.store.forgotten import FORGOTTEN, forgotten_schema
    from octobrain.store.journal_rows import consolidations_schema

    return {
        MEMORIES: memories_schema("", 1),
        RELATIONSHIPS: relationships_schema(),
        CONSOLIDATIONS: consolidations_schema(),
        FORGOTTEN: forgotten_schema(),
    }


def _check_links(location: StoreLocation, problems: list[Problem]) -> set[str]:
    """The names of links in the store's folder that cannot be followed (one that loops):
    Lance lists the tables by walking the folder, so every command that lists them (an
    export, a forget, `doctor`) failed on it, "a table cannot be read", naming no file."""
    if location.path is None:
        return set()
    named: set[str] = set()
    try:
        paths = sorted(location.path.iterdir())
    except OSError:  # (a folder this user may not list: the tables' checks say so)
        return named
    for path in paths:
        try:
            path.stat()
        except OSError as exc:
            if not path.is_symlink():
                continue
            named.add(path.name)
            lock = path.name.startswith(".") and path.name.endswith(".lock")
            fails = _LOCKED_OUT.get(path.name, "every write that takes it fails")
            problems.append(
                Problem(
                    path.name,
                    f"is a link that cannot be followed ({exc.strerror})"
                    + (
                        f", not a lock file: {fails}, and listing the store's tables fails on it"
                        if lock
                        else ": every command that lists the store's tables (an export, a "
                        "forget, a knowledge index) fails on it"
                    ),
                    f"move {path} aside"
                    + ("; the next write makes the lock file again" if lock else ""),
                )
            )
    return named


def _check_locks(location: StoreLocation, problems: list[Problem]) -> None:
    """A store's lock files (`.write.lock`, …) that are something else: every write (or every
    index build) fails on a folder or waits on a FIFO there, and says to run `doctor`."""
    if location.path is None:
        return
    for path in sorted(location.path.glob(".*.lock")):
        fails = _LOCKED_OUT.get(path.name, "every write that takes it fails")
        try:
            mode = path.stat().st_mode
        except OSError:  # (a link that cannot be followed: `_check_links`)
            continue
        if not stat.S_ISREG(mode):
            what = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
            problems.append(
                Problem(
                    path.name,
                    f"is {what}, not a lock file: {fails}",
                    f"move {path} aside; the next write makes the lock file again",
                )
            )
        # (a store this user may not write at all, a read-only copy, is not told so lock by lock)
        elif lock_refused(path, location.path):
            problems.append(Problem(path.name, f"{LOCK_REFUSED}: {fails}", access_repair(path)))


def _gone(why: tuple[str, str]) -> Problem:
    """The problem of a store that is gone whole (`seen.gone` says why and the way out)."""
    return Problem("store", *why)


def _check_edge_ends(
    location: StoreLocation,
    db: lancedb.DBConnection,
    tables: list[TableCheck],
    problems: list[Problem],
    cut_short: bool,
) -> int:
    """Name the edges to memories that are gone (`store.dangling`) and count them, when the
    memories, the edges and the consolidation log (if made) all read whole: over a damaged
    table the count would be wrong, and that damage is named already. Not after a restore or
    migrate `cut_short`: it leaves such edges, and running it again is their repair. Edges
    found are read again holding the write lock shared (`lock_file.held_shared`): a `forget`
    running between its two commits was named as one killed there."""
    from octobrain.store.dangling import sweepable
    from octobrain.store.schema import CONSOLIDATIONS, MEMORIES, RELATIONSHIPS

    checked = {t.name: t for t in tables}
    needed = [MEMORIES, RELATIONSHIPS] + [CONSOLIDATIONS] * (CONSOLIDATIONS in checked)
    damaged = {p.table for p in problems}
    if cut_short or any(
        name not in checked or not checked[name].opened or name in damaged for name in needed
    ):
        return 0

    def read() -> tuple[list[str], set[str]]:
        log = db.open_table(CONSOLIDATIONS) if CONSOLIDATIONS in checked else None
        return sweepable(db.open_table(MEMORIES), db.open_table(RELATIONSHIPS), log)

    try:
        found, later = read()
        if (found or later) and location.path is not None:
            with held_shared(location.path, "write", WRITER_WAIT_S) as held:
                if held:
                    found, later = read()
    except (ValueError, RuntimeError, OSError) as exc:
        reason = manifest.short_reason(exc)
        problems.append(
            Problem(
                RELATIONSHIPS,
                f"edge ends cannot be checked ({reason})",
                manifest.repair_hint(RELATIONSHIPS),
            )
        )
        return 0
    if later:
        problems.append(
            Problem(
                MEMORIES,
                f"{len(later)} edge(s) made after its newest version point at memories it does "
                "not hold: versions of it are likely lost (their manifest files in _versions/ "
                "gone)",
                "put memories.lance/_versions/ back from a backup, or restore one (`memory "
                "import`); keep the edges meanwhile: they show what was lost",
            )
        )
    if found:
        problems.append(
            Problem(
                RELATIONSHIPS,
                f"{len(found)} edge(s) point at a memory that no longer exists (a `forget` "
                "killed between its two commits); searches never show them",
                "`octobrain doctor --drop-dangling-edges` deletes them now; the store's next "
                "maintenance pass (every 64 writes) does too",
                damage=False,
            )
        )
    return len(found)


def _unfinished(db: lancedb.DBConnection, tables: list[TableCheck]) -> int:
    """How many consolidation records are pending or reverting (0 when the log did not open;
    its check says why)."""
    from octobrain.store.schema import CONSOLIDATIONS, UNFINISHED

    if not any(t.name == CONSOLIDATIONS and t.opened for t in tables):
        return 0
    try:
        log = db.open_table(CONSOLIDATIONS)
        return int(log.count_rows(UNFINISHED))
    except (ValueError, RuntimeError, OSError):
        return 0
