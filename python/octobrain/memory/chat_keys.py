"""The keys of a chat export's turn as exports spell them, read as `{speaker, text, time,
session, id}`.

Exports name a turn's fields each their own way: an OpenAI messages list `{role, content}`
(its content a string or a list of text parts), Slack `{user, user_profile, text, ts}` (`ts`
a string of Unix seconds), DiscordChatExporter `{author: {name, nickname}, content,
timestamp}` under `messages`, and hand-made ones `Speaker`, `timestamp`, `created_at`. A key
is matched without case, spaces, `_` or `-`; where a turn holds two spellings of one field,
the first in `SPELLINGS` is read (a name before a role, `text` before `content`). Errors name
the key as written (`turns[0].timestamp`).
"""

from __future__ import annotations

from typing import Any

from octobrain.errors import InvalidInput

__all__ = [
    "SPELLINGS",
    "accepted",
    "chat_fields",
    "looks_like_chat",
    "parts_text",
    "read_as",
    "unsaid",
]

SPELLINGS: dict[str, tuple[str, ...]] = {
    "speaker": ("speaker", "name", "author", "sender", "from", "user_profile", "user", "role"),
    "text": ("text", "content", "message", "body"),
    "time": ("time", "timestamp", "ts", "created_at", "create_time", "date", "datetime", "sent_at"),
    "session": ("session", "session_id"),
    "id": ("id", "uuid", "message_id"),
}
# An author given as an object (Discord's `author`, Slack's `user_profile` beside its user id,
# ChatGPT's): its shown name, else its role.
_AUTHOR_NAMES = ("nickname", "display_name", "real_name", "name", "role")


def _folded(key: str) -> str:
    return "".join(c for c in key.lower() if c not in " _-\t")


_FIELD_OF = {_folded(s): field for field, spellings in SPELLINGS.items() for s in spellings}
_RANK = {_folded(s): i for spellings in SPELLINGS.values() for i, s in enumerate(spellings)}


def accepted(field: str) -> str:
    """The spellings read as `field`, for a message."""
    return ", ".join(SPELLINGS[field])


def read_as(key: str) -> str | None:
    """The field a file's chat export reads under `key` (`timestamp`: time), else None: what
    MCP's `ingest`, whose schema names each field one way, says to write instead."""
    return _FIELD_OF.get(_folded(key))


def looks_like_chat(record: dict[Any, Any]) -> bool:
    """Whether `record` holds a speaker or a text under any spelling."""
    return any(
        _FIELD_OF.get(_folded(k)) in ("speaker", "text") for k in record if isinstance(k, str)
    )


# An OpenAI message's roles that say nothing in the conversation: its instructions (`system`,
# `developer`) and a tool's result (`tool`, `function`).
_UNSAID_ROLES = frozenset(("system", "developer", "tool", "function"))
# Slack's notices, written as messages of a subtype: someone joined, left, set the topic.
_NOTICES = frozenset(
    f"{kind}_{what}"
    for kind in ("channel", "group")
    for what in ("join", "leave", "topic", "purpose", "name", "archive", "unarchive")
)


def unsaid(record: dict[Any, Any]) -> bool:
    """Whether a chat record holds nothing said in the conversation: an OpenAI system or
    developer prompt, a tool's result, an assistant's call to a tool without text, or a Slack
    notice (`channel_join` …)."""
    folded = {_folded(k): v for k, v in record.items() if isinstance(k, str)}
    role, subtype = folded.get("role"), folded.get("subtype")
    # (OpenAI's where it names the speaker: beside a `speaker` or `author`, a member's role)
    said_by = next(k for k in map(_folded, SPELLINGS["speaker"]) if k in folded or k == "role")
    if said_by == "role" and isinstance(role, str) and role.strip().lower() in _UNSAID_ROLES:
        return True
    if isinstance(subtype, str) and subtype in _NOTICES:
        return True
    calling = folded.get("toolcalls") or folded.get("functioncall")
    return bool(calling) and not folded.get("content")


def chat_fields(where: str, record: dict[Any, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """A turn's fields under their names here, and each one's name as the record wrote it
    (`<where>.<name>` in an error). A speaker or text under no spelling is refused naming the
    spellings read; an author object is read as its name, a list of text parts as their
    text."""
    values: dict[str, Any] = {}
    names: dict[str, str] = {}
    ranks: dict[str, int] = {}
    for key, value in record.items():
        folded = _folded(key) if isinstance(key, str) else ""
        field = _FIELD_OF.get(folded)
        if field is None or value is None or ranks.get(field, len(_RANK)) <= _RANK[folded]:
            continue
        values[field], names[field], ranks[field] = value, key.strip(), _RANK[folded]
    for field in ("speaker", "text"):
        if field not in values:
            raise InvalidInput(
                f"{where}.{field}",
                f"is missing; a turn's {field} is read from one of {accepted(field)}",
            )
    speaker = values["speaker"]
    if isinstance(speaker, dict):
        shown = (speaker.get(k) for k in _AUTHOR_NAMES)
        values["speaker"] = next((s for s in shown if isinstance(s, str) and s.strip()), None)
    if isinstance(values["text"], list):
        values["text"] = parts_text(f"{where}.{names['text']}", values["text"])
    return values, names


def parts_text(field_name: str, parts: list[Any]) -> str:
    """The text of a message given in parts (OpenAI's `[{type: text, text}]`, ChatGPT's
    strings): its text parts joined by a blank line; others (an image) left out."""
    texts = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif not isinstance(part, dict):
            raise InvalidInput(field_name, "must be a string or a list of text parts")
    return "\n\n".join(t for t in texts if t.strip())
