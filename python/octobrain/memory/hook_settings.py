"""`octobrain hook install`: octobrain's three hook entries merged into a Claude Code settings
file (SessionStart, PreCompact, SessionEnd), each running `<command> hook <event>`, with
`--role R` when the hooks are a role's."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from octobrain.errors import InvalidInput, json_printable
from octobrain.files import TooLarge, named_by, read_regular
from octobrain.json_values import UnreadableJSON, read_json

__all__ = ["default_command", "hook_command", "install_hooks", "load_settings", "render_settings"]

HOOKS = (
    ("SessionStart", "session-start", 30),
    ("PreCompact", "pre-compact", 60),
    ("SessionEnd", "session-end", 60),
)


def hook_command(given: str) -> str:
    """`--command` as the shell must read it: a path to a file that holds a space (or another
    character the shell parts words at) is quoted, as the default is (`/opt/my dir/octobrain`
    ran `/opt/my`: exit 127 at every hook); anything else is a command line as written."""
    text = given.strip()
    return shlex.quote(text) if os.path.isfile(text) and shlex.quote(text) != text else text


def default_command() -> str:
    """How Claude Code should run octobrain: the installed script, else this interpreter."""
    found = shutil.which("octobrain")
    if found:
        return shlex.quote(found)
    return f"{shlex.quote(sys.executable)} -m octobrain"


def _installed(entries: list[Any], sub: str, prefix: str) -> dict[str, Any] | None:
    """The handler of an entry that already runs octobrain's `hook <sub>` (any install path of
    it, with options or a redirection after it: `… hook session-end --scope x 2>>log`), or
    None. (Only a command ending in `hook <sub>` was known: one with the documented options
    was installed again beside itself, and every session got two briefings.)"""
    for entry in entries:
        handlers = entry.get("hooks", []) if isinstance(entry, dict) else []
        for handler in handlers if isinstance(handlers, list) else []:
            command = handler.get("command", "") if isinstance(handler, dict) else ""
            if not isinstance(command, str) or not _runs_hook(command, sub):
                continue
            if "octobrain" in command or command.strip().startswith(f"{prefix} hook {sub}"):
                return handler  # type: ignore[no-any-return]
    return None


def _runs_hook(command: str, sub: str) -> bool:
    """Whether a shell command's words hold `hook <sub>` (`octobrain`'s, by `_installed`)."""
    try:
        words = shlex.split(command)
    except ValueError:  # (an unbalanced quote: the words as spaces part them)
        words = command.split()
    return any(words[i : i + 2] == ["hook", sub] for i in range(len(words) - 1))


def install_hooks(
    settings: dict[str, Any], command: str, role: str | None = None
) -> tuple[dict[str, Any], list[str]]:
    """`settings` with octobrain's hook entries added where missing (a copy), and the events
    changed. Other keys and other hooks are kept as they are. An entry that runs a bare
    `octobrain` (found on PATH, which Claude Code's environment may not have) is pointed at
    `command` when that is a path. With `role`, every entry runs as that role: `--role` is
    added to an entry installed without one, or put in place of another role's; "" takes it
    out; None (not given) keeps the role each entry runs as."""
    out = json.loads(json.dumps(settings))
    hooks = out.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise InvalidInput("settings.hooks", "must be a JSON object")
    changed = []
    for event, sub, timeout in HOOKS:
        entries = hooks.setdefault(event, [])
        if not isinstance(entries, list):
            raise InvalidInput(f"settings.hooks.{event}", "must be a JSON array")
        handler = _installed(entries, sub, command)
        if handler is not None:
            now = []
            program, _, rest = handler["command"].strip().partition(" ")
            if program == "octobrain" and "/" in command:  # not `uvx octobrain …` and the like
                handler["command"] = f"{command} {rest}"
                now.append(command)
            if role is not None and _role_of(handler["command"], sub) not in (role, None):
                handler["command"] = _with_role(handler["command"], sub, role)
                now.append(_as_role(role).strip() or "no role")
            if now:
                changed.append(f"{event} (now {', '.join(now)})")
            continue
        run = f"{command} hook {sub}{_as_role(role or '')}"
        entry: dict[str, Any] = {"hooks": [{"type": "command", "command": run, "timeout": timeout}]}
        if event == "SessionStart":
            entry = {"matcher": "startup|resume|clear|compact", **entry}
        entries.append(entry)
        changed.append(event)
    return out, changed


def _as_role(role: str) -> str:
    return f" --role {shlex.quote(role)}" if role else ""


def _role_of(command: str, sub: str) -> str | None:
    """The role octobrain's `hook <sub>` in `command` runs as ("" none; the last `--role`
    given, as click reads them), or None when the shell's words cannot be read."""
    try:
        words = shlex.split(command)
    except ValueError:  # (an unbalanced quote: left as it is)
        return None
    at = next((i for i in range(len(words) - 1) if words[i : i + 2] == ["hook", sub]), None)
    if at is None:
        return None
    role = ""
    for i, word in enumerate(words[at + 2 :], at + 2):
        if word == "--role" and i + 1 < len(words):
            role = words[i + 1]
        elif word.startswith("--role="):
            role = word.removeprefix("--role=")
    return role


# A shell word (quoted, escaped or bare, up to an operator or a redirection), and a `--role`
# option with its value: what `_with_role` takes out of a command.
_WORD = r"""(?:'[^']*'|"(?:[^"\\]|\\.)*"|\\.|[^\s'"\\;&|<>()])+"""
_ROLE = re.compile(rf"\s+--role(?:=(?:{_WORD})?|\s+{_WORD})(?![^\s;&|<>()])")


def _with_role(command: str, sub: str, role: str) -> str:
    """`command` running octobrain's `hook <sub>` as `role` ("": none), the rest of it as
    written: the `--role` options after `hook <sub>` taken out, `--role <role>` put right
    after it (before any redirection)."""
    at = re.search(rf"(?<!\S)hook\s+{re.escape(sub)}(?!\S)", command)
    if at is None:
        return command
    return command[: at.end()] + _as_role(role) + _ROLE.sub("", command[at.end() :])


# Claude Code's settings are a few kB; a file far past that is not one (`/dev/zero` read whole
# took 5 GB in 8 s).
SETTINGS_BYTES = 4 << 20


def load_settings(path: Path) -> tuple[str, dict[str, Any]]:
    """A settings file's text and JSON object ("" and {} when it does not exist yet); only a
    regular file of at most `SETTINGS_BYTES`, in UTF-8, is read."""
    if not os.path.lexists(path):
        return "", {}
    with named_by("settings", path, "is a directory; name the settings file"):
        try:
            raw, _ = read_regular(path, SETTINGS_BYTES)
        except TooLarge:
            raise InvalidInput("settings", f"{path} is over {SETTINGS_BYTES:,} bytes") from None
    try:
        text = raw.decode("utf-8")
        body = text.removeprefix("\ufeff")  # (a byte order mark: UTF-8 as Windows saves it)
        data = read_json(body) if body.strip() else {}
    except UnicodeDecodeError:
        raise InvalidInput("settings", f"{path} is not UTF-8 text; fix it first") from None
    except UnreadableJSON as exc:
        raise InvalidInput("settings", f"{path} {exc.reason}; fix it first") from None
    if not isinstance(data, dict):
        raise InvalidInput("settings", f"{path} must hold a JSON object")
    try:  # (Python reads NaN and Infinity; written back, Claude Code could not read the file)
        json.dumps(data, allow_nan=False)
    except ValueError:
        raise InvalidInput(
            "settings", f"{path} holds NaN or Infinity, which JSON has not; fix it first"
        ) from None
    return text, data


def render_settings(settings: dict[str, Any]) -> str:
    """Settings as Claude Code writes them: 2-space JSON and a final newline. A string the file
    held as a `\\u` escape that UTF-8 cannot write (a lone surrogate: "\\ud800") stays one."""
    return json_printable(settings, indent=2) + "\n"
