"""The MCP `knowledge` tool's logic without any protocol: validate → call `Knowledge` → text.

The server wiring is one call: `run_command(knowledge, arguments)` where `arguments` is the
tool's argument dict (`command` plus `query`, `source`, `key`, `content`, `pattern`,
`from_line`). A `read` reply is one page of at most `knowledge.read_page_bytes`. Errors are
`InvalidInput` naming the field and the rule, for the server to return as a tool error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from octobrain.errors import InvalidInput, as_json, json_type
from octobrain.knowledge.pages import check_byte, check_line, page
from octobrain.knowledge.render import (
    render_delete,
    render_match,
    render_read,
    render_search,
    render_store,
)
from octobrain.knowledge.service import Knowledge

COMMANDS = ("search", "read", "match", "store", "delete")
_NEEDS = {
    "search": ("query",),
    "read": ("source",),
    "match": ("pattern",),
    "store": ("key", "content"),
    "delete": ("key",),
}


# What each command may take beside what it needs (`scope` and `global` are the server's).
_MAY_TAKE = {
    "search": ("source",),
    "read": ("from_line", "from_byte"),
    "match": ("source",),
    "store": (),
    "delete": (),
}
_ANY_COMMAND = ("command", "scope", "global")


def _check_taken(arguments: Mapping[str, Any], command: str) -> None:
    """Refuse an argument of another command (`pattern` with `search`): it did nothing, and
    the caller thought it did. One left empty (null, "", or `from_line` at its default 1, as
    clients that send every property fill them) is no argument."""
    takes = (*_NEEDS[command], *_MAY_TAKE[command])
    for name, value in arguments.items():
        if name in takes or name in _ANY_COMMAND or value is None or value == "":
            continue
        if (name, value) in (("from_line", 1), ("from_byte", 0)) and not isinstance(value, bool):
            continue
        raise InvalidInput(
            name, f"is not an argument of command {command!r} (it takes {', '.join(takes)})"
        )


def _arg(arguments: Mapping[str, Any], name: str, command: str) -> str:
    value = arguments.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise InvalidInput(name, f"is required for command {command!r}")
    if not isinstance(value, str):
        raise InvalidInput(name, f"must be a string, got {json_type(value)}")
    return value


def _optional(arguments: Mapping[str, Any], name: str) -> str | None:
    value = arguments.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(name, f"must be a string, got {json_type(value)}")
    return value


def _given(arguments: Mapping[str, Any], name: str, default: int) -> Any:
    value = arguments.get(name)
    return default if value is None else value


def run_command(knowledge: Knowledge, arguments: Mapping[str, Any]) -> str:
    """Run one `knowledge` tool call and return its text output."""
    command = arguments.get("command")
    if command not in COMMANDS:
        raise InvalidInput(
            "command", f"must be one of {', '.join(COMMANDS)}, got {as_json(command)}"
        )
    _check_taken(arguments, command)
    values = {name: _arg(arguments, name, command) for name in _NEEDS[command]}
    source = _optional(arguments, "source")
    if command == "search":
        return render_search(knowledge.search(values["query"], source=source))
    if command == "read":
        # (both before any fetch; null is left out, as clients sending every property send it)
        from_line = check_line(_given(arguments, "from_line", 1))
        from_byte = check_byte(_given(arguments, "from_byte", 0))
        document = knowledge.read(values["source"])
        bound = knowledge.config.knowledge.read_page_bytes
        return render_read(page(document, from_line, bound, from_byte))
    if command == "match":
        return render_match(knowledge.match(values["pattern"], source=source))
    if command == "store":
        return render_store(knowledge.store(values["key"], values["content"]))
    knowledge.delete(values["key"])
    return render_delete(values["key"])
