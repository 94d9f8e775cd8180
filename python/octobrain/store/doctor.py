"""`octobrain doctor`: open every table, read every fragment, check the manifest and row counts.

Each problem is reported with the table (and fragment) it is in, what is wrong and what would
repair it. Reading is done by row-address ranges (`_rowid` = fragment id << 32 | offset), split
in halves until a damaged range is one fragment, so a store with one bad file costs a few dozen
reads beyond one full scan. A file that is gone or cut short fails every read, whatever its
range (the scan opens each fragment's file before it filters): that is found by reading a
range no fragment can be in, and reported once for the table, as is a search that would
otherwise go past `_MAX_READS`. Nothing is written, so it runs on a read-only copy.
"""

from __future__ import annotations

import stat
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from octobrain.errors import StorageError
from octobrain.store import import_marks, manifest, orphan_chunks, seen
from octobrain.store.schema import (
    CHECKED,
    CHECKSUM,
    CHUNK_CHECKED,
    CHUNKS,
    EDGE_CHECKED,
    GARBLED_REPAIR,
    REEMBED,
    SOURCE_CHECKED,
    SOURCES,
    chunk_verified,
    describe_garbled,
    describe_unsound,
    edge_verified,
    source_verified,
    unsound,
    vector_matrix,
    verified,
)
from octobrain.store.table_files import NOT_REGULAR, not_regular
from octobrain.store.upkeep import KEEP_VERSIONS_FOR
from octobrain.store.versions import history_gap, lost_version

if TYPE_CHECKING:
    import lancedb

    from octobrain.store.location import StoreLocation

_FRAGMENT_BITS = 32
_MAX_FRAGMENTS = 1 << 31  # keeps every _rowid bound below 2**63
_NAMED_GARBLED = 5  # ids of damaged rows a problem names (then a count)
_MAX_READS = 256  # a bisection finds up to ~8 damaged fragments among 2**31 within this


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the store."""

    table: str
    problem: str
    repair: str
    # False for what no reader sees (edges to memories that are gone): named, repaired, but
    # not damage that stops a migrate or explains a failed command.
    damage: bool = True

    def line(self) -> str:
        return f"{self.table}: {self.problem}; repair: {self.repair}"


@dataclass
class TableCheck:
    """What was read from one table."""

    name: str
    in_manifest: bool
    opened: bool = False
    rows_counted: int | None = None  # what the table's metadata says
    rows_read: int = 0  # what reading every fragment gave
    damaged_fragments: list[int] = field(default_factory=list)
    unread: tuple[int, int] | None = None  # fragments [lo, hi) left unread (too much damage)
    # Rows read whose embedding is not unit length (`schema.unsound`), the first of them
    # (its id) and that one's length.
    unsound_vectors: int = 0
    first_unsound: tuple[str, float] | None = None
    # Memories, edges, chunks or sources that no longer match the checksum written with them
    # (`schema.verified`, `edge_verified`, `chunk_verified`, `source_verified`), and the first
    # `_NAMED_GARBLED` of them (their ids as they read now; of knowledge, their sources).
    garbled_rows: int = 0
    garbled: list[str] = field(default_factory=list)
    # Of the chunks (several to a source): every source the damaged ones are of (as a count
    # in the JSON report), so that the problem says how many more than those named there are.
    garbled_of: set[str] = field(default_factory=set)


@dataclass
class Diagnosis:
    """The whole report: `ok` when nothing is wrong."""

    store: str
    manifest: str  # "ok" | "absent" | the reason it cannot be read
    tables: list[TableCheck]
    problems: list[Problem]
    # Consolidations a killed process left half-way (pending or reverting records): no reader
    # sees them half-done, and the next consolidation finishes or undoes each. Not a problem.
    unfinished_consolidations: int = 0
    dangling_edges: int = 0  # edges to memories that are gone (`store.dangling`); a problem
    orphan_chunks: int = 0  # chunks no source row names (`store.orphan_chunks`); a problem

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "ok": self.ok,
            "manifest": self.manifest,
            "tables": [asdict(t) | {"garbled_of": len(t.garbled_of)} for t in self.tables],
            "problems": [asdict(p) for p in self.problems],
            "unfinished_consolidations": self.unfinished_consolidations,
            "dangling_edges": self.dangling_edges,
            "orphan_chunks": self.orphan_chunks,
        }


def _import_cut_short(mark: import_marks.ImportMark) -> Problem:
    named = "standard input" if mark.name == "-" else mark.name
    return Problem(
        f"_octobrain/{import_marks.RECORD}",
        f"a `memory import` of {named} ({mark.count:,} memories) begun {mark.began} was "
        "cut short (or is running now): what it wrote is stored, the rest is not",
        f"run `octobrain memory import {mark.name}` again"
        + " with the same input" * (mark.name == "-")
        + f" to finish it (without that file, delete _octobrain/{import_marks.RECORD} to "
        "leave the store as it is)",
        damage=False,
    )


def diagnose(location: StoreLocation) -> Diagnosis:
    """Check the store at `location` without changing it."""
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
                "cannot be read",
                "delete it; the next command records again the tables that open "
                "(a table that does not open is then no longer known to be missing)",
            )
        )
    problems += [_import_cut_short(mark) for mark in import_marks.cut_short(location)]
    _check_locks(location, problems)
    db = location.connect()
    present = set(db.list_tables().tables)
    if not present & set(manifest.KNOWN_TABLES) and (why := seen.gone(location.uri)):
        problems.append(_gone(why))
    names = sorted(
        (listed or set())
        | (present & set(manifest.KNOWN_TABLES))
        | {name for name in manifest.KNOWN_TABLES if manifest.existed(db, name, present)}
    )
    tables = [_check_table(db, location, name, listed, present, problems) for name in names]
    if listed is None and state == "absent" and present:
        problems.append(
            Problem(
                "_octobrain/manifest.json",
                "absent: this store does not yet record which tables it made",
                "run any octobrain command on a writable copy; it records the tables that open",
            )
        )
    dangling = _check_edge_ends(db, tables, problems, interrupted is not None)
    orphans = orphan_chunks.doctor_check(db, tables)
    if orphans.count:
        problems.append(Problem(CHUNKS, orphans.describe(), orphan_chunks.REPAIR, damage=False))
    unfinished = _unfinished(db, tables)
    return Diagnosis(str(location), state, tables, problems, unfinished, dangling, orphans.count)


# What fails while a lock file is something else, by lock (a memorize takes only `write`: a
# folder at `.manifest.lock` was said to fail every write while memorize went on working).
_LOCKED_OUT = {
    ".write.lock": "every write to the memories fails",
    ".manifest.lock": "a restore, a migrate and the first write of a table made on demand fail",
    ".knowledge.lock": "every write to the knowledge index fails",
}


def _check_locks(location: StoreLocation, problems: list[Problem]) -> None:
    """A store's lock files (`.write.lock`, …) that are something else: every write (or every
    index build) fails on a folder or waits on a FIFO there, and says to run `doctor`."""
    if location.path is None:
        return
    for path in sorted(location.path.glob(".*.lock")):
        try:
            mode = path.stat().st_mode
        except OSError:
            continue
        if not stat.S_ISREG(mode):
            what = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
            problems.append(
                Problem(
                    path.name,
                    f"is {what}, not a lock file: "
                    + _LOCKED_OUT.get(path.name, "every write that takes it fails"),
                    f"move {path} aside; the next write makes the lock file again",
                )
            )


def _gone(why: tuple[str, str]) -> Problem:
    """The problem of a store that is gone whole (`seen.gone` says why and the way out)."""
    return Problem("store", *why)


def _check_edge_ends(
    db: lancedb.DBConnection, tables: list[TableCheck], problems: list[Problem], cut_short: bool
) -> int:
    """Name the edges to memories that are gone (`store.dangling`) and count them, when the
    memories, the edges and the consolidation log (if made) all read whole: over a damaged
    table the count would be wrong, and that damage is named already. Not after a restore or
    migrate `cut_short`: it leaves such edges, and running it again is their repair."""
    from octobrain.store.dangling import sweepable
    from octobrain.store.schema import CONSOLIDATIONS, MEMORIES, RELATIONSHIPS

    checked = {t.name: t for t in tables}
    needed = [MEMORIES, RELATIONSHIPS] + [CONSOLIDATIONS] * (CONSOLIDATIONS in checked)
    damaged = {p.table for p in problems}
    if cut_short or any(
        name not in checked or not checked[name].opened or name in damaged for name in needed
    ):
        return 0
    try:
        log = db.open_table(CONSOLIDATIONS) if CONSOLIDATIONS in checked else None
        found, later = sweepable(db.open_table(MEMORIES), db.open_table(RELATIONSHIPS), log)
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


def _check_table(
    db: lancedb.DBConnection,
    location: StoreLocation,
    name: str,
    listed: set[str] | None,
    present: set[str],
    problems: list[Problem],
) -> TableCheck:
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
                f"{odd} {odd.said} (neither octobrain nor Lance makes one there; "
                + (
                    "every command that reads the table may wait on it)"
                    if odd.said == NOT_REGULAR
                    else "every write to the table fails on it)"
                ),
                f"move {odd} aside, then run `octobrain doctor` again",
            )
        )
        return check
    try:
        table = db.open_table(name)
        check.rows_counted = int(table.count_rows())
    except (ValueError, RuntimeError, OSError) as exc:
        reason = manifest.short_reason(exc)
        problems.append(
            Problem(name, f"cannot be opened ({reason})", manifest.lost_repair(location, name))
        )
        return check
    check.opened = True
    lost = lost_version(location, name, table)
    if lost is not None:
        problems.append(Problem(name, lost.reason, lost.repair))
    gap = history_gap(table, KEEP_VERSIONS_FOR)
    if gap:
        one = len(gap) == 1
        problems.append(
            Problem(
                name,
                f"version{'' if one else 's'} {manifest.version_ranges(gap)} of its history "
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
    if check.first_unsound is not None:
        problems.append(Problem(name, _unsound_problem(check), _REEMBED.get(name, repair)))
    if check.garbled:
        garbled = describe_garbled(check.garbled, check.garbled_rows, name, len(check.garbled_of))
        problems.append(Problem(name, garbled, _GARBLED_REPAIR[name]))
    if failure is None:
        # Only over rows that read: an index read over a cut data file fails too, and
        # rebuilding the index (which reads those rows) is then not the repair.
        _check_indexes(table, name, problems)
    if listed is not None and name not in listed:
        problems.append(
            Problem(name, "not in the manifest", "none needed: the next write records it")
        )
    return check


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


# A source and every chunk of it are written again from the source (a new generation).
_KNOWLEDGE_REPAIR = (
    "index the source again: `octobrain knowledge index --force SOURCE` (a stored:// note: "
    "`octobrain knowledge delete KEY`, then store it again)"
)
# The checksummed tables: the columns a row's check reads, and the check.
_CHECKED_BY: dict[str, tuple[Sequence[str], Callable[[Any], bool | None]]] = {
    "memories": (CHECKED, verified),
    "relationships": (EDGE_CHECKED, edge_verified),
    CHUNKS: (CHUNK_CHECKED, chunk_verified),
    SOURCES: (SOURCE_CHECKED, source_verified),
}
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
}


def _unsound_problem(check: TableCheck) -> str:
    assert check.first_unsound is not None
    first, length = check.first_unsound
    row = _NAMED_BY.get(check.name, ("id", "row"))[1]
    return describe_unsound(first, length, check.unsound_vectors, row)


_CHECK_BATCH = 256  # rows made Python objects at a time to check their checksums


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
    checked = _CHECKED_BY.get(check.name)
    if checked is not None and CHECKSUM in rows.column_names:
        columns, check_row = checked
        # A batch at a time: as Python objects all at once, the texts of every chunk and
        # source were held twice over (8,459 chunks and an 8 MB source: 53 MB more).
        for batch in rows.select([*columns, CHECKSUM]).to_batches(_CHECK_BATCH):
            for row in batch.to_pylist():
                if check_row(row) is False:
                    check.garbled_rows += 1
                    name = str(row[named_by])  # (a chunk by its source: several to one)
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
