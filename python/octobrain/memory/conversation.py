"""Conversations read from transcripts: a Claude Code session (JSONL), a generic chat export
(`[{speaker, text, time}]` as JSON or JSONL), LoCoMo's format and Claude.ai's and ChatGPT's
data exports (`chat_exports`) and WhatsApp's text export (`whatsapp_text`), all to one shape.

A `Conversation` is a list of `Turn`s grouped in sessions; each turn has a key that is stable
across re-reads of the same file (its own id where the format has one; else, for a chat turn
with a time, what was said when and by whom, `turn_keys`; else its position in its session and
its text), which is what makes a re-ingest add nothing new. A file's bytes are read and decoded
in `conversation_bytes`, its text parsed in `conversation_parse` (pure: no store, no model);
this module names what a file's conversations are stored under.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import BinaryIO

from octobrain.errors import InvalidInput
from octobrain.memory.conversation_bytes import MAX_FILE_BYTES, decoded, piped_text, read_text
from octobrain.memory.conversation_formats import FORMATS
from octobrain.memory.conversation_parse import (
    SESSION_GAP,
    chat_turns,
    detect_format,
    once,
    parse_chat,
    parse_text,
)
from octobrain.memory.slack_users import export_names
from octobrain.memory.turn_fields import LONE, conversation_name, same_name
from octobrain.memory.turns import Conversation, Turn

__all__ = [
    "FORMATS",
    "MAX_FILE_BYTES",
    "SESSION_GAP",
    "SPEAKER_PREFIX",
    "Conversation",
    "Turn",
    "chat_turns",
    "conversation_name",
    "decoded",
    "detect_format",
    "once",
    "parse_chat",
    "parse_text",
    "read_conversations",
    "read_piped_conversations",
    "read_text",
]

SPEAKER_PREFIX = "speaker:"  # the tag naming who said an ingested turn
CONVERSATION_PREFIX = "conversation:"  # the tag naming the conversation a turn belongs to


def is_turn(tags: Sequence[str] | None) -> bool:
    """Whether a memory tagged `tags` is a turn of an ingested conversation."""
    return any(t.startswith(CONVERSATION_PREFIX) for t in tags or ())


def read_conversations(
    path: str | Path, fmt: str = "auto", *, name: str | None = None
) -> list[Conversation]:
    """The conversations in a file; `fmt` one of `FORMATS` (auto: detected from the content).

    A conversation is stored under its own id (a Claude Code session id, a LoCoMo
    `sample_id`), else under the file's name without its extension; `name` stores the file's
    one conversation under that name instead (two exports both called `result.json` are two
    conversations, not one)."""
    file = Path(path)
    if name is not None:
        name = conversation_name("conversation", name)
    text = read_text(file)
    stem = Path(file.stem).stem if file.suffix == ".gz" else file.stem  # (talk.jsonl.gz: talk)
    stem = same_name(LONE.sub("\ufffd", stem))  # (bytes not UTF-8: as Python reads them)
    from octobrain.memory.slack_export import DAY_FILE, by_channel  # (a Slack day's)

    day = DAY_FILE.fullmatch(file.name) is not None  # (its lists not read: said)
    people, channel = export_names(file, lambda listed: read_text(listed, str(listed)), day=day)
    conversations = _conversations(text, fmt, name, stem, str(file), people)
    return by_channel(conversations, file, stem, channel, name is None and people is not None)


_UNNAMED = "\x00"  # (no name given can hold a NUL)


def read_piped_conversations(
    stream: BinaryIO, fmt: str = "auto", *, name: str | None = None
) -> list[Conversation]:
    """The conversations `stream` (standard input: `memory ingest -`) holds, as
    `read_conversations` reads a file's. A conversation without an id of its own (a chat
    export's) needs `name`: there is no file name to store it under, and one default for
    every piped chat would join them into one conversation."""
    if name is not None:
        name = conversation_name("conversation", name)
    conversations = _conversations(piped_text(stream), fmt, name, _UNNAMED, "standard input")
    if any(conversation.key == _UNNAMED for conversation in conversations):
        raise InvalidInput(
            "conversation",
            "is required to ingest standard input (-) holding a conversation without an id of "
            "its own (a chat export): --conversation NAME names what its turns are stored under",
        )
    return conversations


def _conversations(
    text: str,
    fmt: str,
    name: str | None,
    stem: str,
    file: str,
    people: Mapping[str, str] | None = None,
) -> list[Conversation]:
    """The conversations a file's text holds (`read_conversations`), `stem` the name of one
    without an id of its own, `file` what the file is called in a message, `people` the
    names of a Slack export's members."""
    conversations = parse_text(text, fmt, default_key=name or stem, people=people)
    if name is None:
        return conversations
    if len(conversations) != 1:
        raise InvalidInput(
            "conversation", f"names one conversation; {file} holds {len(conversations)}"
        )
    return [replace(conversations[0], key=name)]
