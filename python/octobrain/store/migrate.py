"""Copy a whole store (memories, links, the consolidation journal, knowledge) to another location.

Used to move a local store to object storage for a team, or back. Every table is copied with its
schema (including the embedding model stamp), then verified: the same number of rows and the
same set of ids in each table. The source is only read, and only when `doctor` finds it whole;
the destination must hold no tables yet.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from octobrain.errors import InvalidInput, StorageError
from octobrain.store import deletion_sums, manifest
from octobrain.store.location import StoreLocation

if TYPE_CHECKING:
    import lancedb
    import pyarrow as pa

BATCH_ROWS = 2048


@dataclass(frozen=True)
class Copied:
    """One table copied and verified."""

    table: str
    rows: int


def plan(source: StoreLocation, schemas: Mapping[str, pa.Schema] | None = None) -> dict[str, int]:
    """The tables of `source` and their row counts, in copy order (for a progress total). A
    table that cannot be opened is refused as `migrate` refuses a damaged source (it was
    LanceDB's traceback); `schemas` as `migrate` takes them."""
    db = source.connect()
    try:
        return {name: db.open_table(name).count_rows() for name in sorted(db.list_tables().tables)}
    except (ValueError, RuntimeError, OSError):
        _check_source(source, schemas)  # (names the damage, when `doctor` finds it)
        raise


def migrate(
    source: StoreLocation,
    target: StoreLocation,
    *,
    schemas: Mapping[str, pa.Schema] | None = None,
    progress: Callable[[int], None] = lambda _n: None,
) -> list[Copied]:
    """Copy every table of `source` into `target` and verify it; `progress(n)` per batch of rows.
    The source is first checked as `doctor` checks it, each table against its schema: this
    layer's own, and `schemas` (the knowledge tables', which this layer does not know).

    Raises `InvalidInput` (field `to`) when the target already holds tables or is the source,
    and `StorageError` when a copied table does not match its source. A target that holds a
    copy of `source` a migrate left cut short (marked as such, so no command has used it) is
    started over: running the migrate again finishes it.
    """
    src_db, dst_db = source.connect(), open_target(source, target)
    _check_empty(source, target, dst_db)
    copied = []
    # The source's write locks keep octobrain writers out while it is read, so the copy is one
    # consistent state; the target's keeps a second migration out.
    with source.lock("write", -1), source.lock("knowledge", -1), target.lock("write", -1):
        for name in _check_empty(source, target, dst_db):  # (again, under the lock)
            dst_db.drop_table(name)
        _check_source(source, schemas)
        names = sorted(src_db.list_tables().tables)
        manifest.mark_migrating(target, str(source), names)  # until the last table is verified
        deletion_sums.forget(target, names)  # (a store deleted here left them: `highwater`)
        versions = {}
        for name in names:
            data = src_db.open_table(name).to_arrow()  # read under the lock: what is copied
            table = dst_db.create_table(name, schema=data.schema)
            for start in range(0, data.num_rows, BATCH_ROWS):
                batch = data.slice(start, BATCH_ROWS)
                table.add(batch)
                progress(batch.num_rows)
            _verify(name, data, dst_db.open_table(name).to_arrow(), target)
            copied.append(Copied(name, data.num_rows))
            versions[name] = int(table.version)
        # The newest versions (over any record a store deleted here left: `highwater`).
        target.high_water.record(versions)
        manifest.mark_migrating(target, None, names)
    return copied


def _check_empty(
    source: StoreLocation, target: StoreLocation, dst_db: lancedb.DBConnection
) -> list[str]:
    """The tables of `target` a cut-short migrate from `source` left (to drop); `InvalidInput`
    when it holds any other."""
    existing = sorted(dst_db.list_tables().tables)
    if not existing:
        return []
    record = target.read_json(manifest.MANIFEST)
    if (record or {}).get(manifest.MIGRATING) == str(source):
        return existing
    cut_short = manifest.interrupted(record)
    raise InvalidInput(
        "to",
        f"must be an empty location; {target} already holds {', '.join(existing)}"
        + (f" ({cut_short.reason}: {cut_short.repair})" if cut_short else ""),
    )


def check_target_text(target: str) -> None:
    """Refuse a destination given as text that names no place: empty, blank or holding control
    characters (an empty path would be the working directory)."""
    if not target.strip():
        raise InvalidInput("to", "must be a local directory or an object-store URI, got nothing")
    if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in target):
        raise InvalidInput("to", "must not contain control characters")
    try:
        target.encode("utf-8")
    except UnicodeEncodeError:  # bytes that are not UTF-8, passed through by the shell
        raise InvalidInput("to", "must be valid UTF-8") from None
    from octobrain.config.rules import storage_uri_rule

    # (as `storage.uri` is checked: `ftp://…` failed in LanceDB, exit 1, "No object store …")
    if (problem := storage_uri_rule(target)) is not None:
        raise InvalidInput("to", problem)


def open_target(source: StoreLocation, target: StoreLocation) -> lancedb.DBConnection:
    """A connection to `target` (a local directory is made), refused (`InvalidInput`, field
    `to`) when it is the source, inside or around a local source, or cannot be made."""
    _check_target(source, target)
    if target.path is not None and os.path.exists(target.path) and not target.path.is_dir():
        raise InvalidInput("to", f"cannot create the directory {target}: a file is there")
    try:
        return target.connect()
    except OSError as exc:  # the destination directory cannot be made (a file, too long, ...)
        raise InvalidInput("to", f"cannot create the directory {target}: {_reason(exc)}") from exc


def _check_target(source: StoreLocation, target: StoreLocation) -> None:
    """Refuse the source itself, and a local destination inside the source's directory (deleting
    the old store would delete the copy) or holding it (the copy's tables beside the store)."""
    if source.uri.rstrip("/") == target.uri.rstrip("/"):
        raise InvalidInput("to", "must differ from the current store location")
    if source.path is None or target.path is None:
        return
    src, dst = source.path.resolve(), target.path.resolve()
    if src == dst:
        raise InvalidInput("to", "must differ from the current store location")
    if src in dst.parents:
        raise InvalidInput("to", f"must not be inside the current store's directory {src}")
    if dst in src.parents:
        raise InvalidInput("to", f"must not be a directory holding the current store ({src})")


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _check_source(source: StoreLocation, schemas: Mapping[str, pa.Schema] | None) -> None:
    """Refuse a damaged source: its tables, listed and read as they are, would make a copy
    that `doctor` finds healthy (a lost table simply absent, a lost newest version replaced by
    the one before it: forgotten rows and edges back)."""
    from octobrain.store.doctor import diagnose

    problems = [p for p in diagnose(source, schemas).problems if p.damage]
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise StorageError(
            f"migrate: the store at {source} is damaged: {problems[0].line()}{more}; nothing "
            "was copied (`octobrain doctor` lists every problem)"
        )


def _verify(name: str, source: pa.Table, copy: pa.Table, target: StoreLocation) -> None:
    if copy.num_rows != source.num_rows:
        raise StorageError(
            f"migrate: {name} at {target} has {copy.num_rows} rows, the source {source.num_rows}"
        )
    if "id" in source.column_names:
        want, got = set(source.column("id").to_pylist()), set(copy.column("id").to_pylist())
        if want != got:
            raise StorageError(
                f"migrate: {name} at {target} differs from the source in {len(want ^ got)} ids"
            )
