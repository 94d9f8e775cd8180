"""The SQL predicates every table is read and written through: literals that data cannot
close, `IN` lists, and the visibility rule (`Sight`: a scope sees its own rows and global ones;
a role, its own rows and those of no role)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from octobrain.models import State

DELETE_BATCH = 4_096  # ids per delete predicate (an `IN` list's cost grows with its length)


def sql_str(value: str) -> str:
    """A SQL string literal: single quotes doubled, so data can never close the literal."""
    return "'" + value.replace("'", "''") + "'"


def sql_in(column: str, values: Sequence[str]) -> str:
    """`column IN (...)` over escaped literals (an empty list matches nothing)."""
    if not values:
        return "false"
    return f"{column} IN ({', '.join(sql_str(v) for v in values)})"


def visible_scopes(scope: str) -> list[str]:
    """Scopes a reader in `scope` may see: its own and global."""
    return [""] if scope == "" else [scope, ""]


@dataclass(frozen=True)
class Sight:
    """What a reader of memories may see: the rows of its scope and global ones (`scopes`);
    with a role, of those only the rows of that role and the rows of none (`roles`). A reader
    with no role sees every role's rows. Every read of memories is given one, so that no read
    path decides visibility on its own."""

    scope: str
    role: str = ""

    @property
    def scopes(self) -> list[str]:
        """The scopes seen (`visible_scopes`)."""
        return visible_scopes(self.scope)

    @property
    def roles(self) -> list[str] | None:
        """The roles seen: this role's and no role's; None for every role (no role given)."""
        return [self.role, ""] if self.role else None

    def where(self, *, include_archived: bool = False) -> str:
        """The read predicate: these scopes and roles, archived rows hidden unless asked for."""
        where = sql_in("scope", self.scopes)
        if self.roles is not None:
            where += f" AND {sql_in('role', self.roles)}"
        if not include_archived:
            where += f" AND state != {sql_str(State.ARCHIVED.value)}"
        return where

    def sees(self, scope: str, role: str) -> bool:
        """Whether a row of `scope` and `role` is seen."""
        return scope in self.scopes and (self.roles is None or role in self.roles)
