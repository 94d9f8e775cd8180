"""The versions of the store's tables: the newest on disk and a version's fingerprint, read
without LanceDB (what a snapshot is matched against), the versions of the memories table kept
as the undo history (what one that changed no row did, too), and the whole store brought back
to one of them, its edges and consolidation journal to the same moment (`octobrain memory
history` / `restore`)."""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from octobrain.errors import InvalidInput, StorageError
from octobrain.store import deletion_sums, manifest, operations, respell, schema, stamps, versions
from octobrain.store.operations import upkeep_note
from octobrain.store.schema import CONSOLIDATIONS, MEMORIES, RELATIONSHIPS
from octobrain.store.versions import version_ranges

if TYPE_CHECKING:
    from octobrain.store.memories import MemoryStore

CLOCK_STEP = timedelta(seconds=1)  # a step back in version times that `restore` refuses
# Tables restored together with `memories`.
COMPANION_TABLES = (RELATIONSHIPS, CONSOLIDATIONS)


def versions_on_disk(store: MemoryStore) -> tuple[int, int] | None:
    """The newest versions of `memories` and `relationships`, read from a local disk without
    LanceDB (`versions.newest_on_disk`): None where only an open can tell, and when the
    store's manifest is unreadable or says a restore or migrate was cut short (the open
    then refuses the store, naming why)."""
    if store.location.path is None:
        return None
    try:
        if manifest.interrupted(manifest.read(store.location)) is not None:
            return None
    except StorageError:
        return None
    rows = versions.newest_on_disk(store.location, MEMORIES)
    edges = versions.newest_on_disk(store.location, RELATIONSHIPS)
    return None if rows is None or edges is None else (rows, edges)


def version_fingerprint(store: MemoryStore, version: int) -> str | None:
    """What tells this store's `version` of `memories` from another store's at the same
    number: a checksum of that version's Lance manifest, which names the version's data
    files (random names), so two stores never share it, while a copy of this one (a backup
    restored) does. None on object storage, or once the version was cleaned up."""
    path = versions.version_manifest(store.location, MEMORIES, version)
    try:
        return None if path is None else format(zlib.crc32(path.read_bytes()), "08x")
    except OSError:  # cleaned up meanwhile
        return None


@dataclass(frozen=True)
class StoreVersion:
    """One committed version of the memories table."""

    version: int
    timestamp: datetime
    rows: int
    note: str = ""  # what a commit that changed no row did (`stamps.stamp_note`)
    # A data or deletion file it reads that is gone or cut, in words (`damaged_files`): it
    # cannot be read, nor restored.
    damage: str = ""


def history(store: MemoryStore, limit: int = 20) -> list[StoreVersion]:
    """The newest `limit` kept versions of the memories table, newest first."""
    # (unchecked: the versions of a store whose newest is damaged are what its repair picks from)
    versions = sorted(
        store.open_memories_unchecked().list_versions(), key=lambda v: int(v["version"])
    )
    probe = None
    shown = []
    checked: dict[tuple[str, int], str | None] = {}
    records = deletion_sums.Records(store.location, MEMORIES)  # (read once, not per file)
    for at in range(len(versions) - 1, max(len(versions) - limit, 0) - 1, -1):
        v, note = versions[at], ""
        before = versions[at - 1]["metadata"] if at else None
        # A commit that kept the row count may be the store's upkeep (an index built, files
        # compacted: the operation Lance records for it), or, when its data files are the
        # ones before it, a stamp of a table made later (`manifest.STAMPED_ON`).
        if before is not None and before.get("total_rows") == v["metadata"].get("total_rows"):
            note = upkeep_note(store.location, MEMORIES, int(v["version"]))
            if not note and v["metadata"] == before:
                probe = probe or store.open_memories_unchecked()
                note = stamps.stamp_note(probe, int(versions[at - 1]["version"]), int(v["version"]))
        shown.append(
            StoreVersion(
                int(v["version"]),
                v["timestamp"].astimezone(UTC),  # LanceDB's is naive local time
                int(v["metadata"].get("total_rows", 0)),
                note,
                damaged_files(store, int(v["version"]), checked, records),
            )
        )
    return shown


def damaged_files(
    store: MemoryStore,
    version: int,
    checked: dict[tuple[str, int], str | None],
    records: deletion_sums.Records,
) -> str:
    """The first data or deletion file `version` of `memories` reads (a local store's) that
    is gone or cut (a deletion file: or not as written, `deletion_sums`), in words, or "":
    history listed such a version as any other, and the restore the damage error sends the
    user to was refused on it. `checked` holds what was found of each file already
    (versions share most of theirs); `records`, the deletion files' checksums."""
    if store.location.path is None:
        return ""
    for file in operations.data_files(store.location, MEMORIES, version) or ():
        if file not in checked:
            checked[file] = operations.damaged_among(
                store.location, MEMORIES, [file]
            ) or deletion_sums.damaged(store.location, MEMORIES, [file], records)
        damage = checked[file]
        if damage:
            return damage
    return ""


def restore(
    store: MemoryStore, version: int, settle: Callable[[], object] | None = None
) -> StoreVersion:
    """Bring the whole store back to how it was at `version` of the memories table, as new
    commits (so a restore can itself be undone). Edges and the consolidation journal go
    back to their state at the same moment; one that did not exist yet is emptied. The
    store is marked as restoring until every table is back (`manifest.mark_restore`), so a
    restore cut short is refused by every open until it is run again. `settle` runs once
    every table is back, before the mark is lifted (a caller's fix-up of the journal)."""
    store._finishing_restore = True
    try:
        return _restore(store, version, settle)
    finally:
        store._finishing_restore = False


def _restore(store: MemoryStore, version: int, settle: Callable[[], object] | None) -> StoreVersion:
    # The model is checked against the version restored, not the store as it is: a store
    # re-embedded since goes back with the configured model set to the one it had then.
    with store.write_lock(check_model=False):
        memories = store.open_memories_unchecked()
        versions = sorted(memories.list_versions(), key=lambda v: int(v["version"]))
        numbers = [int(v["version"]) for v in versions]
        if version not in numbers:
            raise InvalidInput(
                "version",
                f"no version {version} is kept (kept: {version_ranges(numbers)}); "
                "see `octobrain memory history`",
            )
        _check_version_model(store, version)
        _check_version_deletions(store, version)
        at = numbers.index(version)
        _check_clock(store, version, versions[at:])
        _check_companions(store)
        store.check_lease()
        manifest.mark_restore(store.location, version)
        store.note_changes(everything=True)
        # Everything committed before the next memories commit belongs to this version
        # (memorize writes its edges just after its row).
        until = versions[at + 1]["timestamp"] if at + 1 < len(versions) else None
        memories.restore(version)
        store.wrote(memories)  # (a restore is a new, higher version)
        db = store.open_db()
        present = set(db.list_tables().tables)
        for name in COMPANION_TABLES:
            if name not in present:
                continue
            table = db.open_table(name)
            kept = table.list_versions()
            earlier = [v for v in kept if until is None or v["timestamp"] < until]
            if earlier and len(kept) > 1:
                table.restore(max(int(v["version"]) for v in earlier))
            elif not earlier and any(int(v["version"]) == 1 for v in kept):
                table.restore(1)  # made after that moment: back to as it was made, empty
            store.wrote(table)
        # Rows of a version before a respelling carry the scopes spelt as then: respelt before
        # the lock is let go, so no reader (a server opened before) takes them as current.
        respell.respell(store)
        if settle is not None:
            settle()
        manifest.mark_restore(store.location, None)
        store.drop_handles()
    return store.history(1)[0]


def _check_companions(store: MemoryStore) -> None:
    """Refuse, before anything changes, a restore of a store that lost a companion table
    whole: a restore takes each table back to one of its versions, and a table whose
    directory is gone has none. Marked as restoring, it failed there, and every command was
    refused until a restore that could never finish was run again."""
    listed = manifest.recorded(store.location) or set()
    present = set(store.open_db().list_tables().tables)
    for name in COMPANION_TABLES:
        if name in listed and name not in present:
            raise manifest.TableDamaged(
                store.location,
                name,
                "its directory is gone, and a restore only goes back to versions a table "
                "still has; nothing was changed",
            )


def _check_clock(store: MemoryStore, version: int, since: list[dict[str, Any]]) -> None:
    """Refuse, before anything changes, a restore whose edges and journal cannot be told:
    each companion table goes back to the version made before the next memories commit,
    by their times, so a clock stepped back (by more than `CLOCK_STEP`) since `version`
    (a correction, a daylight-saving hour: LanceDB's times are local) would pick the
    wrong ones. Memories of an hour ago came back without their edges."""
    db = store.open_db()
    start = since[0]["timestamp"]
    tables = [(MEMORIES, since)] + [
        (name, sorted(db.open_table(name).list_versions(), key=lambda v: int(v["version"])))
        for name in COMPANION_TABLES
        if name in db.list_tables().tables
    ]
    for name, kept in tables:
        for a, b in itertools.pairwise(kept):
            if a["timestamp"] >= start and b["timestamp"] < a["timestamp"] - CLOCK_STEP:
                raise InvalidInput(
                    "version",
                    f"which edges and journal records belong to version {version} cannot "
                    f"be told: the clock went back between {name} versions "
                    f"{a['version']} and {b['version']} ({a['timestamp']:%Y-%m-%d %H:%M:%S}"
                    f" → {b['timestamp']:%H:%M:%S}); restore a version made after that, or "
                    "bring the store back from an export (`memory import`); nothing was "
                    "changed",
                )


def _check_version_deletions(store: MemoryStore, version: int) -> None:
    """Refuse a restore to a version that reads a deletion file not as its commit recorded
    it (`deletion_sums`): the restore recorded it as it is now, and its wrong rows were
    served from then on, with nothing said."""
    damage = deletion_sums.check_version(store.location, MEMORIES, version).damage
    if damage is not None:
        raise InvalidInput(
            "version",
            f"version {version} cannot be restored: its {damage}; restore a version "
            "`octobrain memory history` does not mark damaged; nothing was changed",
        )


def _check_version_model(store: MemoryStore, version: int) -> None:
    """Refuse, before anything changes, a restore to a version another model embedded, or
    one whose rows cannot all be read: a data file only older versions used, deleted since,
    was restored "successfully", and every read failed after it."""
    probe = store.open_memories_unchecked()
    probe.checkout(version)
    try:
        probe.search().select(["id"]).limit(None).to_arrow()  # (every data file, one column)
    except Exception as exc:
        if manifest.read_failure(exc) is None:
            raise
        raise InvalidInput(
            "version",
            f"version {version} cannot be read ({manifest.short_reason(exc)}): a file it "
            "uses is gone or damaged; restore a version `octobrain memory history` does not "
            "mark damaged; nothing was changed",
        ) from None
    model, dim = schema.embedded_with(probe.schema)
    if model != store.model_id or dim != str(store.dim):
        raise InvalidInput(
            "version",
            f"version {version} was embedded with {model!r} (dim {dim}), but the "
            f"configured model is {store.model_id!r} (dim {store.dim}): set embedding.model "
            f"to {model!r} to restore it, or restore a version made since; nothing was "
            "changed",
        )
