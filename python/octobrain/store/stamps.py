"""Stamps on a table's schema (field metadata of its `id` column): commits that change no row
but say something — that a table whose rows live elsewhere was made (`manifest.STAMPED_ON`),
or what a link-only write after a memories version did — and what each such commit did, in a
user's words (`memory history`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import lancedb

_STAMP = "octobrain.made."


def stamp_made(table: lancedb.table.Table, name: str, *, made: bool = True) -> None:
    """Record on `table` (`STAMPED_ON[name]`, under its write lock) that table `name` was
    made (or, with `made=False`, take that back), unless it already says so: a commit of the
    bearer's schema only, once per store (again after a `restore` or `reembed` took the stamp
    away)."""
    if stamped(table, name) != made:
        value = "1" if made else None
        table.update_field_metadata({"path": "id", "metadata": {_STAMP + name: value}})


# What a commit that only adds or takes back a stamp did, in a user's words (`memory history`).
_STAMP_NOTES = {
    "forgotten_turns": (
        "marks the store as having forgotten turns",
        "takes back the mark of forgotten turns",
    )
}


_LINKS = "octobrain.links"  # what the link-only write after a memories version did


def stamp_links(table: lancedb.table.Table, what: str) -> None:
    """A commit of the memories table's schema only, saying in words `what` the write of
    edges about to follow does (call under the write lock, just before that write). A link
    made or removed alone changed no memories version, and `restore` takes the edges back to
    the moment of the next memories version: a link `unrelate` deleted could not be got back,
    and `history` did not show it. Now its edges belong to this version, as memorize's edges
    belong to the row they follow."""
    table.update_field_metadata(
        {"path": "id", "metadata": {_LINKS: f"{what} ({datetime.now(UTC):%H:%M:%S.%f})"}}
    )


def stamp_note(probe: lancedb.table.Table, before: int, version: int) -> str:
    """What `version` of the table `probe` opens changed of its stamps since version `before`,
    in words ("" when none changed). `probe` is a handle of its own: it is moved to each."""
    stamps, links = [], []
    for at in (before, version):
        probe.checkout(at)
        stamps.append({name for name in _STAMP_NOTES if stamped(probe, name)})
        links.append(_field_metadata(probe).get(_LINKS.encode()))
    notes = [_STAMP_NOTES[n][0] for n in sorted(stamps[1] - stamps[0])]
    notes += [_STAMP_NOTES[n][1] for n in sorted(stamps[0] - stamps[1])]
    if links[1] is not None and links[1] != links[0]:
        notes.append(links[1].decode(errors="replace").rsplit(" (", 1)[0])
    return "; ".join(notes)


def _field_metadata(table: lancedb.table.Table) -> dict[bytes, bytes]:
    schema = table.schema
    if schema.get_field_index("id") < 0:  # the version that opened has no columns (damage)
        return {}
    return dict(schema.field("id").metadata or {})


def stamped(table: lancedb.table.Table, name: str) -> bool:
    """Whether `table` records that table `name` was made (`stamp_made`)."""
    return (_STAMP + name).encode() in _field_metadata(table)
