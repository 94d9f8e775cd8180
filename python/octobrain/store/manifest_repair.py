"""`octobrain doctor --rewrite-manifest`: the store's record of its tables
(`_octobrain/manifest.json`, `store.manifest`) written again when it cannot be read.

Every command refuses a store whose manifest does not read (a table it lists and cannot open
would otherwise pass for one never made). Deleting it by hand was the way out; this writes it
again from what the store shows, under the locks its writers take, as the first open of a store
made before the manifest records it (`manifest.adopt_if_new`): each table that opens, and each
that another table shows was made (`manifest.existed`: so one lost stays refused, never made
again, empty). A mark of a restore or migrate under way it held is lost with it, as it was.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from octobrain.errors import StorageError
from octobrain.store.manifest import (
    KNOWN_TABLES,
    LOCK_TIMEOUT_S,
    MANIFEST,
    ManifestDamaged,
    existed,
    read,
    short_reason,
)

if TYPE_CHECKING:
    import lancedb

    from octobrain.store.location import StoreLocation

OPTION = "`octobrain doctor --rewrite-manifest`"


def rewrite(location: StoreLocation) -> list[str] | None:
    """Write the manifest again when it cannot be read, under the store's write lock and the
    manifest's own: the tables it now lists (None: it reads, nothing was written). A manifest
    that cannot be replaced is a `StorageError` (`replace_record`)."""
    if not _damaged(location):  # (nothing to do: no lock taken, none made on a read-only store)
        return None
    with location.lock("write", LOCK_TIMEOUT_S), location.lock("manifest", LOCK_TIMEOUT_S):
        if not _damaged(location):
            return None
        db = location.connect()
        present = set(db.list_tables().tables)
        tables = [
            name
            for name in KNOWN_TABLES
            if (name in present and _opens(db, name)) or existed(db, name, present)
        ]
        replace_record(location, MANIFEST, {"tables": tables})
    return tables


def replace_record(location: StoreLocation, name: str, record: dict[str, Any]) -> None:
    """Write the record `name` under `_octobrain/` over one that cannot be read, for a `doctor`
    repair; one that cannot be replaced (a folder in its place) is a `StorageError` saying to
    move it aside."""
    try:
        location.write_json(name, record)
    except OSError as exc:
        raise StorageError(
            f"doctor: cannot replace {location}/_octobrain/{name} ({short_reason(exc)}); "
            "move it aside, then run `octobrain doctor` again"
        ) from None


def _damaged(location: StoreLocation) -> bool:
    try:
        read(location)
    except ManifestDamaged:  # (a request that failed is raised as it is)
        return True
    return False


def _opens(db: lancedb.DBConnection, name: str) -> bool:
    try:
        db.open_table(name)
    except (ValueError, RuntimeError, OSError):
        return False
    return True
