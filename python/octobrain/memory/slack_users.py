"""The names of a Slack export's members and channels, which its messages give only as ids.

Slack's export is a folder: `users.json` (every member: `{id, name, real_name, profile:
{display_name, real_name}}`), `channels.json`, `groups.json` (private channels), `mpims.json`
(group DMs), `dms.json` (DMs: `{id, members}`), and a folder per channel of a file per day. A
message written before Slack added `user_profile` to each (and a bot's) names its speaker
only by id (`U012AB3CD`); ingesting a day's file with `users.json` in its folder or the one
above names the speaker as Slack shows them, with `channels.json` (`[{id, name, …}]`) there
(or `groups.json`, `mpims.json`) a channel its messages give by id alone (`<#C024BE7LR>`) as
`#general`, and titles each turn with the channel whose folder holds it (`#general`; a DM's
or group DM's members: `Ana, Ben`).

A message's text is Slack's markup (its "Formatting text" reference): `<@U024BE7LH>` a member,
`<#C024BE7LR|general>` a channel, `<!here>` a group, `<url|label>` a link, and `&`, `<`, `>`
escaped as `&amp;`, `&lt;`, `&gt;`. `slack_text` reads it as a reader sees it (`@Bob`,
`#general`, `label (url)`, `<`), so it is indexed by the words a user searches by.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any, NamedTuple

from octobrain.errors import InvalidInput
from octobrain.json_values import UnreadableJSON, read_json
from octobrain.memory.chat_exports import conversation_title
from octobrain.memory.turn_fields import same_name, turn_name

log = logging.getLogger(__name__)

__all__ = [
    "CHANNELS_FILE",
    "CONVERSATION_FILES",
    "UNZIP",
    "USERS_FILE",
    "ExportNames",
    "export_file",
    "export_lists",
    "export_names",
    "member_names",
    "slack_text",
    "stored_before",
]

USERS_FILE = "users.json"
CHANNELS_FILE = "channels.json"
# The lists of an export's conversations, what each lists, and whether one is shown by its
# members' names (a DM, a group DM) rather than `#` and its name; a DM's folder is its id.
CONVERSATION_FILES = {
    CHANNELS_FILE: ("channels ({id, name})", False),
    "groups.json": ("private channels ({id, name})", False),
    "mpims.json": ("group DMs ({id, name, members})", True),
    "dms.json": ("direct messages ({id, members})", True),
}


class ExportNames(NamedTuple):
    """What a Slack export names, as `export_names` finds it."""

    names: dict[str, str] | None  # members by user id; channels by `#` and id
    channel: str  # the title of a day file's conversation: `#general`, `Ana, Ben`; or ""


# Why a zip archive (an export as Slack, and others, give it) is not ingested, and what is.
UNZIP = (
    "is a zip archive, not a conversation file; unzip it and ingest its folder, or ingest the "
    "archive by its path (memory ingest export.zip): a Slack export is read whole, a "
    "conversation per channel from its day files, <channel>/<YYYY-MM-DD>.json"
)
_NAMES = ("display_name", "real_name")  # a profile's, as Slack shows a member


def export_file(export: Path, name: str) -> Path | None:
    """The file `name` (`users.json`, `channels.json`) of the Slack export `export` (a
    channel's day file) is part of: in its folder, or the folder above (the export's root,
    beside the channel folders)."""
    if export.name == name:
        return None
    for folder in (export.parent, export.parent.parent):
        path = folder / name
        if path.is_file():
            return path
    return None


def export_names(export: Path, read: Callable[[Path], str], *, day: bool) -> ExportNames:
    """The names of the Slack export `export` is a day file of (its text read by `read`): of
    its members by user id, from the `users.json` `export_file` finds, and of its channels
    (public, private, group DMs) by `#` and id, from its `CONVERSATION_FILES` (None without
    any of them); and the title of the conversation whose folder holds `export`. A file not
    Slack's list (another program's file of that name, in the folder of any file ingested
    or the one above) names nothing (it refused the ingest of that file); where `export` is
    named as a Slack day file is (`day`), a warning says so (`export_lists`)."""

    def listed(name: str) -> tuple[str, str] | None:
        path = export_file(export, name)
        return None if path is None else (str(path), read(path))

    names, titles = export_lists(listed, said=day)
    return ExportNames(names, titles.get(same_name(export.parent.name), ""))


def export_lists(
    listed: Callable[[str], tuple[str, str] | None], *, said: bool = True
) -> tuple[dict[str, str] | None, dict[str, str]]:
    """The names a Slack export's lists give (`export_names`), and the title of each of its
    conversations by the name of the folder of its day files (`same_name`'s); `listed(name)`
    is where the export's list `name` is and its text, or None without one. A list that
    cannot be read as Slack's (not UTF-8, not JSON, not a list: broken, or another
    program's) is skipped, the ingest going on, and (`said`) a warning logged naming it."""
    members: dict[str, str] | None = None
    try:
        if (users := listed(USERS_FILE)) is not None:
            members = member_names(*users)
    except InvalidInput as exc:
        _unread(USERS_FILE, exc, said, "its members are named by their Slack user id")
    found, titles = members, dict[str, str]()
    for name, (kind, by_members) in CONVERSATION_FILES.items():
        try:
            if (text := listed(name)) is None:
                continue
            conversations = _listed(text[0], text[1], kind)
            names, titled = _conversations(text[0], conversations, by_members, members or {})
        except InvalidInput as exc:
            what = kind.split(" (")[0]
            _unread(name, exc, said, f"the {what} it lists are named by id, their turns untitled")
            continue
        found, titles = (found or {}) | names, titled | titles  # (the first list's title)
    return found, titles


def _unread(name: str, exc: InvalidInput, said: bool, lost: str) -> None:
    """Say (`said`) that the export's list `name` was not read, why (`exc`), and what that
    leaves unnamed: once, on stderr through logging, as an ingest's other notices are."""
    if said:
        where, rule = (exc.field, exc.rule) if name in exc.field else (name, str(exc))
        log.warning("warning: %s: not read, %s; %s", where, rule, lost)


def _conversations(
    field_name: str,
    listed: list[Any],
    by_members: bool,
    members: Mapping[str, str],
) -> tuple[dict[str, str], dict[str, str]]:
    """`#` and id → the name of each conversation `listed` (a `CONVERSATION_FILES` list) names
    (`#C024BE7LR` → `general`), and the folder of each one's day files → its title: `#` and
    its name, or (`by_members`: a DM's, a group DM's) its members' names (`Ana, Ben`)."""
    names: dict[str, str] = {}
    titles: dict[str, str] = {}
    for i, conversation in enumerate(listed):
        if not isinstance(conversation, dict) or not isinstance(conversation.get("id"), str):
            continue  # (not a conversation: nothing to name)
        name, held = conversation.get("name"), conversation.get("members")
        if isinstance(name, str) and name.strip():
            name = turn_name(f"{field_name}[{i}].name", name, None)
            names["#" + conversation["id"]] = name
        else:
            name = None
        folder = same_name(name or conversation["id"])  # (a DM's day files: in its id's)
        if folder in titles:
            continue
        held = held if isinstance(held, list) else []
        said = [members.get(m, m) for m in held if isinstance(m, str)]
        shown = ", ".join(said) if by_members and said else f"#{name}" if name else ""
        with suppress(InvalidInput):  # (a title that cannot be shown: none)
            titles[folder] = conversation_title(f"{field_name}[{i}]", shown) if shown else ""
    return names, titles


def _listed(field_name: str, text: str, kind: str) -> list[Any]:
    """The list of a Slack export's `users.json` or one of its `CONVERSATION_FILES` (`kind`:
    what it lists)."""
    try:
        listed: Any = read_json(text)
    except UnreadableJSON as exc:
        raise InvalidInput(field_name, f"{exc.reason}; expected Slack's list of {kind}") from None
    if not isinstance(listed, list):
        raise InvalidInput(field_name, f"must be Slack's list of {kind}")
    return listed


def member_names(field_name: str, text: str) -> dict[str, str]:
    """User id → the name Slack shows, from a `users.json`'s text; refusals name
    `field_name`."""
    members = _listed(field_name, text, "members ({id, name, profile})")
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


def stored_before(written: str, shown: str, members: Mapping[str, str]) -> tuple[str, ...]:
    """The text of a Slack message written `written` and shown `shown` as earlier versions
    stored it: as written (before its markup was read), and with a channel given by id alone
    shown by that id (before `channels.json` was read); none where reading it changed
    nothing."""
    if written == shown:
        return ()
    unnamed = slack_text(written, members, channels=False) if "<#" in written else shown
    return tuple(dict.fromkeys(t.strip() for t in (written, unnamed) if t != shown))


_MARKUP = re.compile(r"<([^<>\n]*)>")  # (a `<` or `>` said is escaped: each pair is markup)
_ESCAPED = re.compile(r"&(amp|lt|gt);")
_UNESCAPED = {"amp": "&", "lt": "<", "gt": ">"}
_GROUPS = ("here", "channel", "everyone", "group")  # `<!here>`: shown `@here`


def slack_text(text: str, members: Mapping[str, str], *, channels: bool = True) -> str:
    """A Slack message's `text` as Slack shows it: its markup read, `members` (user id →
    name; `#` and channel id → name, unless `channels` is false, as versions before channels
    were named) naming whom and what it mentions, and its escapes undone."""
    shown, end = [], 0
    for markup in _MARKUP.finditer(text):
        shown += [_unescaped(text[end : markup.start()]), _shown(markup[1], members, channels)]
        end = markup.end()
    return "".join((*shown, _unescaped(text[end:])))


def _unescaped(text: str) -> str:
    return _ESCAPED.sub(lambda m: _UNESCAPED[m[1]], text)


def _shown(markup: str, members: Mapping[str, str], channels: bool) -> str:
    """What Slack shows for `<markup>`: a mention by name (a channel's own label first; else
    its id, where the export does not name it), a link by its label and address."""
    target, _, label = markup.partition("|")
    label = _unescaped(label)
    if target.startswith("@"):  # a member (`<@U123|bob>` as older messages write it)
        return "@" + (members.get(target[1:]) or label or target[1:])
    if target.startswith("#"):  # a channel
        return "#" + (label or (members.get(target) if channels else None) or target[1:])
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
