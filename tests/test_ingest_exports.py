"""`memory ingest` of chat exports as products write them: an OpenAI messages list, Slack's
channel file, DiscordChatExporter's JSON, hand-made keys (`Speaker`, `timestamp`), and the
exports that nest their turns (Claude.ai, ChatGPT), refused saying what to give."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from octobrain.errors import InvalidInput
from octobrain.memory.conversation import parse_text
from tests.test_ingest import brain, stored

SAID = "2024-03-05T10:00:00Z"
MARCH_5 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)


def turns_of(document: Any) -> list[tuple[str, str, datetime | None]]:
    (conversation,) = parse_text(json.dumps(document))
    return [(t.speaker, t.text, t.time) for t in conversation.turns]


@pytest.mark.parametrize(
    "record",
    [
        {"speaker": "Ann", "text": "Kiln at 1200.", "timestamp": SAID},
        {"Speaker": "Ann", "Text": "Kiln at 1200.", "Time": SAID},
        {" speaker ": "Ann", " text ": "Kiln at 1200.", "created_at": SAID},
        {"author": "Ann", "content": "Kiln at 1200.", "createdAt": SAID},
        {"sender": "Ann", "message": "Kiln at 1200.", "date": SAID},
    ],
)
def test_a_turn_s_fields_are_read_under_the_spellings_exports_use(record: dict[str, str]) -> None:
    # Before: `timestamp` was left unread (the turn dated at the ingest), `Speaker` or
    # ` text ` was "not a known conversation format", `author` "speaker: must be a non-empty
    # string", `content` "text: must be a string".
    assert turns_of([record]) == [("Ann", "Kiln at 1200.", MARCH_5)]


def test_an_openai_messages_list_is_a_chat_of_roles() -> None:
    # Before: `file: is not a known conversation format`.
    messages = [
        {"role": "user", "content": "Which database did we pick?"},
        {"role": "assistant", "name": "Max", "content": [{"type": "text", "text": "Postgres."}]},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
    ]
    assert turns_of(messages) == [
        ("user", "Which database did we pick?", None),
        ("Max", "Postgres.", None),  # (a name says more than a role)
    ]
    assert turns_of({"messages": messages[:1]}) == [("user", "Which database did we pick?", None)]


def test_slack_and_discord_exports_keep_speaker_and_time(tmp_path: Path) -> None:
    # Before: `turns[0].speaker: must be a non-empty string` (Slack), `not a known
    # conversation format` (Discord's messages under `messages`, its author an object).
    slack = [
        {
            "type": "message",
            "user": "U024BE7LH",
            "user_profile": {"real_name": "Ana Lopez", "display_name": ""},
            "text": "The release train leaves Thursday.",
            "ts": "1709632800.000200",
        }
    ]
    assert turns_of(slack) == [
        ("Ana Lopez", "The release train leaves Thursday.", MARCH_5.replace(microsecond=200))
    ]
    discord = {
        "channel": {"name": "general"},
        "messages": [
            {
                "id": "111",
                "timestamp": "2024-03-05T10:00:00.000+00:00",
                "content": "Game night moved to Friday.",
                "author": {"id": "9", "name": "kira", "nickname": "Kira"},
            },
            {
                "id": "112",
                "timestamp": "2024-03-05T10:01:00.000+00:00",
                "content": "Friday is fine for me.",
                "author": {"id": "8", "name": "lev", "nickname": "Lev"},
            },
        ],
    }
    b = brain(tmp_path)
    (conversation,) = parse_text(json.dumps(discord))
    assert b.ingest([conversation]).added == 2
    first = stored(b)["Game night moved to Friday."]
    assert first.title == "Kira, 05 March 2024"
    assert first.created_at == MARCH_5
    assert "Answered with: Friday is fine for me." in first.context
    (again,) = parse_text(json.dumps(discord))
    assert b.ingest([again]).added == 0


@pytest.mark.parametrize(
    ("record", "refusal"),
    [
        (
            {"who": "Ann", "text": "hi"},
            "turns[0].speaker: is missing; a turn's speaker is read from one of speaker, name, ",
        ),
        (
            {"speaker": "Ann", "body ": 5},
            "turns[0].body: must be a string",
        ),
        (
            {"speaker": "Ann", "text": "hi", "timestamp": "next week"},
            "turns[0].timestamp: must be ISO-8601",
        ),
    ],
)
def test_a_field_refused_is_named_as_the_export_spells_it(
    record: dict[str, Any], refusal: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse_text(json.dumps([record]))
    assert str(refused.value).startswith(refusal)


@pytest.mark.parametrize(
    ("conversation", "named"),
    [
        ({"uuid": "c1", "name": "Trip", "chat_messages": []}, "jq '.[0].chat_messages'"),
        ({"title": "Trip", "mapping": {}, "create_time": 1.0}, "ChatGPT export"),
    ],
)
def test_an_export_of_whole_conversations_is_refused_saying_what_to_give(
    conversation: dict[str, Any], named: str
) -> None:
    # Before: a Claude.ai export read as a chat (its `name` taken for a speaker): "text:
    # must be a string"; ChatGPT's "not a known conversation format".
    with pytest.raises(InvalidInput) as refused:
        parse_text(json.dumps([conversation]))
    assert named in str(refused.value)
