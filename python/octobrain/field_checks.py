"""Checks of the values a caller hands in (flags, lists, numbers, counts, memory ids): each
returns the value in its stored form or raises `InvalidInput` naming the field and the rule."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from octobrain.errors import InvalidInput, as_json, json_type

ID_CHARS = 100
ID_PREFIX_HEX = 8  # the short ids the briefing prints
_UUID_GROUPS = (8, 4, 4, 4, 12)
_HEX = frozenset("0123456789abcdef")


def did_you_mean(key: str, names: Iterable[str], aliases: Mapping[str, str]) -> str:
    """` (did you mean "decision"?)` for a near miss of one of `names` or `aliases` (named by
    what the alias stands for), else ""."""
    import difflib

    near = difflib.get_close_matches(key, [*names, *aliases], n=1, cutoff=0.75)
    return f" (did you mean {as_json(aliases.get(near[0], near[0]))}?)" if near else ""


def check_flag(field_name: str, value: object) -> bool:
    """`value` when it is True or False: a string such as "false" is truthy, and read as
    true it did the opposite of what it said (`global_="no"` wrote a global memory)."""
    if not isinstance(value, bool):
        raise InvalidInput(field_name, f"must be a boolean, got {as_json(value)}")
    return value


def check_list(field_name: str, values: object) -> list[Any]:
    """`values` as a list: a list, a tuple or any other iterable (a generator, a deque) in
    its own order, a set sorted (it has no order, and what is stored or answered must not
    change from one run to the next). One string is refused (it would be read as its
    characters), as are bytes and a mapping (a dict is not a list of its keys by intent) and
    anything that is not iterable (an int had no `len`, a `None` was not iterable). Its items
    are the caller's to check."""
    if isinstance(values, str):
        raise InvalidInput(field_name, "must be a list of strings, not one string")
    if isinstance(values, list | tuple):
        return list(values)
    if isinstance(values, bytes | bytearray | memoryview | Mapping) or not isinstance(
        values, Iterable
    ):
        raise InvalidInput(field_name, f"must be a list of strings, got {json_type(values)}")
    if isinstance(values, AbstractSet):
        items = list(values)
        # (items of other types are left unsorted, for the caller to refuse by their place)
        return sorted(items) if all(isinstance(v, str) for v in items) else items
    return list(values)


def check_strings(field_name: str, values: object) -> list[str]:
    """`check_list`, each item a string (named by its place: `remove_tags[1]`)."""
    items = check_list(field_name, values)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise InvalidInput(f"{field_name}[{i}]", f"must be a string, got {json_type(item)}")
    return items


def check_unit(field_name: str, value: object) -> float:
    """A finite number in [0, 1]; -0.0 is 0.0 (stored and shown as "-0.00" otherwise)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(field_name, f"must be a number in [0, 1], got {as_json(value)}")
    # (an integer past a float's range, 10**400, is not one either: float() overflows on it)
    number = float(value) if isinstance(value, float) or -2 < value < 2 else math.inf
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise InvalidInput(field_name, f"must be a number in [0, 1], got {as_json(value)}")
    return number + 0.0  # -0.0 + 0.0 is 0.0


def integer_of(value: object, least: int, most: float = math.inf) -> int | None:
    """`value` as an integer in [least, most], else None. A float with no fraction (`1.0`) is
    that integer, as JSON Schema's "integer" takes it (an MCP client may send one)."""
    number = int(value) if isinstance(value, float) and value.is_integer() else value
    if isinstance(number, bool) or not isinstance(number, int) or not least <= number <= most:
        return None
    return number


def check_limit(value: object, *, field_name: str = "limit", maximum: int) -> int:
    """A result count in [1, maximum] (the caller's ceiling: `search.max_results` for a
    search, which the MCP schema states too); `1.0` is 1 (`integer_of`)."""
    number = integer_of(value, 1, maximum)
    if number is None:
        # (quoted as sent: `1e308` read as its integer was echoed as 309 digits)
        raise InvalidInput(
            field_name, f"must be an integer in [1, {maximum}], got {as_json(value)}"
        )
    return number


def check_id(value: object, *, field_name: str = "memory_id") -> str:
    """A memory id: a UUID string (any case), returned in canonical lowercase form."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(field_name, "must be a non-empty string")
    if len(value) > ID_CHARS:
        raise InvalidInput(field_name, f"must be at most {ID_CHARS} characters")
    try:
        return str(uuid.UUID(value.strip()))
    except ValueError:
        raise InvalidInput(
            field_name, f"must be a memory id (a UUID), got {as_json(value)}"
        ) from None


def check_id_ref(value: object, *, field_name: str = "memory_id") -> tuple[str, bool]:
    """A memory id as a person or agent may give it: a full UUID, or a prefix of at least
    8 hex digits (hyphens optional). Returns `(id, True)` for a full id in canonical form, or
    `(prefix, False)` with the prefix lowercased and hyphenated like a stored id."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(field_name, "must be a non-empty string")
    if len(value) > ID_CHARS:
        raise InvalidInput(field_name, f"must be at most {ID_CHARS} characters")
    text = value.strip().lower()
    try:
        return str(uuid.UUID(text)), True
    except ValueError:
        pass
    digits = text.replace("-", "")
    if len(digits) < ID_PREFIX_HEX or len(digits) >= 32 or any(c not in _HEX for c in digits):
        raise InvalidInput(
            field_name,
            f"must be a memory id (a UUID) or a unique prefix of at least {ID_PREFIX_HEX} "
            f"hex digits, got {as_json(value)}",
        )
    groups, start = [], 0
    for size in _UUID_GROUPS:
        if start < len(digits):
            groups.append(digits[start : start + size])
        start += size
    return "-".join(groups), False
