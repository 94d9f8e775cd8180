"""A table whose newest version lacks a column its reads name: a byte of the version manifest
changed on disk ("importance" reads "impnrtance"; Lance keeps no checksum of a manifest's
schema). Every read naming the column fails (`No field named importance`: one line sending
the user to `doctor`, `manifest.read_failure`), and `doctor` names the table and the way back,
`memory restore` of the newest kept version that had the column (or a backup, when none did).

Columns are only ever added (a store made before one gains it with its next write), never
renamed or dropped: so a column its reads name gone is damage, whatever the versions before.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from octobrain.store.manifest import TableDamaged
from octobrain.store.schema import embedded_with

if TYPE_CHECKING:
    import lancedb
    import pyarrow as pa


def lacks_read_columns(
    table: lancedb.table.Table, read: Sequence[str], later: Sequence[str] = ()
) -> tuple[str, int | None] | None:
    """Why `table` is damaged when its newest version lacks columns that reading it names
    (`read`; of `later`, columns a table made before them lacks, those with a name a changed
    byte away from them in their place), and the newest kept version before it that had them,
    which `memory restore` goes back to (None when no version kept had them); else None."""
    names = table.schema.names
    unknown = [n for n in names if n not in read and n not in later]
    gone = [c for c in read if c not in names]
    gone += [c for c in later if c not in names and _near(c, unknown)]
    if not gone:
        return None
    had = _kept_with(table, gone)
    if had is None:
        near = [m for c in gone for m in _near(c, unknown)]
        instead = f" (it names {', '.join(map(repr, near))} instead)" if near else ""
        said = f"has no column {_listed(gone)}{instead}, which every read of it names"
    else:
        number, earlier = had
        new = [n for n in names if n not in earlier]
        said = (
            f"names column(s) {_listed(new)} in place of {_listed(gone)}"
            if new
            else f"has no column {_listed(gone)}"
        ) + f", which version {number} had"
    return (
        f"its newest version {said}: a byte of its version manifest changed on disk",
        None if had is None else had[0],
    )


def check_later_columns(
    location: object, table: lancedb.table.Table, later: Sequence[str], known: Sequence[str]
) -> None:
    """Refuse (`TableDamaged`, nothing changed) to add columns `later` to `table` as to one
    made before them when a column not among `known` (the table's columns as octobrain
    writes it) has a name a changed byte away in one's place (`chfcksum`): added, a fresh
    checksum column stamped every row as it read then, damaged ones included, and `doctor`
    said ok from then on."""
    read = [n for n in table.schema.names if n in known]
    lacks = lacks_read_columns(table, read, later)
    if lacks is not None:
        raise TableDamaged(location, table.name, f"{lacks[0]}; nothing was changed")


def _near(column: str, names: Sequence[str]) -> list[str]:
    """The name among `names` a changed byte or two away from `column`, if any."""
    return difflib.get_close_matches(column, names, n=1, cutoff=0.75)


def _listed(names: Sequence[str]) -> str:
    return ", ".join(map(repr, names))


def _kept_with(table: lancedb.table.Table, columns: Sequence[str]) -> tuple[int, list[str]] | None:
    """The number and column names of the newest version before `table`'s newest that has
    every one of `columns`, or None (a version that does not open is passed over)."""
    try:
        numbers = sorted(int(v["version"]) for v in table.list_versions())
    except (ValueError, RuntimeError, OSError):
        return None
    try:
        for number in reversed(numbers[:-1]):
            try:
                table.checkout(number)
            except (ValueError, RuntimeError, OSError):
                continue
            names = table.schema.names
            if all(c in names for c in columns):
                return number, names
    finally:
        table.checkout_latest()  # type: ignore[no-untyped-call]
    return None


def dim_unlike_vectors(table_schema: pa.Schema, column: str = "embedding") -> str | None:
    """Why a table's metadata is damaged, when the embedding dimension it records is not the
    width of its vectors' column (a byte of the version manifest changed on disk: "64" reads
    "24"; every command then said the store was embedded with the configured model at
    another dimension); else None."""
    if column not in table_schema.names:
        return None
    kind = table_schema.field(column).type
    width = getattr(kind, "list_size", None)
    model, dim = embedded_with(table_schema)
    if width is None or dim == str(width) or not model:  # (no model recorded: a bare table)
        return None
    records = f"embedding dimension {dim!r}" if dim != "0" else "no embedding dimension"
    return (
        f"its metadata records {records} while its vectors hold {width} numbers: a byte of "
        "its version manifest changed on disk"
    )


def dim_damage(location: object, name: str, table_schema: pa.Schema, repair: str) -> str | None:
    """The one line a command refuses table `name` of the store at `location` with when its
    recorded embedding dimension is damaged (`dim_unlike_vectors`: not another model, which
    the advice for would be wrong), with `repair`; else None."""
    damaged = dim_unlike_vectors(table_schema)
    if damaged is None:
        return None
    return f"store: table {name!r} in {location} is damaged ({damaged}); to repair: {repair}"
