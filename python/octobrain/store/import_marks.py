"""`memory import`s under way, recorded on the store, so one cut short is named and is finished
by running it again.

An import writes memories, then edges, then consolidation records, each batch a commit of its
own. A record is stored only when the import wrote every memory and edge it names (a file
cannot reach, through its journal, rows it did not bring). Run again after a kill, the import
found the memories its first run had written already held, took them for the store's own and
never stored their records: the members stayed consolidated with nothing to undo it. The mark
keeps the tables' versions from before the first run: what the store holds now and did not
hold then, that import wrote.

A record that is not one (a byte changed, cut short) is damage, never read as empty: the
imports it named would be forgotten, and each run again stores no record naming what its first
run wrote. `import` refuses it and `doctor` names it; `doctor --abandon-imports` (`abandon`)
clears it, as it lets go of an import cut short whose file is gone.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from octobrain.errors import StorageError
from octobrain.json_values import UnreadableJSON
from octobrain.store.edges import relationships_version
from octobrain.store.manifest import short_reason
from octobrain.store.manifest_repair import replace_record
from octobrain.store.sql import sql_in
from octobrain.times import utcnow

if TYPE_CHECKING:
    from octobrain.store.location import StoreLocation
    from octobrain.store.memories import MemoryStore
    from octobrain.store.pinned import Pinned

log = logging.getLogger(__name__)

RECORD = "imports.json"  # {"<key>": ImportMark fields}, under _octobrain/
_LOCK_S = 60.0
_IDS_AT_ONCE = 1024
ABANDON = "`octobrain doctor --abandon-imports`"


class RecordDamaged(StorageError):
    """The record of imports under way is not one: `reason` says how."""

    def __init__(self, location: StoreLocation, reason: str) -> None:
        super().__init__(
            f"import: {location}/_octobrain/{RECORD} {reason}: the imports cut short it "
            f"records are no longer known; nothing was imported. {ABANDON} clears it (what "
            "those imports wrote stays as it is)"
        )
        self.reason = reason


@dataclass(frozen=True)
class ImportMark:
    """One import begun and not finished: the file's `key` (a digest of its row ids), its
    `name` as given, its memory count, when it began, and the `memories` and `relationships`
    versions from before it wrote anything."""

    key: str
    name: str
    count: int
    began: str
    memories: int
    relationships: int

    @property
    def named(self) -> str:
        """Its input, in words."""
        return "standard input" if self.name == "-" else self.name


def begin(store: MemoryStore, key: str, name: str, count: int) -> tuple[ImportMark, bool]:
    """The mark of the import of the file `key`, and whether an earlier run left it: the one
    a run of it cut short (or running beside) left, whose versions come from before that run,
    else a new one recorded now."""
    location = store.location
    # (the write lock first: on a store this process cannot write it is the one that says so)
    with store.write_lock(), location.lock("imports", _LOCK_S):
        marks = _read(location)  # (`RecordDamaged`: nothing is written over it)
        if key in marks:
            return marks[key], True
        mark = ImportMark(  # (the latest versions, under the lock: none of this import's rows)
            key,
            name,
            count,
            utcnow().isoformat(timespec="seconds"),
            int(store.memories.version),
            relationships_version(store),
        )
        try:
            location.write_json(RECORD, _record({**marks, key: mark}))
        except OSError as exc:
            raise StorageError(
                f"import: cannot write {location}/_octobrain/{RECORD} ({short_reason(exc)}), "
                "where an import is recorded until it ends; nothing was imported"
            ) from None
    return mark, False


def written_before(store: MemoryStore, mark: ImportMark, ids: Sequence[str]) -> set[str]:
    """Of these memory and edge ids, those the store holds now and did not hold at the mark's
    versions: written by an earlier run of this import (or one running beside it). None of
    them when those versions are no longer kept (cleaned up after a week)."""
    try:
        return _new_since(store.pinned(mark.memories), store, ids) | _new_since(
            store.pinned_relationships(mark.relationships), store, ids, edges=True
        )
    except Exception as exc:  # (a version cleaned up: lance's own error classes)
        log.warning("import: the store as it was before this import began is not kept (%s)", exc)
        return set()


def finish(store: MemoryStore, mark: ImportMark) -> None:
    """Lift the mark: the import is done. Best effort: a mark left is named by `doctor`, and
    the next run of the import lifts it."""
    location = store.location
    try:
        with location.lock("imports", _LOCK_S):
            marks = _read(location)
            if marks.pop(mark.key, None) is not None:
                location.write_json(RECORD, _record(marks))
    except (OSError, StorageError) as exc:
        log.warning("import: done, but its mark stays (%s)", short_reason(exc))


def cut_short(location: StoreLocation) -> list[ImportMark]:
    """The imports begun on this store and not finished (a run may be under way);
    `RecordDamaged` when the record of them is not one."""
    return list(_read(location).values())


def abandon(location: StoreLocation) -> tuple[list[ImportMark], str | None]:
    """Forget every import cut short, under the store's write lock: what each wrote stays, the
    store's own from then on. Returns them, and how the record was damaged (it is then
    cleared, whatever it named). A record that cannot be replaced is a `StorageError`
    (`manifest_repair.replace_record`)."""
    try:
        if not _read(location):  # (nothing to do: no lock taken, none made on a read-only store)
            return [], None
    except RecordDamaged:
        pass
    with location.lock("write", _LOCK_S), location.lock("imports", _LOCK_S):
        try:
            marks, damaged = list(_read(location).values()), None
        except RecordDamaged as exc:
            marks, damaged = [], exc.reason
        if not marks and damaged is None:
            return [], None
        replace_record(location, RECORD, {})
    return marks, damaged


def _new_since(
    then: Pinned, store: MemoryStore, ids: Sequence[str], *, edges: bool = False
) -> set[str]:
    held = store.held_relationships if edges else store.held
    new: set[str] = set()
    for part in _parts(sorted(set(ids))):
        now = held(part)
        if now:
            before = then.scan_arrow(sql_in("id", sorted(now)), columns=["id"])["id"]
            new |= now - set(before.to_pylist())
    return new


def _parts(ids: list[str]) -> Iterator[list[str]]:
    for at in range(0, len(ids), _IDS_AT_ONCE):
        yield ids[at : at + _IDS_AT_ONCE]


def _read(location: StoreLocation) -> dict[str, ImportMark]:
    try:
        raw = location.read_json(RECORD) or {}
    except OSError as exc:  # (a folder, a FIFO in its place; this user may not read it)
        raise RecordDamaged(location, f"cannot be read ({short_reason(exc)})") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise RecordDamaged(location, "is not JSON") from None
    except UnreadableJSON as exc:  # (nested too deeply)
        raise RecordDamaged(location, exc.reason) from None
    except ValueError:  # (JSON, but not an object: `read_json`)
        raise RecordDamaged(location, "is not a JSON object") from None
    marks = {key: _mark(fields) for key, fields in raw.items()}
    wrong = next((key for key, mark in marks.items() if mark is None or mark.key != key), None)
    if wrong is not None:
        raise RecordDamaged(location, f"holds {wrong[:40]!r}, which is not a record of an import")
    return {key: mark for key, mark in marks.items() if mark is not None}


def _mark(fields: object) -> ImportMark | None:
    """The mark `fields` hold, or None when they are not one (a field missing, another type)."""
    if not isinstance(fields, dict):
        return None
    try:
        mark = ImportMark(**fields)
    except TypeError:
        return None
    texts = (mark.key, mark.name, mark.began)
    numbers = (mark.count, mark.memories, mark.relationships)
    if all(isinstance(t, str) for t in texts) and all(type(n) is int for n in numbers):
        return mark
    return None


def _record(marks: dict[str, ImportMark]) -> dict[str, Any]:
    return {key: asdict(mark) for key, mark in marks.items()}
