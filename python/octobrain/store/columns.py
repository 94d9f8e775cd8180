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

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import lancedb


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
