"""Writing the memories table: rows appended with their edges (whole or not at all, read back
when the store's answer was lost), a row rewritten only while it is the row read, columns set,
rows merged, access counts bumped, rows deleted, the whole table replaced. Each write is one
commit under the store's write lock, checked first (`MemoryStore.check_commit`)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

from octobrain.errors import InvalidInput, OctobrainError, StorageError
from octobrain.models import Memory, Relationship
from octobrain.store import manifest, schema, upkeep
from octobrain.store.failures import NotFound, RowChanged, WriteFailed
from octobrain.store.lease import LeaseLost
from octobrain.store.link_rules import check_not_self
from octobrain.store.scans import held, scan_batches
from octobrain.store.schema import MEMORIES
from octobrain.store.sql import DELETE_BATCH, sql_in, sql_str

if TYPE_CHECKING:
    import lancedb
    import pyarrow as pa

    from octobrain.store.memories import MemoryStore

log = logging.getLogger(__name__)


# An object store that took a commit but whose answer was lost (a timeout, a reset): the
# commit may or may not have landed.
_UNKNOWN_OUTCOME = re.compile(
    r"result for version \d+ is unknown|\btimed? ?out\b|connection (?:reset|closed|aborted)", re.I
)


# What every write of a row changes (`updated_at`; an access bump only `access_count`), so a
# row whose three still hold them is the row as read (`replace`, `merge_rows`).
_FENCE = ("updated_at", "access_count", "state")


def _fence(row: Mapping[str, Any] | Memory) -> tuple[str, datetime, int, str]:
    """(id, updated_at, access_count, state) of a row or memory as read."""
    if isinstance(row, Memory):
        return row.id, row.updated_at, row.access_count, row.state.value
    return row["id"], row["updated_at"], int(row["access_count"]), row["state"]


def _fence_where(read: Memory) -> str:
    """A merge's SQL (on its `target`) true of the row of `read`'s id while it still is as
    `read` was read."""
    memory_id, stamp, accesses, state = _fence(read)
    return (
        f"target.id = {sql_str(memory_id)} AND "
        f"target.updated_at = timestamp {sql_str(stamp.isoformat())} AND "
        f"target.access_count = {accesses} AND target.state = {sql_str(state)}"
    )


def add(
    store: MemoryStore,
    memories: Sequence[Memory],
    embeddings: np.ndarray,
    links: Sequence[Relationship] = (),
    *,
    drop_gone_links: bool = False,
) -> int:
    """Append memories (one commit) and their edges (one more). Ids must be new. An edge
    with an end neither held nor among `memories` (deleted since the caller looked) is
    `NotFound`, or with `drop_gone_links` left out; one from a memory to itself is refused
    (`link_rules.check_not_self`). Returns the edges written."""
    check_not_self(links, "related_to")
    embeddings = np.asarray(embeddings, dtype=np.float32)
    if embeddings.shape != (len(memories), store.dim):
        raise InvalidInput(
            "embeddings",
            f"must have shape ({len(memories)}, {store.dim}), got {embeddings.shape}",
        )
    rows = [
        schema.stamped(schema.memory_to_row(m, e))
        for m, e in zip(memories, embeddings, strict=True)
    ]
    with store.write_lock():
        links = store.require_ends(links, {m.id for m in memories}, drop=drop_gone_links)
        store.check_commit()
        if rows:
            append(store, store.memories, rows)
        if links:
            try:
                append(store, store.relationships, [schema.relationship_to_row(r) for r in links])
            except (OSError, RuntimeError, StorageError) as exc:
                _take_back(store, [m.id for m in memories], exc)
                raise
            ends_kept(store, links, {m.id for m in memories})
        upkeep.maybe_maintain(store)
    return len(links)


def append(store: MemoryStore, table: lancedb.table.Table, rows: list[dict[str, Any]]) -> None:
    """Append `rows` (each with a new `id`) in one commit. When the store's answer to the
    commit is lost, read back whether it landed: a caller told "nothing was changed" sends
    the write again, and a write that had landed would be stored twice."""
    try:
        table.add(rows)
        store.wrote(table)
    except (OSError, RuntimeError) as exc:
        if not _UNKNOWN_OUTCOME.search(str(exc)):
            raise
        ids = [row["id"] for row in rows]
        reason = manifest.short_reason(exc)
        try:
            table.checkout_latest()  # type: ignore[no-untyped-call]
            landed = held(table, ids)
        except (OSError, RuntimeError) as again:
            raise StorageError(
                f"store: {store.location}: the answer to a commit was lost ({reason}), and "
                f"reading back failed too ({manifest.short_reason(again)}): the write may "
                "have landed; look (`octobrain memory recent`) before sending it again"
            ) from exc
        if landed != set(ids):  # one commit: all of it or none
            raise StorageError(
                f"store: {store.location}: the answer to a commit was lost ({reason}); read "
                "back, the write is not in the store: nothing was changed, it can be sent "
                "again"
            ) from exc
        log.info("store: a commit's answer was lost (%s); read back, it landed", reason)


def _take_back(store: MemoryStore, ids: Sequence[str], exc: BaseException) -> None:
    """The edge commit of `add` failed after its memories were committed: delete them
    again, so the write is whole or absent (a caller retries it whole). When that fails
    too, the failure says which memories were stored without their links."""
    if not ids:
        return
    try:
        store.note_changes(ids=ids)  # a warm process that saw them drops them again
        store.memories.delete(sql_in("id", ids))
    except (OSError, RuntimeError):
        done = (
            f"{len(ids)} memories were stored without their links "
            f"({', '.join(ids[:3])}{', …' * (len(ids) > 3)}): link them again, or forget "
            "them, once there is space"
        )
        raise WriteFailed(store.location, exc).after(done) from exc


def require_ends(
    store: MemoryStore, links: Sequence[Relationship], adding: set[str], *, drop: bool = False
) -> Sequence[Relationship]:
    """Under the write lock: `links` when every end is held or among the rows `adding`; with
    `drop`, those that are. A caller checks its targets before it embeds; a `forget` in
    between would leave an acknowledged edge to a deleted memory."""
    ends = {e for r in links for e in (r.source_id, r.target_id)} - adding
    missing = ends - store.held(sorted(ends)) if ends else set()
    if missing and drop:
        return [r for r in links if not {r.source_id, r.target_id} & missing]
    if missing:
        raise NotFound(
            "related_to",
            f"memory {min(missing)} was deleted while this write waited for the store; "
            "nothing was stored",
        )
    return links


def ends_kept(store: MemoryStore, links: Sequence[Relationship], adding: set[str]) -> None:
    """Call right after committing `links` (with the rows `adding`) under the write lock. A
    process paused past its lease after its last check commits anyway, and the writer that
    took the lease over may have deleted an end meanwhile (its edges deleted before this one
    landed): then the links and `adding` are taken back, and `NotFound` says so. Nothing is
    read while the lease holds."""
    try:
        store.check_lease()
        return
    except LeaseLost:
        pass
    store.refresh()
    ends = {e for r in links for e in (r.source_id, r.target_id)} - adding
    missing = ends - store.held(sorted(ends)) if ends else set()
    if not missing:
        return
    edges = [r.id for r in links]
    store.note_changes(ids=sorted(adding), edges=edges)
    store.relationships.delete(sql_in("id", edges))
    if adding:
        store.memories.delete(sql_in("id", sorted(adding)))
    raise NotFound(
        "related_to",
        f"memory {min(missing)} was deleted by another writer while this write was paused past "
        "its lease; nothing was stored",
    )


def replace(store: MemoryStore, memory: Memory, embedding: np.ndarray, *, read: Memory) -> None:
    """Rewrite one existing row in place (one atomic merge commit), only while it is still
    the row `read` (same `updated_at`, access count and state): the commit itself checks,
    so an edit made meanwhile by a writer that took over a lapsed lease is never
    overwritten. Otherwise `RowChanged` (or `NotFound` when it is gone); nothing written."""
    row = schema.stamped(schema.memory_to_row(memory, embedding))
    with store.write_lock():
        store.check_commit()
        merge = store.memories.merge_insert("id")
        merge = merge.when_matched_update_all(where=_fence_where(read))
        updated = merge.execute([row]).num_updated_rows
        store.wrote(store.memories)
        if updated != 1:
            raise _changed(store, [read], _fences_now(store, [read]))
        upkeep.maybe_maintain(store)


def _fences_now(
    store: MemoryStore, read: Sequence[Mapping[str, Any] | Memory]
) -> dict[str, tuple[Any, ...]]:
    """The `_fence` of each row of `read` as the store holds it now, by id (gone: absent)."""
    ids = [_fence(r)[0] for r in read]
    return {r["id"]: _fence(r) for r in store.scan(sql_in("id", ids), columns=[*_FENCE, "id"])}


def _changed(
    store: MemoryStore, read: Sequence[Mapping[str, Any] | Memory], now: dict[str, tuple[Any, ...]]
) -> OctobrainError:
    """The error for a read-modify-write of `read` that found one of them changed or gone
    (`now`: `_fences_now`)."""
    for before in map(_fence, read):
        after = now.get(before[0])
        if after is None:
            return NotFound(
                "memory_id",
                f"memory {before[0]} was deleted by another writer after this write read "
                "it; nothing was changed",
            )
        if after != before:
            return RowChanged(
                f"store: {store.location}: memory {before[0]} was changed by another writer "
                f"after this write read it (updated {after[1]:%Y-%m-%d %H:%M:%S} UTC); "
                "nothing was changed: run it again to apply it to the memory as it is now"
            )
    return RowChanged(
        f"store: {store.location}: a memory this write read changed while it committed; "
        "nothing was changed: run it again"
    )


def set_columns(store: MemoryStore, where: str, values: dict[str, Any]) -> None:
    """Partial update of rows matching `where` (embeddings untouched), each row checked
    against its checksum first and stamped again with the new values (one commit)."""
    import pyarrow as pa

    with store.write_lock():
        store.check_commit()
        rows = store.scan(where, columns=[*schema.CHECKED, schema.CHECKSUM])
        for row in rows:
            schema.check_row(row)  # a damaged row is not stamped sound
        names = ["id", *values, schema.CHECKSUM]
        changed = [
            {"id": r["id"], **values, schema.CHECKSUM: schema.checksum({**r, **values})}
            for r in rows
        ]
        if changed:
            fields = [store.memories.schema.field(name) for name in names]
            data = pa.Table.from_pylist(changed, schema=pa.schema(fields))
            store.memories.merge_insert("id").when_matched_update_all().execute(data)
            store.wrote(store.memories)
        upkeep.maybe_maintain(store)


def merge_rows(
    store: MemoryStore,
    rows: Sequence[dict[str, Any]],
    *,
    delete_where: str | None = None,
    read: Sequence[Mapping[str, Any]] = (),
) -> None:
    """Upsert full `memories` rows by id and optionally delete rows matching `delete_where`
    that are not among them — all in ONE atomic commit (a reader sees all of it or none).

    `read`: the rows this write read and writes back changed. Just before the commit they
    are read again, and one changed or gone since is `RowChanged` (`NotFound`), nothing
    written. (Not inside the commit, as `replace` checks: a merge of many rows cannot
    refuse as a whole there; the lease check just before it covers the moment between.)"""
    import pyarrow as pa

    for row in read:
        schema.check_row(row)  # a damaged row read is not written back stamped sound
    with store.write_lock():
        stamped = [schema.stamped(dict(row)) for row in rows]
        data = pa.Table.from_pylist(stamped, schema=store.memories.schema)
        store.check_commit()
        if read:
            now = _fences_now(store, read)
            if set(now.values()) != {_fence(r) for r in read}:
                raise _changed(store, read, now)
        if delete_where is not None:
            kept = {row["id"] for row in rows}
            gone = [r["id"] for r in store.scan(delete_where, columns=["id"])]
            store.note_changes(ids=[i for i in gone if i not in kept])
        merge = store.memories.merge_insert("id").when_matched_update_all()
        merge = merge.when_not_matched_insert_all()
        if delete_where is not None:
            merge = merge.when_not_matched_by_source_delete(delete_where)
        merge.execute(data)
        store.wrote(store.memories)
        upkeep.maybe_maintain(store)


def record_access(
    store: MemoryStore, ids: Sequence[str], now: datetime, *, min_interval: timedelta
) -> int:
    """Count one access for each id, unless it was accessed less than `min_interval` ago.
    Returns the version this commit created."""
    if not ids:
        return int(store.memories.version)
    cutoff = (now - min_interval).isoformat()
    # A row's first access always counts (last_accessed starts at its creation time).
    recent = f"last_accessed < timestamp {sql_str(cutoff)}"
    where = f"{sql_in('id', ids)} AND (access_count = 0 OR {recent})"
    with store.write_lock():
        store.check_lease()
        store.check_deletions()
        result = store.memories.update(
            where=where,
            values_sql={
                "access_count": "access_count + 1",
                "last_accessed": f"timestamp {sql_str(now.isoformat())}",
            },
        )
        store.wrote(store.memories)
        upkeep.maybe_maintain(store)
    return int(result.version)


def forget_damaged(store: MemoryStore) -> list[str]:
    """Delete every memory that no longer matches its checksum, in whatever scope it reads
    as (a bit flipped in its scope hides it from `memory forget` in its own), with the edges
    touching it; their ids. The store's owner's repair (`octobrain doctor --forget-damaged`),
    never a client's: their text is not read out, and `memory restore` brings them back."""
    from octobrain.store import row_sums  # (as `doctor` finds them: every row at once)

    columns = list(dict.fromkeys(["id", *schema.CHECKED, schema.CHECKSUM]))
    batches = scan_batches(store.memories, "true", columns, DELETE_BATCH)
    damaged = row_sums.damaged_ids(batches, row_sums.memories_damaged)
    if damaged:
        delete(store, damaged)
    return damaged


def delete(store: MemoryStore, ids: Sequence[str]) -> int:
    """Delete memories by id and every edge touching them. Returns rows deleted."""
    if not ids:
        return 0
    with store.write_lock():
        before = store.count()
        store.check_commit()
        store.note_changes(ids=ids)
        store.memories.delete(sql_in("id", ids))
        store.wrote(store.memories)
        deleted = before - store.count()
        try:
            store.relationships.delete(f"{sql_in('source_id', ids)} OR {sql_in('target_id', ids)}")
            store.wrote(store.relationships)
        except (OSError, RuntimeError) as exc:
            done = (
                f"{deleted} memories were deleted but not their edges (searches never show "
                "them; `octobrain doctor --drop-dangling-edges` deletes them)"
            )
            raise WriteFailed(store.location, exc).after(done) from exc
        upkeep.maybe_maintain(store)
    return deleted


def overwrite_memories(store: MemoryStore, batches: Iterable[list[dict[str, Any]]]) -> None:
    """Replace the whole memories table in one commit, stamped with this store's model,
    by rows given in batches and written as they come (so the old rows may still be read
    while the batches are made).

    Call under `write_lock(check_model=False)`. LanceDB writes the new rows as a new
    version of the same table, so readers see the old version until the commit lands.
    """
    import pyarrow as pa

    table_schema = schema.memories_schema(store.model_id, store.dim)
    # The stamps of tables made later (`manifest.STAMPED_ON`) go with the rows.
    kept = store.open_memories_unchecked().schema.field("id").metadata
    if kept:
        at = table_schema.get_field_index("id")
        table_schema = table_schema.set(at, table_schema.field("id").with_metadata(kept))
    lost: list[LeaseLost] = []

    def checked() -> Iterator[pa.RecordBatch]:
        # The batches are made (embedded) while the commit streams them: long enough for
        # the write lease to lapse, so it is checked before each and once after the last.
        try:
            for rows in batches:
                store.check_lease()
                rows = [schema.stamped(row) for row in rows]
                yield pa.RecordBatch.from_pylist(rows, schema=table_schema)
            store.check_lease()
        except LeaseLost as exc:
            lost.append(exc)  # LanceDB reports a failed stream as its own error
            raise

    data = pa.RecordBatchReader.from_batches(table_schema, checked())
    db = store.open_db()
    store.note_changes(everything=True)
    try:
        made = db.create_table(MEMORIES, data=data, schema=table_schema, mode="overwrite")
    except Exception:
        if lost:
            raise lost[0] from None
        raise
    store.wrote(made)  # (an overwrite is a new, higher version)
    store.drop_handles()
