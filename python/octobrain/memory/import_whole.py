"""What the lines of an import file must agree on together, beyond what each holds alone: the
header's scope and counts and the end line's counts with the rows, and each `same_session`
link with the two memories it joins. An `InvalidInput` names the line and the field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from octobrain.errors import InvalidInput, as_json
from octobrain.memory.import_rows import ROW_KINDS
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
    session, and an export writes one only with both its memories: one naming a memory the
    file does not hold would join a memory of the importing store to the file's. Whether the
    two still share a `session:` tag is not asked: `update --remove-tags` removes one and
    keeps the link, and an export must import back.

    An import for a role (`memory --role R import`) keeps each memory's role, as it keeps its
    scope: a file holding memories of R and of no role (what R's export holds) is imported as
    it is, one holding another role's is refused, naming the line: a role writes no memory
    into another role's space."""

    def __init__(self, header: dict[str, Any], role: str = "") -> None:
        scope = header.get("scope")
        self._role = role
        self._scope = scope if isinstance(scope, str) else None
        self._header = header
        self._memories: set[str] = set()
        self.projects: set[str] = set()  # the project scopes its memories are of
        self._links: list[tuple[Relationship, int]] = []  # the file's same_session links

    def memory(self, memory: Memory, number: int) -> None:
        self._within(memory.scope, f"line {number}.scope")
        if self._role and memory.role not in (self._role, ""):
            raise InvalidInput(
                f"line {number}.role",
                f"is {as_json(memory.role)}, and this import is role {as_json(self._role)}'s: "
                "an import keeps each memory's role and writes none into another role's; "
                "nothing was imported. Import it with no role to keep every memory's role",
            )
        self._memories.add(memory.id)
        if memory.scope != GLOBAL_SCOPE:
            self.projects.add(memory.scope)

    def link(self, rel: Relationship, number: int) -> None:
        self._within(rel.scope, f"line {number}.scope")
        if rel.relationship_type is SAME_SESSION:
            self._links.append((rel, number))

    def record(self, record: ConsolidationRecord, number: int) -> None:
        self._within(record.scope, f"line {number}.record.scope")

    def check(self, end: dict[str, int] | None, held: dict[str, int]) -> None:
        """Refuse the file if its counts are not its rows' (cut short, or edited) or a
        `same_session` link does not join two memories of the file."""
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
            f"{as_json(self._scope)}: an export holds the rows of its scope and global ones"
            if self._scope
            else 'global (""): an export of the global scope holds global rows only'
        )
        raise InvalidInput(field, f"is {as_json(scope)}, where the file's header scope is {said}")

    def _one_session(self, rel: Relationship, number: int) -> None:
        for name, ident in (("source_id", rel.source_id), ("target_id", rel.target_id)):
            if ident not in self._memories:
                raise InvalidInput(
                    f"line {number}.{name}",
                    f"names {ident}, no memory of this file: a 'same_session' link is "
                    "imported only with the two memories it joins, as an export writes it",
                )
