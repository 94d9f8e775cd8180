"""`octobrain doctor`'s check of one table: it opens, its history is whole, every fragment
reads, its row count, vectors, checksums and indexes agree with what was written.

Reading is done by row-address ranges (`_rowid` = fragment id << 32 | offset), split in halves
until a damaged range is one fragment, so a store with one bad file costs a few dozen reads
beyond one full scan. A file that is gone or cut short fails every read, whatever its range
(the scan opens each fragment's file before it filters): that is found by reading a range no
fragment can be in, and reported once for the table, as is a search that would otherwise go
past `_MAX_READS`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from octobrain.store import deletion_sums, manifest, operations, row_sums
from octobrain.store.columns import dim_unlike_vectors, lacks_read_columns
from octobrain.store.doctor_report import Problem, TableCheck
from octobrain.store.forgotten import FORGOTTEN, FORGOTTEN_CHECKED, FORGOTTEN_FIELDS
from octobrain.store.journal_rows import RECORD_CHECKED, records_damaged
from octobrain.store.schema import (
    CHECKED,
    CHECKSUM,
    CHUNK_CHECKED,
    CHUNKS,
    CONSOLIDATIONS,
    EDGE_CHECKED,
    GARBLED_REPAIR,
    REEMBED,
    SOURCE_CHECKED,
    SOURCES,
    describe_garbled,
)
from octobrain.store.table_files import (
    NOT_A_FOLDER,
    NOT_REGULAR,
    access_repair,
    not_regular,
    unreadable,
)
from octobrain.store.unit_vectors import describe_unsound, unsound, vector_matrix
from octobrain.store.upkeep import KEEP_VERSIONS_FOR
from octobrain.store.versions import history_gap, lost_version, version_ranges

if TYPE_CHECKING:
    import lancedb
    import numpy.typing as npt
    import pyarrow as pa

    from octobrain.store.location import StoreLocation

_FRAGMENT_BITS = 32
_MAX_FRAGMENTS = 1 << 31  # keeps every _rowid bound below 2**63
_NAMED_GARBLED = 5  # ids of damaged rows a problem names (then a count)
_MAX_READS = 256  # a bisection finds up to ~8 damaged fragments among 2**31 within this
# What a table's file that Lance does not make there does (`table_files.not_regular`).
_ODD_EFFECT = {
    NOT_REGULAR: " (neither octobrain nor Lance makes one there; every command that reads the "
    "table may wait on it)",
    NOT_A_FOLDER: " (neither octobrain nor Lance makes one there; every write to the table "
    "fails on it)",
}


def check_table(
    db: lancedb.DBConnection,
    location: StoreLocation,
    name: str,
    listed: set[str] | None,
    present: set[str],
    problems: list[Problem],
    columns: Sequence[str] = (),
) -> TableCheck:
    """Check table `name` (`listed`: the manifest's tables, None when it cannot say; `present`:
    the tables the store holds; `columns`: those every version of it has), adding what is
    wrong to `problems`."""
    check = TableCheck(name, listed is not None and name in listed)
    repair = manifest.repair_hint(name)
    if name not in present:
        gone = "missing: the store created it, its directory is gone"
        problems.append(Problem(name, gone, manifest.lost_repair(location, name)))
        return check
    odd = not_regular(location, name)
    if odd is not None:  # Lance would wait on a FIFO for a writer: never opened
        problems.append(
            Problem(
                name,
                f"{odd} {odd.said}" + _ODD_EFFECT.get(odd.said, ""),
                f"move {odd} aside, then run `octobrain doctor` again",
            )
        )
        return check
    locked = unreadable(location, name)
    if locked is not None:  # Lance says "Permission denied", naming no file
        problems.append(
            Problem(
                name,
                f"{locked} cannot be read by this user (its mode or owner); every command "
                "that reads the table fails on it",
                f"{access_repair(locked)}, then run `octobrain doctor` again",
            )
        )
        return check
    try:
        table = db.open_table(name)
        lost = lost_version(location, name, table)  # (it may move `table` to a later commit)
        _pin(table)
        check.rows_counted = int(table.count_rows())
    except (ValueError, RuntimeError, OSError) as exc:
        reason = manifest.short_reason(exc)
        problems.append(
            Problem(name, f"cannot be opened ({reason})", manifest.lost_repair(location, name))
        )
        return check
    check.opened = True
    need = list(columns) if table.schema.names else []  # (none: version 0, said below)
    checked = CHECKED_BY.get(name)
    later: list[str] = []  # (columns a table made before them lacks, its checksum's)
    if checked is not None:
        later = [c for c in (*checked[0], CHECKSUM) if c not in need]
        if CHECKSUM in table.schema.names:  # (the later ones too)
            need, later = need + later, []
    lacks = lacks_read_columns(table, need, later)
    if lacks is not None:  # every read naming the column fails, the checks below too
        said, kept = lacks  # (kept: the version that had them, which a restore goes back to)
        fix = repair if kept is not None else _NO_VERSION_BEFORE.get(name, repair)
        problems.append(Problem(name, said, fix))
        return check
    unlike = dim_unlike_vectors(table.schema)
    if unlike is not None:  # every command refuses the store as embedded at another size
        problems.append(Problem(name, unlike, REEMBED if name == "memories" else repair))
    if lost is not None:
        problems.append(Problem(name, lost.reason, lost.repair))
    gap = history_gap(table, KEEP_VERSIONS_FOR)
    if gap:
        one = len(gap) == 1
        problems.append(
            Problem(
                name,
                f"version{'' if one else 's'} {version_ranges(gap)} of its history "
                f"{'is' if one else 'are'} gone while the versions around "
                f"{'it' if one else 'them'} are kept (a file of _versions/ deleted, not the "
                "cleanup, which removes only the oldest): `memory restore` cannot go back "
                f"to {'it' if one else 'them'}",
                f"put the files of {name}.lance/_versions/ back from a backup; reads and "
                "writes use the newest version, which is whole",
                damage=False,
            )
        )
    failure = _read(table, 0, _MAX_FRAGMENTS, check)
    while failure is not None and _moved_on(table):
        check.rows_counted = int(table.count_rows())
        failure = _read(table, 0, _MAX_FRAGMENTS, check)
    if failure is not None:
        # A range no fragment is in: failing too, the damage is not in one fragment's rows.
        unplaced = _read(table, _MAX_FRAGMENTS - 1, _MAX_FRAGMENTS, check)
        if unplaced is not None:
            problems.append(Problem(name, f"cannot be read ({unplaced})", repair))
            return check
        reads = [_MAX_READS]
        _bisect(table, 0, _MAX_FRAGMENTS, check, problems, repair, reads)
    if (
        not check.damaged_fragments
        and check.unread is None
        and check.rows_read != check.rows_counted
    ):
        problems.append(
            Problem(
                name,
                f"its metadata counts {check.rows_counted} rows but {check.rows_read} were read",
                repair,
            )
        )
    _check_deletions(location, table, name, check, problems)
    if check.first_unsound is not None:
        problems.append(Problem(name, _unsound_problem(check), _REEMBED.get(name, repair)))
    if check.garbled:
        garbled = describe_garbled(check.garbled, check.garbled_rows, name, len(check.garbled_of))
        problems.append(Problem(name, garbled, _GARBLED_REPAIR[name]))
    if failure is None:
        # Only over rows that read: an index read over a cut data file fails too, and
        # rebuilding the index (which reads those rows) is then not the repair.
        indexed: list[Problem] = []
        _check_indexes(table, name, indexed)
        if indexed and _moved_on(table):  # (its files cleaned up with the pinned version)
            indexed.clear()
            _check_indexes(table, name, indexed)
        problems += indexed
    if listed is not None and name not in listed:
        problems.append(
            Problem(name, "not in the manifest", "none needed: the next write records it")
        )
    return check


def _pin(table: lancedb.table.Table) -> None:
    """Read `table` at the version it is at from here on: a local store's connection sees each
    commit as it lands, so a write of another process (the resident service indexing a
    document) landing between the row count and the scan was reported as damage, with a
    repair that empties the table. (Version 0 is no commit: `lost_version` names it.)"""
    if int(table.version):
        table.checkout(int(table.version))


def _moved_on(table: lancedb.table.Table) -> bool:
    """Move `table` to its newest version, pinned, when a later one was committed since it was
    pinned; whether it moved. The resident service's maintenance pass
    compacts a table and cleans up the versions past `KEEP_VERSIONS_FOR`: a version pinned
    as the newest, a week old, is then cleaned up with its data files while it is read, which
    was reported as "cannot be read (… Not found …)" with a restore as its repair. A read
    failing at the newest version is damage. (A failed read counts no rows.)"""
    pinned = int(table.version)
    try:
        table.checkout_latest()  # type: ignore[no-untyped-call]
        _pin(table)
    except (ValueError, RuntimeError, OSError):  # (its newest manifest: the read says why)
        return False
    return int(table.version) > pinned


def _check_indexes(table: lancedb.table.Table, name: str, problems: list[Problem]) -> None:
    """Read each index of `table` whole: a damaged or lost index file fails the reads that
    would use it (a lookup by id, a scope filter) while a full scan reads every row fine.
    A text index is asked for every value (`>= ''`): a lookup of one value reads only the
    page that would hold it, so a cut page of an id index went unnoticed."""
    import numpy as np
    import pyarrow as pa

    repair = (
        "`octobrain memory reindex` drops the indexes and builds them again"
        if name == "memories"
        else manifest.repair_hint(name)
    )
    try:
        indexes = list(table.list_indices())
    except (ValueError, RuntimeError, OSError) as exc:
        problems.append(
            Problem(name, f"its indexes cannot be listed ({manifest.short_reason(exc)})", repair)
        )
        return
    for index in indexes:
        column = index.columns[0]
        kind = table.schema.field(column).type
        try:
            if pa.types.is_fixed_size_list(kind):  # a vector index: one nearest neighbour
                probe = np.zeros(kind.list_size, dtype=np.float32)
                table.search(probe, vector_column_name=column).limit(1).to_arrow()
            elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
                table.search().where(f"{column} >= ''").select([column]).limit(1).to_arrow()
            else:
                continue  # octobrain indexes only text and vectors
        except Exception as exc:  # (LanceDB panics on some damaged index files)
            if not (
                isinstance(exc, ValueError | RuntimeError | OSError) or manifest.lance_panic(exc)
            ):
                raise
            reason = manifest.short_reason(exc)
            problems.append(
                Problem(name, f"index {index.name} on {column} cannot be read ({reason})", repair)
            )


# What writes every embedding of a table again (the tables with an `embedding` column).
_REEMBED = {
    "memories": REEMBED,
    "knowledge_chunks": "index the source again: `octobrain knowledge index --force SOURCE`",
}
# The column naming a row of each such table in the report (a chunk by its source).
_NAMED_BY = {
    "memories": ("id", "memory"),
    "knowledge_chunks": ("uri", "a chunk of"),
    "knowledge_sources": ("uri", "source"),
}


# A table whose only kept version is damaged: no `memory restore` goes back before it.
_ONLY_A_BACKUP = (
    "restore the store directory from a backup, or `octobrain memory import` an export made "
    "before the damage into a new store (no version before this one is kept to restore)"
)
_NO_VERSION_BEFORE = {"memories": _ONLY_A_BACKUP, "relationships": _ONLY_A_BACKUP}
# A source and every chunk of it are written again from the source (a new generation).
_KNOWLEDGE_REPAIR = (
    "index the source again: `octobrain knowledge index --force SOURCE` (a stored:// note: "
    "`octobrain knowledge delete KEY`, then store it again)"
)
# The checksummed tables: the columns a row's check reads, and the check (which rows of a
# table of them no longer match their checksum: every row at once, `row_sums`).
CHECKED_BY: dict[str, tuple[Sequence[str], Callable[[pa.Table], npt.NDArray[np.bool_]]]] = {
    "memories": (CHECKED, row_sums.memories_damaged),
    "relationships": (EDGE_CHECKED, row_sums.edges_damaged),
    CHUNKS: (CHUNK_CHECKED, row_sums.chunks_damaged),
    SOURCES: (SOURCE_CHECKED, row_sums.sources_damaged),
    CONSOLIDATIONS: (RECORD_CHECKED, records_damaged),
    FORGOTTEN: (
        FORGOTTEN_CHECKED,
        partial(row_sums.damaged, fields=FORGOTTEN_FIELDS, at="forgotten_at"),
    ),
}
# The journals `doctor --forget-damaged` takes damaged rows out of (`recreate`'s
# `forget_damaged_records`): what each one's loss means, said in its repair and by the repair.
JOURNALS = {
    CONSOLIDATIONS: "the consolidation it recorded stays as it is, and can no longer be undone",
    FORGOTTEN: "the turn it kept forgotten comes back if its conversation is ingested again",
}


def _forget_damaged(journal: str) -> str:
    said = JOURNALS[journal]
    return f"`octobrain doctor --forget-damaged` deletes the damaged rows alone (of each, {said})"


_GARBLED_REPAIR = {
    "memories": GARBLED_REPAIR,
    "relationships": (
        "`octobrain memory forget <id> --yes` of the memory at either end deletes the link "
        "with it, and `octobrain memory import` of an export made before the damage stores both "
        "again (a link whose end reads as no memory: `octobrain doctor --drop-dangling-edges`); "
        "otherwise restore the store directory from a backup"
    ),
    CHUNKS: _KNOWLEDGE_REPAIR,
    SOURCES: _KNOWLEDGE_REPAIR,
    # (every version since it was written reads the same data file: no restore brings it back)
    CONSOLIDATIONS: (
        "restore the store directory from a backup, or `octobrain memory import` an export "
        f"made before the damage into a new store; otherwise {_forget_damaged(CONSOLIDATIONS)}, "
        "or `octobrain doctor --recreate consolidations` starts the journal over (the memories "
        "stay as they are; no consolidation made before can be undone)"
    ),
    FORGOTTEN: f"{_forget_damaged(FORGOTTEN)}; otherwise {manifest.repair_hint(FORGOTTEN)}",
}


def _check_deletions(
    location: StoreLocation,
    table: lancedb.table.Table,
    name: str,
    check: TableCheck,
    problems: list[Problem],
) -> None:
    """Name a deletion file of the table's version that is not as its commit recorded it
    (`deletion_sums`): its rows read and count as before, the wrong ones. Those with no
    record are counted as unchecked (written by an octobrain before it, or a write killed
    before its record): not damage."""
    if location.path is None:
        return
    files = operations.data_files(location, name, int(table.version)) or ()
    found = deletion_sums.verify(location, name, files)
    check.unchecked_deletions = found.unchecked
    if found.damage is not None:
        fix = deletion_sums.repair(name, found, manifest.repair_hint(name))
        problems.append(Problem(name, found.damage, fix))


def _unsound_problem(check: TableCheck) -> str:
    assert check.first_unsound is not None
    first, length = check.first_unsound
    row = _NAMED_BY.get(check.name, ("id", "row"))[1]
    return describe_unsound(first, length, check.unsound_vectors, row)


def _read(table: lancedb.table.Table, lo: int, hi: int, check: TableCheck) -> str | None:
    """Read fragments [lo, hi) into `check.rows_read`, counting the rows whose embedding is
    not unit length (every embedder stores unit vectors: Lance keeps no checksum of its data
    pages, so a changed byte there reads back fine); the reason when the read fails."""
    where = f"_rowid >= {lo << _FRAGMENT_BITS} AND _rowid < {hi << _FRAGMENT_BITS}"
    try:
        rows = table.search().where(where).limit(None).to_arrow()
    except (ValueError, RuntimeError, OSError) as exc:
        return manifest.short_reason(exc)
    check.rows_read += rows.num_rows
    named_by = _NAMED_BY.get(check.name, ("id", ""))[0]
    if "embedding" in rows.column_names and named_by in rows.column_names and rows.num_rows:
        found = unsound(vector_matrix(rows.column("embedding"), rows.num_rows))
        if found is not None:
            count, at, length = found
            if check.first_unsound is None:
                check.first_unsound = (str(rows.column(named_by)[at]), length)
            check.unsound_vectors += count
    checked = CHECKED_BY.get(check.name)
    if checked is not None and CHECKSUM in rows.column_names:
        columns, damaged = checked
        for at in np.flatnonzero(damaged(rows.select([*columns, CHECKSUM]))).tolist():
            check.garbled_rows += 1
            name = str(rows.column(named_by)[at])  # (a chunk by its source: several to one)
            if check.name == CHUNKS:
                check.garbled_of.add(name)
            if len(check.garbled) < _NAMED_GARBLED and name not in check.garbled:
                check.garbled.append(name)
    return None


def _bisect(
    table: lancedb.table.Table,
    lo: int,
    hi: int,
    check: TableCheck,
    problems: list[Problem],
    repair: str,
    reads: list[int],
) -> None:
    """Split the failing range [lo, hi) until each damaged fragment is found, within the reads
    left in `reads[0]`; past them the rest of the range is reported unread, once."""
    mid = (lo + hi) // 2
    for a, b in ((lo, mid), (mid, hi)):
        if check.unread is not None:
            return
        if reads[0] <= 0:
            check.unread = (a, hi)
            problems.append(
                Problem(check.name, f"fragments {a}–{hi - 1} hold damage not narrowed down", repair)
            )
            return
        reads[0] -= 1
        reason = _read(table, a, b, check)
        if reason is None:
            continue
        if b - a > 1:
            _bisect(table, a, b, check, problems, repair, reads)
        else:
            check.damaged_fragments.append(a)
            problems.append(Problem(check.name, f"fragment {a} cannot be read ({reason})", repair))
