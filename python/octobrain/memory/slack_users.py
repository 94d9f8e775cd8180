"""The names of a Slack export's members, which its messages give only as user ids.

Slack's export is a folder: `users.json` (every member: `{id, name, real_name, profile:
{display_name, real_name}}`), `channels.json`, and a folder per channel of a file per day. A
message written before Slack added `user_profile` to each (and a bot's) names its speaker
only by id (`U012AB3CD`); ingesting a day's file with `users.json` in its folder or the one
above names the speaker as Slack shows them.

A message's text is Slack's markup (its "Formatting text" reference): `<@U024BE7LH>` a member,
`<#C024BE7LR|general>` a channel, `<!here>` a group, `<url|label>` a link, and `&`, `<`, `>`
escaped as `&amp;`, `&lt;`, `&gt;`. `slack_text` reads it as a reader sees it (`@Bob`,
`#general`, `label (url)`, `<`), so it is indexed by the words a user searches by.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from octobrain.errors import InvalidInput
from octobrain.json_values import UnreadableJSON, read_json
from octobrain.memory.turn_fields import turn_name

__all__ = ["USERS_FILE", "export_members", "member_names", "slack_text", "users_file"]

USERS_FILE = "users.json"
_NAMES = ("display_name", "real_name")  # a profile's, as Slack shows a member


def users_file(export: Path) -> Path | None:
    """The `users.json` of the Slack export `export` (a channel's day file) is part of: in its
    folder, or the folder above (the export's root, beside the channel folders)."""
    for folder in (export.parent, export.parent.parent):
        path = folder / USERS_FILE
        if path.is_file():
            return path
    return None


def export_members(export: Path, read: Callable[[Path], str]) -> dict[str, str] | None:
    """The names of the members of the Slack export `export` is a day file of, from the
    `users.json` `users_file` finds (its text read by `read`); None without one, or when the
    one found is not Slack's list of members: another program's file of that name, in the
    folder of any file ingested or the one above, refused the ingest of that file."""
    users = users_file(export) if export.name != USERS_FILE else None
    if users is None:
        return None
    try:
        return member_names(str(users), read(users))
    except InvalidInput:
        return None


def member_names(field_name: str, text: str) -> dict[str, str]:
    """User id → the name Slack shows, from a `users.json`'s text; refusals name
    `field_name`."""
    try:
        members: Any = read_json(text)
    except UnreadableJSON as exc:
        raise InvalidInput(field_name, f"{exc.reason}; expected Slack's list of members") from None
    if not isinstance(members, list):
        raise InvalidInput(field_name, "must be Slack's list of members ({id, name, profile})")
    names: dict[str, str] = {}
    for i, member in enumerate(members):
        if not isinstance(member, dict) or not isinstance(member.get("id"), str):
            continue  # (not a member: nothing to name)
        profile = member.get("profile")
        found = [profile.get(k) for k in _NAMES] if isinstance(profile, dict) else []
        found += [member.get("real_name"), member.get("name")]
        name = next((n for n in found if isinstance(n, str) and n.strip()), None)
        if name is not None:  # (a NUL or a lone surrogate named here, not in a turn)
            names[member["id"]] = turn_name(f"{field_name}[{i}]", name, None)
    return names


_MARKUP = re.compile(r"<([^<>\n]*)>")  # (a `<` or `>` said is escaped: each pair is markup)
_ESCAPED = re.compile(r"&(amp|lt|gt);")
_UNESCAPED = {"amp": "&", "lt": "<", "gt": ">"}
_GROUPS = ("here", "channel", "everyone", "group")  # `<!here>`: shown `@here`


def slack_text(text: str, members: Mapping[str, str]) -> str:
    """A Slack message's `text` as Slack shows it: its markup read, `members` (user id →
    name) naming whom it mentions, and its escapes undone."""
    shown, end = [], 0
    for markup in _MARKUP.finditer(text):
        shown += [_unescaped(text[end : markup.start()]), _shown(markup[1], members)]
        end = markup.end()
    return "".join((*shown, _unescaped(text[end:])))


def _unescaped(text: str) -> str:
    return _ESCAPED.sub(lambda m: _UNESCAPED[m[1]], text)


def _shown(markup: str, members: Mapping[str, str]) -> str:
    """What Slack shows for `<markup>`: a mention by name (its own label, else its id, where
    the export does not name it), a link by its label and address."""
    target, _, label = markup.partition("|")
    label = _unescaped(label)
    if target.startswith("@"):  # a member (`<@U123|bob>` as older messages write it)
        return "@" + (members.get(target[1:]) or label or target[1:])
    if target.startswith("#"):  # a channel
        return "#" + (label or target[1:])
    if target.startswith("!"):  # `<!here>`, `<!subteam^S123|@team>`, `<!date^…|fallback>`
        kind, _, rest = target[1:].partition("^")
        if kind in _GROUPS:
            return "@" + kind
        if kind == "date":
            return label
        return label or "@" + (rest or kind)
    url = _unescaped(target)
    address = url.removeprefix("mailto:")
    bare = address.split("://", 1)[-1]
    if not label:
        return address
    return label if label in (url, address, bare) else f"{label} ({address})"
