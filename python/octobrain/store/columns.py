"""A table whose newest version names a column in place of one the version before it had: a
byte of the version manifest changed on disk ("importance" reads "impnrtance"; Lance keeps no
checksum of a manifest's schema). Every read naming the column fails (`No field named
importance`: one line sending the user to `doctor`, `manifest.read_failure`), and `doctor`
names the table and the way back, `memory restore` of an earlier version.

Columns are only ever added (a store made before one gains it with its next write), never
renamed or dropped, and a restore goes back to a version with fewer columns, none new: so
columns gone while others appeared, at once, is damage.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from octobrain.store.schema import embedded_with

if TYPE_CHECKING:
    import lancedb
    import pyarrow as pa


def renamed_since(table: lancedb.table.Table) -> str | None:
    """Why `table` is damaged, when its newest version lacks columns the version before it
    had while naming columns neither of the two versions before it had (a restore over a
    damaged version brings back the names the one before that had); else None (also when no
    version before it is kept to compare with)."""
    numbers = sorted(int(v["version"]) for v in table.list_versions())
    if len(numbers) < 2:
        return None
    newest = table.schema
    earlier = []
    try:
        for number in reversed(numbers[-3:-1]):
            table.checkout(number)
            earlier.append(table.schema.names)
    finally:
        table.checkout_latest()  # type: ignore[no-untyped-call]
    gone = [n for n in earlier[0] if n not in newest.names]
    new = [n for n in newest.names if not any(n in names for names in earlier)]
    if not gone or not new:
        return None
    return (
        f"its newest version names column(s) {', '.join(map(repr, new))} in place of "
        f"{', '.join(map(repr, gone))}, which version {numbers[-2]} had: a byte of its "
        "version manifest changed on disk"
    )


def lacks_read_columns(table_schema: pa.Schema, read: Sequence[str]) -> str | None:
    """Why a table is damaged when its newest version lacks columns that reading it names
    (`read`), with the names it holds instead that are a changed byte away from them; else
    None. `renamed_since` needs a version before it kept; with one version alone, the
    `doctor` read that names the column was a KeyError traceback."""
    names = table_schema.names
    gone = [c for c in read if c not in names]
    if not gone:
        return None
    unknown = [n for n in names if n not in read]
    near = [m for c in gone for m in difflib.get_close_matches(c, unknown, n=1, cutoff=0.75)]
    instead = f" (it names {', '.join(map(repr, near))} instead)" if near else ""
    return (
        f"its newest version has no column {', '.join(map(repr, gone))}{instead}, which "
        "every read of it names: a byte of its version manifest changed on disk"
    )


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
