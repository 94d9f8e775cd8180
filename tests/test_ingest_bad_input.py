"""`memory ingest` of a bad transcript: the field and the rule named; text that is no Unicode
refused or stored whole; a turn given twice is one turn."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from mcp import Client

from octobrain.errors import InvalidInput
from octobrain.memory.conversation import parse_chat, parse_text, read_conversations
from tests.ingest_support import brain
from tests.server_support import PROJECT_A, call, hash_pool, run, server_for


@pytest.mark.parametrize(
    ("text", "fmt", "rule"),
    [
        ("", "auto", "file: is empty"),
        ('{"a": 1}', "auto", "file: is not a known conversation format"),
        ('[{"speaker": "", "text": "hi"}]', "chat", r"turns\[0\]\.speaker: must be a non-empty"),
        ('[{"speaker": "A", "text": 3}]', "chat", r"turns\[0\]\.text: must be a string"),
        (
            '[{"speaker": "A", "text": "x", "time": "noon"}]',
            "chat",
            r"turns\[0\]\.time: must be ISO",
        ),
        # A time UTC has no day for would be stored, then break every read that shows it.
        (
            '[{"speaker": "A", "text": "x", "time": "9999-12-31T23:59:59-05:00"}]',
            "chat",
            r"turns\[0\]\.time: must fall within years 1–9999 in UTC",
        ),
        (
            '[{"speaker": "A", "text": "x", "time": "0001-01-01T00:00:00+14:00"}]',
            "chat",
            r"turns\[0\]\.time: must fall within years 1–9999 in UTC",
        ),
        (
            '[{"speaker": "A", "text": "x", "time": 1e20}]',
            "chat",
            r"turns\[0\]\.time: must be Unix",
        ),
        ('[{"speaker": "A", "text": "x", "time": NaN}]', "chat", r"turns\[0\]\.time: must be Unix"),
        (
            '[{"speaker": "A", "text": "x", "time": 1' + "0" * 400 + "}]",
            "chat",
            r"turns\[0\]\.time: must be Unix",
        ),
        ("[1, 2]", "locomo", r"file\[0\]\.conversation: must be an object"),
        # A session dated 9999 headed every briefing's recent memories until then.
        (
            '{"conversation": {"session_1_date_time": "1:00 pm on 1 January, 9999",'
            ' "session_1": [{"speaker": "A", "text": "hi"}]}}',
            "auto",
            r"^file\[0\]\.conversation\.session_1_date_time: must not be more than a day ahead",
        ),
        ("{\n{", "auto", "file: line 1 is not JSON"),
        # An array that is not JSON to its end is read as JSONL, as before it was read whole.
        ('[{"speaker": "A", "text": "x"}] [', "auto", r"file: is not JSON \(Extra data: line 1, "),
        (
            '[{"speaker": "A", "text": "x"},\n{"text": 1 2}]',
            "auto",
            r"JSON \(.*: line 2, column 12\)",
        ),
        ("[]", "yaml", "format_in: must be one of"),
        # Parsers' own errors, once tracebacks: nesting past the interpreter's recursion, an
        # integer longer than it converts, a NUL taken into the session's tag.
        ("[" * 100_000 + "]" * 100_000, "auto", "file: is nested too deeply"),
        ('{"a": 1}\n' + '{"a":' * 100_000 + "1" + "}" * 100_000, "auto", "file: line 2 is nested"),
        ('[{"speaker": "A", "text": "x", "id": ' + "9" * 5000 + "}]", "chat", "file: holds a num"),
        (
            '{"type": "user", "sessionId": "s\\u0000", "message": {"content": "hello"}}',
            "claude",
            "sessionId: must be 1–100 characters, without NUL",
        ),
        # An id that shows nothing was taken as the turn's id: " " and "\u200b\u0301".
        (
            '[{"speaker": "A", "text": "x", "id": " "}]',
            "chat",
            r"^turns\[0\]\.id: must hold visible text, not only spaces",
        ),
        (
            '[{"speaker": "A", "text": "x", "id": "\\u200b\\u0301"}]',
            "chat",
            r"^turns\[0\]\.id: must hold visible text",
        ),
        (
            '{"type": "user", "uuid": "u1", "message": {"content": "hello"}}\n'
            '{"type": "assistant", "uuid": "\\t", "message": {"content": "hi there"}}',
            "claude",
            r"^line 2\.uuid: must hold visible text",
        ),
        # One id for two different turns: stored, they were two rows of one memory id.
        (
            '[{"speaker": "A", "text": "one", "id": "x"},'
            ' {"speaker": "A", "text": "two", "id": "x"}]',
            "chat",
            r'^turns\[1\]\.id: duplicate of turns\[0\]\.id \("x"\), which is a different turn',
        ),
        (  # a JSONL file: a record is named by its line
            '{"speaker": "A", "text": "one", "id": 7}\n\n{"speaker": "B", "text": "ok"}\n'
            '{"speaker": "A", "text": "two", "id": 7}',
            "chat",
            r'^line 4\.id: duplicate of line 1\.id \("7"\), which is a different turn',
        ),
        (
            '\n{"type": "user", "uuid": "u1", "message": {"content": "hello"}}\n'
            '{"type": "assistant", "uuid": "u1", "message": {"content": "hi there"}}',
            "claude",
            r'^line 3\.uuid: duplicate of line 2\.uuid \("u1"\)',
        ),
        (
            '[{"conversation": {"session_1": [{"speaker": "A", "text": "one", "dia_id": "D1:2"},'
            ' {"speaker": "B", "text": "two"}]}}]',
            "locomo",
            r"^file\[0\]\.conversation\.session_1\[1\]: duplicate of "
            r'file\[0\]\.conversation\.session_1\[0\]\.dia_id \("D1:2"\)',
        ),
        (  # (the chat record was skipped as something Claude Code keeps beside the talk)
            '{"type": "user", "uuid": "u1", "sessionId": "s", "message": {"content": "hello"}}\n'
            '{"speaker": "bob", "text": "a chat line", "time": "2026-01-01T10:01:00Z"}',
            "auto",
            r"^line 2: is a chat record \(\{speaker, text\}\) in a Claude Code transcript",
        ),
        (  # (both read as session 1: one of them was read twice, the other lost)
            '[{"conversation": {"session_1": [{"speaker": "A", "text": "one"}],'
            ' "session_01": [{"speaker": "A", "text": "zero one"}]}}]',
            "locomo",
            r"^file\[0\]\.conversation\.session_1: names session 1 again \(as session_01",
        ),
    ],
)
def test_bad_transcripts_name_the_field(text: str, fmt: str, rule: str) -> None:
    with pytest.raises(InvalidInput, match=rule):
        parse_text(text, fmt)


LONE = "\\ud800"  # a lone surrogate as JSON writes it (a JS string cut inside an emoji)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"speaker": "A", "text": "x%s"}\n{"speaker": "B", "text": "y"}', "line 1.text"),
        ('{"speaker": "A%s", "text": "x"}\n{"speaker": "B", "text": "y"}', "line 1.speaker"),
        ('[{"speaker": "A", "text": "x", "session": "s%s"}]', "turns[0].session"),
        ('[{"speaker": "A", "text": "x", "id": "i%s"}]', "turns[0].id"),
        (
            '[{"sample_id": "s", "conversation": {"session_1": [{"speaker": "A", "text": "x", '
            '"blip_caption": "a photo%s"}]}}]',
            "file[0].conversation.session_1[0].blip_caption",
        ),
        (
            '[{"sample_id": "s%s", '
            '"conversation": {"session_1": [{"speaker": "A", "text": "x"}]}}]',
            "file[0].sample_id",
        ),
    ],
)
def test_text_that_is_no_unicode_is_refused_naming_the_field(text: str, where: str) -> None:
    # Before: a traceback (UnicodeEncodeError: surrogates not allowed), exit 1; over MCP
    # "internal error".
    with pytest.raises(InvalidInput) as refused:
        parse_text(text % LONE)
    assert str(refused.value) == (
        f"{where}: must be valid Unicode (lone surrogates are not allowed)"
    )


def test_a_transcript_half_an_emoji_and_a_file_name_that_is_no_utf8_are_stored(
    tmp_path: Path,
) -> None:
    # A Claude Code transcript is the client's own: a half emoji in it is said as U+FFFD, as
    # a stray NUL is dropped; a file name's bytes that are not UTF-8 name the conversation so.
    line = {"type": "user", "uuid": "u1", "message": {"content": "ok \ud83d"}}
    path = tmp_path / os.fsdecode(b"caf\xe9.jsonl")
    path.write_text(json.dumps(line) + "\n")
    (conversation,) = read_conversations(path)
    assert (conversation.key, conversation.turns[0].text) == ("caf\ufffd", "ok \ufffd")
    assert brain(tmp_path).ingest([conversation]).added == 1
    with pytest.raises(InvalidInput, match=r"^conversation: must be valid Unicode"):
        read_conversations(path, name="x\udcff")


def test_mcp_ingest_of_text_that_is_no_unicode_is_a_field_error(tmp_path: Path) -> None:
    server = server_for(hash_pool(tmp_path / "db"), tmp_path, PROJECT_A)

    async def body() -> None:
        async with Client(server) as client:
            for args, where in (
                (
                    {"conversation": "c", "turns": [{"speaker": "a", "text": "x\ud800"}]},
                    "turns[0].text",
                ),
                (
                    {"conversation": "c\udc80", "turns": [{"speaker": "a", "text": "x"}]},
                    "conversation",
                ),
            ):
                error, reply = await call(client, "ingest", **args)
                assert error and reply.startswith(f"{where}: must be valid Unicode"), reply

    run(body)


def test_a_turn_time_given_empty_is_not_known_as_the_schema_says() -> None:
    # Kept as absent on purpose (a time is data, not a filter: nothing is widened by it), so
    # the ingest tool's schema says so.
    from octobrain.server.schemas import INGEST

    conversation = parse_chat([{"speaker": "A", "text": "hi", "time": ""}])
    assert conversation.turns[0].time is None
    turn = INGEST.properties["turns"]["items"]["properties"]
    assert '"" or left out when not known' in turn["time"]["description"]


def test_a_turn_given_twice_is_one_turn() -> None:
    # Two copies of a transcript joined: the repeated turns are the same turns.
    turns = [{"speaker": "A", "text": "one", "id": "x"}, {"speaker": "B", "text": "two", "id": "y"}]
    (conversation,) = parse_text(json.dumps(turns + turns), "chat")
    assert [(t.key, t.text) for t in conversation.turns] == [("x", "one"), ("y", "two")]


def test_a_locomo_session_date_is_read_as_written_or_refused() -> None:
    # A date neither form reads was dropped without a word (the turns dated at the ingest, so
    # a question bounded by time never found them); a list or a dict was written out as text.
    def sample(date: object, sample_id: object = "s1") -> str:
        turns = [{"speaker": "Ann", "text": "I adopted a beagle.", "dia_id": "D1:1"}]
        session = {"session_1": turns, "session_1_date_time": date}
        return json.dumps([{"sample_id": sample_id, "conversation": session}])

    (iso,) = parse_text(sample("2023-05-08T13:56:00Z"), "locomo")
    assert iso.turns[0].time == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    (broken,) = parse_text(sample("20230508\n135600Z"), "locomo")  # (one line, as a title is)
    assert broken.turns[0].session_date == "20230508 135600Z"
    for date, rule in [
        ("next Tuesday", r"must be a date as LoCoMo writes it \('1:56 pm on 8 May, 2023'\) or "
                         r'ISO-8601, got "next Tuesday"'),
        (["8:00 pm on 9 May, 2023"], r"must be a string, got array"),
        # Python reads any character between an ISO date and its time, and the date as written
        # is in the turns' titles: a UnicodeEncodeError traceback; a NUL stored in a title.
        ("20230508\ud800135600Z", r"must be valid Unicode"),
        ("20230508\x00135600Z", r"must not contain NUL characters"),
    ]:  # fmt: skip
        with pytest.raises(InvalidInput, match=r"^file\[0\]\.conversation\.session_1_date_time: "
                           + rule):  # fmt: skip
            parse_text(sample(date), "locomo")
    with pytest.raises(InvalidInput, match=r"^file\[0\]\.sample_id: must be a string or an int"):
        parse_text(sample("2023-05-08T13:56:00Z", {"a": 1}), "locomo")


def test_cli_and_mcp_ingest_refuse_a_turn_id_that_shows_nothing(tmp_path: Path) -> None:
    # Both stored the turn under the id " ", which no later export or question can name.
    from click.testing import CliRunner

    from octobrain.cli.main import main

    turns = [{"speaker": "Ann", "text": "Release on Fridays.", "id": " "}]
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps(turns))
    env = {
        "OCTOBRAIN_DATA_DIR": str(tmp_path / "data"),
        "OCTOBRAIN_EMBEDDING_MODEL": "hash:64",
        "OCTOBRAIN_SERVICE_ENABLED": "0",
    }
    done = CliRunner().invoke(main, ["memory", "ingest", str(chat), "--scope", PROJECT_A], env=env)
    assert done.exit_code == 2 and "turns[0].id: must hold visible text" in done.output, done.output
    server = server_for(hash_pool(tmp_path / "db"), tmp_path, PROJECT_A)

    async def body() -> None:
        async with Client(server) as client:
            error, reply = await call(client, "ingest", conversation="c", turns=turns)
            assert error and reply.startswith("turns[0].id: must hold visible text"), reply

    run(body)
