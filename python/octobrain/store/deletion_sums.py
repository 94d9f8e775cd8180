"""Checksums of the deletion files each table's newest version reads, recorded at its commit.

A fragment's deletion file (`_deletions/…`) lists the offsets of its deleted rows; Lance
records no checksum of it, only how many rows it deletes. One flipped bit in an offset swaps
which rows are visible (a forgotten memory shown again, another hidden) while every row's own
checksum still matches and the row counts still agree. Lance writes a new deletion file for
every change and never writes one again, so after each hold of a table's write lock that
committed (`highwater.Commits`), the SHA-256 of every deletion file the new version reads is
recorded in `_octobrain/deletions/<table>.json` (`{"format": 1, "version": V, "files":
{path: sha256}, "sum": …}`, the last the record's own): a file already recorded keeps its
entry (hashed once, at the commit that made it); a file the version no longer reads moves to
`<table>.older.json` while it is on disk (older versions still read it: `memory history` and
`restore` check it; bounded by version clean-up and `_OLDER`). That list is redone, files gone
from disk dropped, at a commit that changes which files the newest version reads, not at one
that only adds rows (which reads neither it nor the disk: a commit costs its own files).

The record is written after the commit, under the lock that orders the table's writers, and
replaced whole, not synced: a process killed in between, or a record lost or changed, leaves
files with no entry, which are unchecked (said so), never damage; the next write to the table
records them. A command's first open of the tables (when the record is of their version),
`doctor`, the check before each commit, `memory history`, and the access counts' and
compaction's writes verify the files against it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from octobrain.files import read_regular, replace_whole
from octobrain.store import operations

if TYPE_CHECKING:
    from octobrain.store.location import StoreLocation

__all__ = [
    "Records",
    "Verdict",
    "check_version",
    "damaged",
    "forget",
    "record",
    "repair",
    "verify",
]

log = logging.getLogger(__name__)

FOLDER = "deletions"  # under the store's `_octobrain/`
FORMAT = 1
_FILE_BYTES = 1 << 30  # a bitmap of 2**32 offsets is 512 MiB; more is not Lance's
_RECORD_BYTES = 16 << 20  # ~100 bytes an entry, one per fragment with deletions
_OLDER = 20_000  # files only older versions read, kept apart (~2 MB)
_OLDER_SUFFIX = ".older.json"


def record(location: StoreLocation, versions: Mapping[str, int]) -> None:
    """Record the checksums of the deletion files that `versions` (each table's version just
    committed) read. Call under the lock the tables' writers take, after the commits. Never
    raises: a record not written leaves those files unchecked, which is safe."""
    if location.path is None:
        return  # (an object store: a GET a file; not kept there)
    for name, version in versions.items():
        try:
            _record(location, name, version)
        except Exception as exc:  # never fail a commit that landed
            log.warning("could not record %s's deletion files: %s", name, exc)


def _record(location: StoreLocation, name: str, version: int) -> None:
    files = operations.data_files(location, name, version)
    if files is None:
        return
    records = Records(location, name)
    kept = records.kept or {}
    sums = {}
    for path in _deletions(files):
        # (the older files' record is read only for a file the record does not list)
        digest = kept.get(path) or records.every.get(path) or _digest(location, name, path)
        if digest is not None:
            sums[path] = digest
    if sums.keys() != kept.keys():
        # A file left the newest version or came back to it: the older files' list is redone
        # (one look on disk a file). Not at a commit that only added rows: its cost stays its
        # own files', not the older ones' (thousands after a week of access counts).
        moved = _on_disk(location, name, {p: d for p, d in records.every.items() if p not in sums})
        if moved != (records.older or {}):
            _write(location, f"{name}{_OLDER_SUFFIX}", {"format": FORMAT, "files": moved})
    if (sums == records.kept and records.version == version) or not (sums or kept):
        return  # (nothing new; or no deletion file, and no record to empty)
    _write(location, f"{name}.json", {"format": FORMAT, "version": version, "files": sums})


def forget(location: StoreLocation, names: Sequence[str]) -> None:
    """Drop the records of tables `names`, started over (`doctor --recreate`, a `migrate`
    into their place): their files are another table's. Call under their writers' lock.
    Never raises: a record left names files the new table does not read, which is safe."""
    if location.path is None:
        return
    for name in names:
        for file in (f"{name}.json", f"{name}{_OLDER_SUFFIX}"):
            try:
                (location.path / "_octobrain" / FOLDER / file).unlink(missing_ok=True)
            except OSError as exc:
                log.warning("could not drop the record of %s's deletion files: %s", name, exc)


def _write(location: StoreLocation, file: str, record: dict[str, Any]) -> None:
    """`record` with its own sum, whole, to `file` in the records' folder."""
    assert location.path is not None
    target = location.path / "_octobrain" / FOLDER / file
    target.parent.mkdir(parents=True, exist_ok=True)
    record["sum"] = _own_sum(record)
    replace_whole(target, json.dumps(record, sort_keys=True).encode())


@dataclass(frozen=True)
class Verdict:
    """What `verify` found of a table's deletion files: the first not as written (in words,
    with the version to go back to), and how many have no recorded checksum."""

    damage: str | None = None
    before: int = 0  # the version the write that made the damaged file started from
    unchecked: int = 0


class Records:
    """Table `name`'s record and the older files' (read when first needed), each read once:
    what one call's checks go by, however many files it checks."""

    def __init__(self, location: StoreLocation, name: str) -> None:
        self._location, self._name = location, name
        found = (None, None) if location.path is None else _read(location, name)
        self.version, self.kept = found

    @functools.cached_property
    def older(self) -> dict[str, str] | None:
        """The checksums of the files only versions before the newest read."""
        return None if self._location.path is None else _read_older(self._location, self._name)

    @functools.cached_property
    def every(self) -> dict[str, str]:
        """The checksums of every file recorded, the newest version's and the older ones'."""
        return {**(self.older or {}), **(self.kept or {})}


def verify(
    location: StoreLocation,
    name: str,
    files: Sequence[operations.DataFile],
    records: Records | None = None,
) -> Verdict:
    """Check the deletion files among `files` (`operations.data_files` of a version of table
    `name`) against their recorded checksums (`records`, else read now). A file gone or
    unreadable is passed over: that is `operations.checked_among`'s to say."""
    deletions = _deletions(files)
    if location.path is None or not deletions:
        return Verdict()
    records = records or Records(location, name)
    kept = records.kept
    if kept is None or not kept.keys() >= set(deletions):
        # (a version before the newest: its files may be among those only older ones read)
        if kept is None and records.older is None:
            return Verdict(unchecked=len(deletions))
        kept = records.every
    unchecked = 0
    for path in deletions:
        expected = kept.get(path)
        if expected is None:
            unchecked += 1
            continue
        got = _digest(location, name, path)
        if got is not None and got != expected:
            return Verdict(
                f"deletion file {path} is not as it was written (its checksum is not the one "
                "recorded at its commit): which rows it deletes cannot be trusted, a forgotten "
                "row may show again and another be hidden",
                _read_version(path),
                unchecked,
            )
    return Verdict(unchecked=unchecked)


def check_version(
    location: StoreLocation, name: str, version: int, *, manifest: bool = True
) -> Verdict:
    """`verify` of the deletion files `version` of table `name` reads: as its record lists
    them when it was made at that version (a few small reads), else as the version's
    manifest names them (`manifest`; protobuf imported, a tenth of a new process: not on a
    command's first read, where nothing is told then)."""
    if location.path is None:
        return Verdict()
    records = Records(location, name)
    if records.kept is None:
        return Verdict()  # (no record: nothing to check them against, nor any worth parsing)
    if records.version == version:
        return verify(location, name, [(path, 0) for path in records.kept], records)
    if not manifest:
        return Verdict()
    return verify(location, name, operations.data_files(location, name, version) or (), records)


def damaged(
    location: StoreLocation,
    name: str,
    files: Sequence[operations.DataFile],
    records: Records | None = None,
) -> str | None:
    """`verify`'s damage alone, in words (None: none found)."""
    return verify(location, name, files, records).damage


def repair(name: str, found: Verdict, otherwise: str) -> str:
    """The way back from the damaged deletion file `found` names in table `name`: the
    version before the write that made it, else `otherwise` (the table's own repair)."""
    if name != "memories" or found.before < 1:
        return otherwise
    return (
        f"`octobrain memory restore {found.before} --yes` goes back to version {found.before}, "
        "the one before the write that made that file (it undoes that write and every one "
        f"since: make them again); otherwise {otherwise}"
    )


def _deletions(files: Sequence[operations.DataFile]) -> list[str]:
    return [f[0] for f in files if f[0].startswith(operations.DELETIONS)]


def _read_version(path: str) -> int:
    """The version the write that made deletion file `path` read (`{fragment}-{read}-{id}`)."""
    try:
        return int(path.removeprefix(operations.DELETIONS).split("-")[1])
    except (IndexError, ValueError):
        return 0


def _digest(location: StoreLocation, name: str, path: str) -> str | None:
    """The SHA-256 of deletion file `path` of table `name`, or None when it cannot be read."""
    assert location.path is not None
    try:
        raw = read_regular(operations.file_path(location.path, name, path), _FILE_BYTES)[0]
    except OSError:
        return None
    return hashlib.sha256(raw).hexdigest()


def _on_disk(location: StoreLocation, name: str, entries: Mapping[str, str]) -> dict[str, str]:
    """Those of `entries` (files the newest version no longer reads) still on disk, the
    newest `_OLDER` of them (by the version their write read)."""
    assert location.path is not None
    root = location.path
    there = [p for p in entries if operations.file_path(root, name, p).exists()]
    there.sort(key=_read_version, reverse=True)
    return {p: entries[p] for p in there[:_OLDER]}


def _read(location: StoreLocation, name: str) -> tuple[int | None, dict[str, str] | None]:
    """The version table `name`'s record was made at, and its checksums by path; None for
    both when there is no record it can read (none, or not in the form written: its files
    are then unchecked, and rewritten)."""
    found = _load(location, f"{name}.json")
    if found is None:
        return None, None
    version = found.get("version")
    return (version if type(version) is int else None), found["files"]


def _read_older(location: StoreLocation, name: str) -> dict[str, str] | None:
    """The checksums by path of the deletion files only versions before table `name`'s
    newest read (`<name>.older.json`, apart: a command's first open reads the record alone)."""
    found = _load(location, f"{name}{_OLDER_SUFFIX}")
    return None if found is None else found["files"]


def _load(location: StoreLocation, file: str) -> dict[str, Any] | None:
    """Record `file` of the records' folder, its "files" keeping only checksums; None when
    it cannot be read or is not as written."""
    assert location.path is not None
    try:
        raw = read_regular(location.path / "_octobrain" / FOLDER / file, _RECORD_BYTES)
        found: Any = json.loads(raw[0])
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(found, dict) or found.get("format") != FORMAT:
        return None
    files = found.get("files")
    # (a record changed since it was written says nothing: its files are unchecked, not
    # called damaged on its word)
    if not isinstance(files, dict) or found.pop("sum", None) != _own_sum(found):
        return None
    found["files"] = {str(k): v for k, v in files.items() if isinstance(v, str)}
    return found


def _own_sum(record: Mapping[str, Any]) -> str:
    """The SHA-256 of `record` (without its own sum) as written."""
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()
