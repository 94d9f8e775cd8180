"""`memory import`s under way, recorded on the store, so one cut short is named and is finished
by running it again.

An import writes memories, then edges, then consolidation records, each batch a commit of its
own. A record is stored only when the import wrote every memory and edge it names (a file
cannot reach, through its journal, rows it did not bring). Run again after a kill, the import
found the memories its first run had written already held, took them for the store's own and
never stored their records: the members stayed consolidated with nothing to undo it. The mark
keeps the tables' versions from before the first run: what the store holds now and did not
hold then, that import wrote.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from octobrain.errors import StorageError
from octobrain.store.edges import relationships_version
from octobrain.store.manifest import short_reason
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


def begin(store: MemoryStore, key: str, name: str, count: int) -> tuple[ImportMark, bool]:
    """The mark of the import of the file `key`, and whether an earlier run left it: the one
    a run of it cut short (or running beside) left, whose versions come from before that run,
    else a new one recorded now."""
    location = store.location
    # (the write lock first: on a store this process cannot write it is the one that says so)
    with store.write_lock(), location.lock("imports", _LOCK_S):
        marks = _read(location)
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
            location.write_json(RECORD, {**_raw(location), key: asdict(mark)})
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
            raw = _raw(location)
            if raw.pop(mark.key, None) is not None:
                location.write_json(RECORD, raw)
    except (OSError, StorageError) as exc:
        log.warning("import: done, but its mark stays (%s)", short_reason(exc))


def cut_short(location: StoreLocation) -> list[ImportMark]:
    """The imports begun on this store and not finished (a run may be under way)."""
    return list(_read(location).values())


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


def _raw(location: StoreLocation) -> dict[str, Any]:
    try:
        return location.read_json(RECORD) or {}
    except (OSError, ValueError):  # (damaged: written again whole by the next import)
        return {}


def _read(location: StoreLocation) -> dict[str, ImportMark]:
    marks = {}
    for key, fields in _raw(location).items():
        try:
            marks[key] = ImportMark(**fields)
        except TypeError:  # (not one of ours)
            continue
    return marks
