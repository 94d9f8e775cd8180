"""How an MCP tool is described: `ToolSpec` (one tool, its schema in a scope-locked session or
not) and the flat JSON Schema pieces its properties are made of (`server.schemas` holds the
tools themselves). No `$ref`/`$defs` and no nullable unions: some inference backends return
empty generations on those.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ToolSpec", "flag", "string", "string_list", "utf8_string"]


@dataclass(frozen=True)
class ToolSpec:
    """One tool as advertised: the schema depends on whether the session's scope is locked."""

    name: str
    title: str
    description: str
    properties: dict[str, Any]
    required: list[str]
    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool = False

    def input_schema(self, *, locked: bool | None) -> dict[str, Any]:
        """Flat JSON Schema: `scope` only when unlocked, `global` only when locked; both, with
        `scope` optional, when `tools/list` cannot tell (`None`: each call may be locked by
        roots the client sends with it)."""
        props = dict(self.properties)
        required = list(self.required)
        if locked:
            props.pop("scope", None)
        elif locked is not None:
            props.pop("global", None)
            if "scope" in props:
                required.append("scope")
        return {
            "type": "object",
            "properties": props,
            "required": required,
            "additionalProperties": False,
        }


def string(description: str, low: int | None = None, high: int | None = None) -> dict[str, Any]:
    """A string of `low` to `high` characters (either bound left out: none)."""
    schema: dict[str, Any] = {"type": "string", "description": description}
    if low is not None:
        schema["minLength"] = low
    if high is not None:
        schema["maxLength"] = high
    return schema


def utf8_string(description: str, low_bytes: int, high_bytes: int) -> dict[str, Any]:
    """A string whose limits are UTF-8 bytes (the description says so). JSON Schema counts
    characters, so the bounds are the loosest that no valid string breaks: a character is
    1–4 bytes, so ≥ `low_bytes` bytes means ≥ ⌈low/4⌉ characters, and ≤ `high_bytes` bytes
    means ≤ `high_bytes` characters; the server checks the bytes exactly."""
    return string(description, -(-low_bytes // 4), high_bytes)


def string_list(description: str, max_items: int, item_max: int | None = None) -> dict[str, Any]:
    """At most `max_items` strings, each at most `item_max` characters."""
    item: dict[str, Any] = {"type": "string"}
    if item_max is not None:
        item["maxLength"] = item_max
    return {"type": "array", "items": item, "maxItems": max_items, "description": description}


def flag(description: str) -> dict[str, Any]:
    """A boolean, false when left out."""
    return {"type": "boolean", "default": False, "description": description}
