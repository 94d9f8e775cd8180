"""`memory ingest` of chat exports as products write them: an OpenAI messages list, Slack's
channel file, DiscordChatExporter's JSON, hand-made keys (`Speaker`, `timestamp`), and the
data exports that nest whole conversations (Claude.ai's, ChatGPT's conversations.json)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from octobrain.errors import InvalidInput
from octobrain.memory.conversation import parse_text, read_conversations
from tests.ingest_support import brain, stored

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


CLAUDE_AI = [
    {
        "uuid": "c-trip",
        "name": "Lisbon trip",
        "created_at": "2024-03-05T09:59:00Z",
        "chat_messages": [
            {
                "uuid": "m1",
                "sender": "human",
                "text": "Book the hotel near Alfama.",
                "content": [{"type": "text", "text": "Book the hotel near Alfama."}],
                "created_at": SAID,
            },
            {
                "uuid": "m2",
                "sender": "assistant",
                "text": "",
                "content": [
                    {"type": "thinking", "thinking": "They want Alfama."},
                    {"type": "tool_use", "name": "web_search", "input": {"q": "hotel"}},
                    {"type": "text", "text": "Booked Memmo Alfama for 12 March."},
                ],
                "created_at": "2024-03-05T10:00:30Z",
            },
            {"uuid": "m3", "sender": "human", "text": " ", "content": [], "created_at": SAID},
        ],
    },
    {"uuid": "c-empty", "name": "", "created_at": SAID, "chat_messages": []},
]


def chatgpt_node(
    node: str, parent: str | None, children: list[str], role: str, text: str, **more: Any
) -> dict[str, Any]:
    message = {
        "id": node,
        "author": {"role": role},
        "content": {"content_type": more.pop("content_type", "text"), "parts": [text]},
        "create_time": 1709632800.0,
        **more,
    }
    return {"id": node, "message": message, "parent": parent, "children": children}


CHATGPT = [
    {
        "title": "Garden",
        "create_time": 1709632800.0,
        "conversation_id": "g-1",
        "current_node": "a2",
        "mapping": {
            "root": {"id": "root", "message": None, "parent": None, "children": ["sys"]},
            "sys": chatgpt_node("sys", "root", ["q1"], "system", "You are ChatGPT."),
            "q1": chatgpt_node("q1", "sys", ["a1", "t1"], "user", "When do I plant garlic?"),
            "a1": chatgpt_node("a1", "q1", [], "assistant", "Plant it in spring."),  # (dropped)
            "t1": chatgpt_node(
                "t1",
                "q1",
                ["r1"],
                "assistant",
                "search('garlic')",
                recipient="browser",
                content_type="code",
            ),
            "r1": chatgpt_node("r1", "t1", ["a2"], "tool", "Garlic: plant in autumn."),
            "a2": chatgpt_node("a2", "r1", [], "assistant", "Plant garlic in October."),
        },
    }
]


def test_a_claude_ai_export_is_one_conversation_each_keyed_to_add_only_what_is_new(
    tmp_path: Path,
) -> None:
    # Before: "file: holds a Claude.ai export's conversations ... jq '.[0].chat_messages'".
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(CLAUDE_AI))
    trip, empty = read_conversations(path)
    assert (trip.key, empty.key) == ("c-trip", "c-empty")
    assert [(t.speaker, t.text, t.key) for t in trip.turns] == [
        ("user", "Book the hotel near Alfama.", "m1"),
        ("assistant", "Booked Memmo Alfama for 12 March.", "m2"),  # (no tool use, no thinking)
    ]
    assert trip.blank == 1 and trip.turns[0].time == MARCH_5
    b = brain(tmp_path)
    assert b.ingest([trip, empty]).added == 2
    later = json.loads(path.read_text())
    later[0]["chat_messages"].append(
        {"uuid": "m4", "sender": "human", "text": "Thanks!", "created_at": SAID}
    )
    path.write_text(json.dumps(later))
    assert b.ingest(read_conversations(path)).added == 1


def test_a_chatgpt_export_follows_the_branch_kept_and_leaves_out_system_and_tools(
    tmp_path: Path,
) -> None:
    # Before: "file: holds a ChatGPT export's conversations (turns in a tree under mapping)".
    (garden,) = parse_text(json.dumps(CHATGPT))
    assert garden.key == "g-1"
    assert [(t.speaker, t.text, t.key, t.time) for t in garden.turns] == [
        ("user", "When do I plant garlic?", "q1", MARCH_5),
        ("assistant", "Plant garlic in October.", "a2", MARCH_5),
    ]
    assert parse_text(json.dumps(CHATGPT), "chatgpt") == [garden]
    broken = json.loads(json.dumps(CHATGPT))
    broken[0]["current_node"] = "gone"
    with pytest.raises(InvalidInput) as refused:
        parse_text(json.dumps(broken))
    assert str(refused.value).startswith('file[0].mapping: has no node "gone"')


def test_a_turn_dated_0_is_undated_as_a_transcript_s_is() -> None:
    # Before: a chat turn of `time: 0` was stored dated 1 January 1970 (a Claude Code entry
    # of timestamp 0 was undated, and said so).
    (conversation,) = parse_text(json.dumps([{"speaker": "Ann", "text": "hi", "time": 0}]))
    assert conversation.turns[0].time is None
    assert conversation.undated == 1


ANDROID = """13/03/2024, 09:00 - Messages and calls are end-to-end encrypted. No one outside of \
this chat, not even WhatsApp, can read or listen to them.
13/03/2024, 14:02 - Ana: The boat leaves at 6.
Bring the blue tent: the green one leaks.
13/03/2024, 14:03 - Ben: <Media omitted>
13/03/2024, 14:05 - Ana added Cy
13/03/2024, 14:07 - Ben: Got it
"""
IPHONE = (
    "[03/13/24, 2:02:11\u202fPM] Ana: The boat leaves at 6.\n"
    "[03/13/24, 2:03:00\u202fPM] Ben: \u200eimage omitted\n"
    "[03/13/24, 2:07:00\u202fPM] Ben: Got it\n"
)


def local(*when: int) -> datetime:
    return datetime(*when).astimezone()  # (a phone's wall clock, read in this time zone)


def test_a_whatsapp_text_export_is_read_as_its_messages(tmp_path: Path) -> None:
    # Before: "file: line 1 is not JSON; expected JSON or JSONL".
    said = [
        ("Ana", "The boat leaves at 6.\nBring the blue tent: the green one leaks."),
        ("Ben", "Got it"),
    ]
    (android,) = parse_text(ANDROID)  # (13 first: day first)
    assert [(t.speaker, t.text) for t in android.turns] == said
    assert [t.time for t in android.turns] == [local(2024, 3, 13, 14, 2), local(2024, 3, 13, 14, 7)]
    (iphone,) = parse_text(IPHONE)  # (13 second: month first; a 12-hour clock)
    assert [(t.speaker, t.text) for t in iphone.turns] == [("Ana", said[0][1][:21]), said[1]]
    assert iphone.turns[0].time == local(2024, 3, 13, 14, 2, 11)
    path = tmp_path / "WhatsApp Chat with Ana.txt"
    path.write_text(ANDROID)
    b = brain(tmp_path)
    assert b.ingest(read_conversations(path)).added == 2
    path.write_text(ANDROID + "14/03/2024, 08:00 - Ana: On the pier now\n")
    assert b.ingest(read_conversations(path)).added == 1


def test_a_whatsapp_export_of_dates_either_way_asks_which() -> None:
    ambiguous = "05/03/2024, 14:02 - Ana: Kiln at 1200.\n"
    with pytest.raises(InvalidInput) as refused:
        parse_text(ambiguous)
    assert "--format-in whatsapp-dmy (05/03 is 5 March) or whatsapp-mdy" in str(refused.value)
    (march,) = parse_text(ambiguous, "whatsapp-dmy")
    (may,) = parse_text(ambiguous, "whatsapp-mdy")
    assert (march.turns[0].time, may.turns[0].time) == (
        local(2024, 3, 5, 14, 2),
        local(2024, 5, 3, 14, 2),
    )


def test_a_chatgpt_export_whose_children_run_in_a_cycle_is_refused_naming_it() -> None:
    # Before: with no `current_node`, the branch was followed down each node's last child
    # for ever (a node its own descendant): the ingest hung, whatever lock it held.
    looped = json.loads(json.dumps(CHATGPT))
    del looped[0]["current_node"]
    looped[0]["mapping"]["a2"]["children"] = ["sys"]
    with pytest.raises(InvalidInput) as refused:
        parse_text(json.dumps(looped))
    assert str(refused.value) == 'file[0].mapping: has a cycle of children through "sys"'


def test_a_whatsapp_message_of_many_lines_or_blanks_is_read_whole() -> None:
    # Before: a message's lines were added to its text one by one, each copying it (400,000
    # lines: 82 s), and the edit mark was looked for from each blank of a run of them
    # (100,000 spaces: about a minute).
    lines = [f"line {i}" for i in range(400_000)]
    blanks = " " * 100_000 + "x"
    export = (
        "13/03/2024, 14:02 - Ana: " + "\n".join(lines) + "\n"
        f"13/03/2024, 14:03 - Ben: {blanks}\n"
        "13/03/2024, 14:04 - Ana: Fixed \u200e<This message was edited>\n"
    )
    (chat,) = parse_text(export)
    *long, fixed = [t.text for t in chat.turns if t.speaker == "Ana"]  # (cut at line ends)
    assert ("\n".join(long), fixed) == ("\n".join(lines), "Fixed")
    assert [t.text for t in chat.turns if t.speaker == "Ben"] == ["x"]
