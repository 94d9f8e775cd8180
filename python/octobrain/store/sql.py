"""The SQL predicates every table is read and written through: literals that data cannot
close, `IN` lists, and the visibility rule (a scope sees its own rows and global ones)."""

from __future__ import annotations

from collections.abc import Sequence

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


def visible_where(scope: str, *, include_archived: bool = False) -> str:
    """The read predicate: this scope plus global, archived rows hidden unless asked for."""
    where = sql_in("scope", visible_scopes(scope))
    if not include_archived:
        where += f" AND state != {sql_str(State.ARCHIVED.value)}"
    return where
