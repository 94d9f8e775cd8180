"""What every commit checks first, bound as `MemoryStore`'s methods: the write lease, the data
files `memories` and `relationships` read (gone, cut, not ending in Lance's footer), and their
deletion files against the checksums recorded at their commits (`deletion_sums`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from octobrain.store import deletion_sums, manifest, operations
from octobrain.store.schema import MEMORIES, RELATIONSHIPS

if TYPE_CHECKING:
    import lancedb

    from octobrain.store.memories import MemoryStore


def check_commit(store: MemoryStore) -> None:
    """`check_lease`, and on a local store, refuse the commit (`TableDamaged`, nothing
    changed) when a data file `memories` or `relationships` reads is gone, not the size
    Lance wrote it at, or no longer ends in Lance's footer: a commit never reads the old
    files, so a write into a damaged table was acknowledged, and the repair (`memory
    restore` of a version before the damage) would drop it. Both tables, as a write to
    one (a `forget`, a memory with links) is followed by one to the other."""
    store.check_lease()
    damaged = store.damaged_data()
    if damaged is not None:
        raise damaged


def check_deletions(
    store: MemoryStore,
    *tables: lancedb.table.Table,
    read_manifest: bool = True,
    done: str = "; nothing was changed",
) -> None:
    """Refuse (`TableDamaged`) when a deletion file `tables` (else both) read is not as
    its commit recorded it: a write that calls no `check_commit` (an access count, a
    compaction) would carry its wrong offsets on, or fold them into the rows for good."""
    for table in tables or (store.memories, store.relationships):
        found = deletion_sums.check_version(
            store.location, table.name, int(table.version), manifest=read_manifest
        )
        refused = _deletion_damage(store, table.name, found, done)
        if refused is not None:
            raise refused


def _deletion_damage(
    store: MemoryStore, name: str, found: deletion_sums.Verdict, done: str = ""
) -> manifest.TableDamaged | None:
    """The error naming the damaged deletion file `found` names, and the way back."""
    if found.damage is None:
        return None
    repair = deletion_sums.repair(name, found, manifest.repair_hint(name))
    return manifest.TableDamaged(store.location, name, f"{found.damage}{done}", repair)


def damaged_data(
    store: MemoryStore, done: str = "nothing was changed"
) -> manifest.TableDamaged | None:
    """The first data file `memories` or `relationships` reads (a local store's) that is
    gone, not the size Lance wrote it at, or no longer ends in Lance's footer, as the error
    naming it and its table; None when there is none (a stat of each file, no read)."""
    if store.location.path is None:
        return None
    for name, table in ((MEMORIES, store.memories), (RELATIONSHIPS, store.relationships)):
        files = operations.data_files(store.location, name, table.version) or ()
        damage = operations.damaged_among(store.location, name, files)
        if damage is not None:
            return manifest.TableDamaged(store.location, name, f"{damage}; {done}")
        # (a write over it would carry its wrong offsets into the next deletion file)
        found = deletion_sums.verify(store.location, name, files)
        refused = _deletion_damage(store, name, found, f"; {done}")
        if refused is not None:
            return refused
    return None
