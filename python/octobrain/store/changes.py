"""The store's record of what its deletes and restores touched, so a mirror catches up in
O(changes) (`_octobrain/changes.json`, beside the tables: a local file, or one object).

A mirror catching up from version V finds the rows added or rewritten since V by their Lance
row address (new rows always land in new fragments); rows *removed* from old fragments leave
no such trace. So every octobrain write that removes rows without rewriting them (a forget, a
consolidation's undo, an edge delete) first lists their ids here, with the table versions it
started from, and a restore or a re-created table notes that everything may have changed.

A note is written before its commit, under the store's write lock: a process killed between
the two leaves a note for a change that never landed, which a reader checks against the table
and ignores. A reader never trusts the record alone: the rows it thinks are left must match the
table's row count, or it reads the whole table (`octobrain.memory.catchup`). An unreadable or
truncated record means "everything may have changed".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from octobrain.store.location import StoreLocation

RECORD = "changes.json"
FORMAT = 1
TABLES = ("memories", "relationships")
MAX_ENTRIES = 256  # older notes are dropped; a mirror older than them reads the whole table
MAX_IDS = 20_000


@dataclass(frozen=True)
class Changes:
    """What may have been removed since a version (see `since`)."""

    everything: bool = False  # a restore, a re-created table, or a record that cannot tell
    ids: frozenset[str] = field(default_factory=frozenset)  # memories (and the edges on them)
    edges: frozenset[str] = field(default_factory=frozenset)  # relationships, by edge id


def note(
    location: StoreLocation,
    versions: dict[str, int],
    *,
    ids: Sequence[str] = (),
    edges: Sequence[str] = (),
    everything: bool = False,
) -> None:
    """Record, before the commit that does it, that the commits after `versions` (each table's
    latest version now) remove `ids` (memories, with their edges) and `edges`, or may change
    anything. Call under the store's write lock."""
    try:
        record = location.read_json(RECORD) or {}
    except (OSError, ValueError):
        record = {}  # unreadable: rewritten; its floor below covers what it held
    if not _readable(record):
        record = {"format": FORMAT, "floor": {}, "entries": []}
    entry: dict[str, Any] = {t: int(versions[t]) for t in TABLES if t in versions}
    if everything:
        entry["all"] = True
    if ids:
        entry["ids"] = sorted(set(ids))
    if edges:
        entry["edges"] = sorted(set(edges))
    entries: list[dict[str, Any]] = [*record["entries"], entry]
    # (A new record has no floor: a delete before it was noted is still caught by the count.)
    floor: dict[str, int] = dict(record["floor"])
    while len(entries) > MAX_ENTRIES or (
        len(entries) > 1
        and sum(len(e.get("ids", ())) + len(e.get("edges", ())) for e in entries) > MAX_IDS
    ):
        dropped = entries.pop(0)
        for t in TABLES:
            if t in dropped:
                floor[t] = max(floor.get(t, 0), int(dropped[t]) + 1)
    location.write_json(RECORD, {"format": FORMAT, "floor": floor, "entries": entries})


def since(location: StoreLocation, table: str, version: int) -> Changes:
    """What the commits after `version` of `table` may have removed, as far as the record
    knows. Without a record nothing was noted; a mirror still checks the row count."""
    try:
        record = location.read_json(RECORD)
    except (OSError, ValueError):
        return Changes(everything=True)
    if record is None:
        return Changes()
    if not _readable_frame(record) or version < record["floor"].get(table, 0):
        return Changes(everything=True)
    ids: set[str] = set()
    edges: set[str] = set()
    # Each entry's shape is checked as it is read: one pass (a damaged one means everything).
    for entry in record["entries"]:
        if not _readable_entry(entry):
            return Changes(everything=True)
        if table not in entry or entry[table] < version:
            continue  # its commit is at or before `version`: already seen
        if entry.get("all"):
            return Changes(everything=True)
        ids.update(entry.get("ids", ()))
        edges.update(entry.get("edges", ()))
    return Changes(ids=frozenset(ids), edges=frozenset(edges))


def _readable(record: dict[str, Any]) -> bool:
    """`record` is of this format and shaped as `note` writes it. A damaged one (`"floor": []`,
    a version that is text) failed the call that read it, as an internal error."""
    return _readable_frame(record) and all(_readable_entry(e) for e in record["entries"])


def _readable_frame(record: dict[str, Any]) -> bool:
    """`record` is of this format, with a floor of versions and a list of entries (each entry
    still to be checked with `_readable_entry`)."""
    floor = record.get("floor")
    return (
        record.get("format") == FORMAT
        and isinstance(floor, dict)
        and all(_is_version(v) for v in floor.values())
        and isinstance(record.get("entries"), list)
    )


def _readable_entry(entry: object) -> bool:
    return (
        isinstance(entry, dict)
        and all(_is_version(entry[t]) for t in TABLES if t in entry)
        and all(_names(entry.get(key, [])) for key in ("ids", "edges"))
    )


def _is_version(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _names(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)
