"""What the lines of an import file must agree on together, beyond what each holds alone: the
header's scope and counts and the end line's counts with the rows, and each `same_session`
link with the two memories it joins. An `InvalidInput` names the line and the field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from octobrain.errors import InvalidInput
from octobrain.memory.import_rows import ROW_KINDS
from octobrain.memory.temporal import SESSION_PREFIX
from octobrain.models import Memory, Relationship, RelationshipType
from octobrain.scope import GLOBAL_SCOPE
from octobrain.store.consolidations import ConsolidationRecord

CUT = "it was cut short or edited; nothing was imported"
SAME_SESSION = RelationshipType.SAME_SESSION


class Agreement:
    """The rows of one file, told to it as they are checked, then `check` once at its end.

    An export is of one scope: its rows are that scope's or global (a row of another project
    in a file whose header names this one was put there by hand), and so are its links and
    records. A `same_session` link is written by octobrain between two memories of one
    session, the later to the one before it, each carrying the session's `session:` tag (the
    tag is how the next write of the session finds the one before it); made by hand, it would
    bring an unrelated memory along with every recall ("same session as …") where `unrelate`
    cannot remove it, and an export writes one only with both its memories."""

    def __init__(self, header: dict[str, Any]) -> None:
        scope = header.get("scope")
        self._scope = scope if isinstance(scope, str) else None
        self._header = header
        self._memories: dict[str, tuple[int, frozenset[str]]] = {}  # id -> line, session tags
        self._tags: dict[str, str] = {}  # one string per session tag, however many rows hold it
        self._links: list[tuple[Relationship, int]] = []  # the file's same_session links

    def memory(self, memory: Memory, number: int) -> None:
        self._within(memory.scope, f"line {number}.scope")
        tags = (self._tags.setdefault(t, t) for t in memory.tags if t.startswith(SESSION_PREFIX))
        self._memories[memory.id] = (number, frozenset(tags))

    def link(self, rel: Relationship, number: int) -> None:
        self._within(rel.scope, f"line {number}.scope")
        if rel.relationship_type is SAME_SESSION:
            self._links.append((rel, number))

    def record(self, record: ConsolidationRecord, number: int) -> None:
        self._within(record.scope, f"line {number}.record.scope")

    def check(self, end: dict[str, int] | None, held: dict[str, int]) -> None:
        """Refuse the file if its counts are not its rows' (cut short, or edited) or a
        `same_session` link does not join two memories of the file tagged with one session."""
        if self._header.get("version", 1) >= 2 and end is None:
            raise InvalidInput("file", f"ends without its end line: {CUT}")
        header: dict[str, object] = {"memory": self._header.get("count")}
        said: list[tuple[str, Mapping[str, object]]] = [] if end is None else [("it counts", end)]
        said.append(("it counts" if end is None else "its header counts", header))
        for who, counts in said:
            for kind in ROW_KINDS:
                count = counts.get(kind)
                if isinstance(count, int) and count != held[kind]:
                    lines = f"line{'' if held[kind] == 1 else 's'}"
                    raise InvalidInput(
                        "file", f"holds {held[kind]:,} {kind} {lines} where {who} {count:,}: {CUT}"
                    )
        for rel, number in self._links:
            self._one_session(rel, number)

    def _within(self, scope: str, field: str) -> None:
        if self._scope is None or scope in (self._scope, GLOBAL_SCOPE):
            return
        said = (
            f"{self._scope!r}: an export holds the rows of its scope and global ones"
            if self._scope
            else 'global (""): an export of the global scope holds global rows only'
        )
        raise InvalidInput(field, f"is {scope!r}, where the file's header scope is {said}")

    def _one_session(self, rel: Relationship, number: int) -> None:
        ends = []
        for name, ident in (("source_id", rel.source_id), ("target_id", rel.target_id)):
            if ident not in self._memories:
                raise InvalidInput(
                    f"line {number}.{name}",
                    f"names {ident}, no memory of this file: a 'same_session' link is "
                    "imported only with the two memories it joins, as an export writes it",
                )
            ends.append(self._memories[ident])
        (first, tags), (second, other) = ends
        if not tags & other:
            raise InvalidInput(
                f"line {number}.relationship_type",
                f"'same_session' links join two memories of one session, both tagged with "
                f"it (session:<id>), and the memories of lines {first} and {second} share no "
                "such tag; octobrain writes these links itself",
            )
