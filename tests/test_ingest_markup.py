"""`memory ingest` of what exports write in their own markup or Unicode form: Slack's mentions,
links and escapes read as Slack shows them, a name composed in one export and decomposed in
another (or in the question) one person."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest

from octobrain.memory import conversation, conversation_parse, turn_fields
from octobrain.memory.conversation import parse_chat, parse_text, read_conversations
from tests.ingest_support import SCOPE, brain, cli, stored

ASKED = (
    "<@U0BEN> can you review <https://github.com/acme/app/pull/7|PR #7>? &lt;3 &amp; see "
    "<#C024BE7LR|general>, <!here> <mailto:ana@acme.io|ana@acme.io> <https://acme.io> "
    "<!subteam^S0QA|@qa> <@U0CY|cy>"
)
SHOWN = (
    "@Ben can you review PR #7 (https://github.com/acme/app/pull/7)? <3 & see #general, "
    "@here ana@acme.io https://acme.io @qa @cy"
)


def _slack_export(root: Path, *, with_users: bool) -> Path:
    day = root / "general" / "2024-03-05.json"
    day.parent.mkdir(parents=True)
    messages = [
        {
            "type": "message",
            "user": "U0ANA",
            "user_profile": {"display_name": "Ana"},
            "text": ASKED,
            "ts": "1709632800.000200",
        },
        {
            "type": "message",
            "user": "U0BEN",
            "user_profile": {"display_name": "Ben"},
            "text": "On it, <@U0ANA>: &lt;tests&gt; first",
            "ts": "1709632860.000300",
        },
    ]
    day.write_text(json.dumps(messages))
    if with_users:
        users = [
            {"id": "U0ANA", "name": "ana", "profile": {"display_name": "Ana"}},
            {"id": "U0BEN", "name": "ben", "profile": {"real_name": "Ben"}},
        ]
        (root / "users.json").write_text(json.dumps(users))
    return day


def test_a_slack_message_s_mentions_links_and_escapes_are_read_as_slack_shows_them(
    tmp_path: Path,
) -> None:
    # Before: stored as written: "<@U0BEN> can you review <https://…|PR #7>? &lt;3 &amp; …",
    # so "what did Ana say about Ben's PR" matched no word of it ("ben" is only in users.json).
    (chat,) = read_conversations(_slack_export(tmp_path / "export", with_users=True))
    assert [(t.speaker, t.text) for t in chat.turns] == [
        ("Ana", SHOWN),
        ("Ben", "On it, @Ana: <tests> first"),
    ]
    b = brain(tmp_path)
    b.ingest([chat])
    (top, *_) = b.remember("What did Ana ask Ben to review?", min_relevance=0.0).hits
    assert top.memory.content == SHOWN
    # Without users.json, a member is named as the profile of a message of theirs read before
    # names them (the file is read once, in order), else by id.
    (alone,) = read_conversations(_slack_export(tmp_path / "bare", with_users=False))
    assert [t.text[:14] for t in alone.turns] == ["@U0BEN can you", "On it, @Ana: <"]
    # A chat export that is not Slack's keeps its text as written.
    hand_made = [{"speaker": "Ana", "text": "a &amp; <b>", "ts": "1709632800"}]
    (plain,) = parse_text(json.dumps(hand_made), "chat")
    assert plain.turns[0].text == "a &amp; <b>"


def test_a_slack_export_stored_as_written_is_not_stored_again_once_read_as_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    day = _slack_export(tmp_path / "export", with_users=True)
    b = brain(tmp_path)
    with monkeypatch.context() as before:  # (as an earlier version stored it)
        before.setattr(conversation_parse, "slack_text", lambda text, _members: text)
        assert b.ingest(read_conversations(day)).added == 2
    again = b.ingest(read_conversations(day))
    # (not "2 not stored: their id names a stored turn with other words"; kept as stored)
    assert (again.added, again.skipped_existing, again.other_words) == (0, 2, 0)
    assert sorted(stored(b))[0].startswith("<@U0BEN> can you review <https://")


NFC, NFD = (unicodedata.normalize(form, "José") for form in ("NFC", "NFD"))


def _said(name: str, text: str, minute: int) -> dict[str, str]:
    return {"speaker": name, "text": text, "time": f"2024-03-05T10:{minute:02d}:00Z"}


@pytest.mark.parametrize(("written", "asked"), [(NFD, NFC), (NFC, NFD)])
def test_a_name_composed_or_decomposed_is_one_speaker(
    written: str, asked: str, tmp_path: Path
) -> None:
    # Before: "José" decomposed (as macOS writes file names and some exports) and composed were
    # two speakers, and a question spelling the name the other way preferred neither
    # (decomposed, its words split at the accent: "jose").
    b = brain(tmp_path)
    turns = [
        _said(written, "I fire the kiln on Friday.", 0),
        _said("Ana", "I fire the kiln on Monday.", 1),
        _said(NFC if written == NFD else NFD, "The kiln needs new shelves.", 2),
    ]
    b.ingest([parse_chat(turns, key="studio")])
    assert {t for m in stored(b).values() for t in m.tags if t.startswith("speaker:")} == {
        "speaker:josé",
        "speaker:ana",
    }
    top, *others = b.remember(f"When does {asked} fire the kiln?", min_relevance=0.0).hits
    assert top.memory.content == "I fire the kiln on Friday."
    assert "said by the person the question names" in top.why
    ana = next(h for h in others if h.memory.content.endswith("Monday."))
    assert "said by someone else" in ana.why


def test_a_store_holding_a_decomposed_speaker_tag_still_answers_for_that_person(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    b = brain(tmp_path)
    turns = [_said(NFD, "I fire the kiln on Friday.", 0), _said("Ana", "Monday for me.", 1)]
    with monkeypatch.context() as before:  # (as an earlier version stored it: as written)
        before.setattr(turn_fields, "same_name", lambda name: name)
        b.ingest([parse_chat(turns, key="studio")])
    assert f"speaker:{NFD.lower()}" in stored(b)["I fire the kiln on Friday."].tags
    (top, *_) = b.remember(f"When does {NFC} fire the kiln?", min_relevance=0.0).hits
    assert "said by the person the question names" in top.why
    assert b.ingest([parse_chat(turns, key="studio")]).added == 0  # (the same turns)


def test_a_conversation_stored_under_its_decomposed_name_is_not_stored_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    talk = tmp_path / f"{NFD}.jsonl"  # (as macOS names a file: its stem the conversation's)
    talk.write_text(json.dumps(_said("Ana", "Kiln at 1200.", 0)) + "\n")
    b = brain(tmp_path)
    with monkeypatch.context() as before:  # (as an earlier version stored it: as written)
        before.setattr(conversation, "same_name", lambda name: name)
        assert b.ingest(read_conversations(talk)).added == 1
        assert b.ingest(read_conversations(talk, name=NFD)).added == 0
    (chat,) = read_conversations(talk)
    assert chat.key == NFC
    assert b.ingest([chat]).added == 0
    assert b.ingest(read_conversations(talk, name=NFC)).added == 0


@pytest.mark.parametrize("timed", [True, False])
def test_a_store_written_from_a_decomposed_export_takes_the_composed_one_as_the_same_turns(
    timed: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: an earlier version's store of a chat exported decomposed (its speakers', its
    # session's and its conversation's names) got every turn a second time from the same chat
    # exported composed: 50 turns of 50 (a chaos run of stop 61).
    def chat(form: str) -> conversation.Conversation:
        said = [_said(NFD, "I fire the kiln on Friday.", 0), _said("Ana", "Monday.", 1)]
        turns = [{**t, "session": "Séance"} for t in said]
        for turn in turns if not timed else ():
            del turn["time"]
        named = [{k: unicodedata.normalize(form, v) for k, v in t.items()} for t in turns]
        return parse_chat(named, key=unicodedata.normalize(form, "Café"))

    b = brain(tmp_path)
    with monkeypatch.context() as before:  # (as an earlier version stored it: as written)
        before.setattr(turn_fields, "same_name", lambda name: name)
        before.setattr(conversation, "same_name", lambda name: name)
        assert b.ingest([chat("NFD")]).added == 2
    assert b.ingest([chat("NFC")]).added == 0
    assert b.ingest([chat("NFD")]).added == 0
    assert len(stored(b)) == 2


@pytest.mark.usefixtures("cli_env")
def test_cli_and_mcp_ingest_name_one_conversation_composed_or_decomposed(tmp_path: Path) -> None:
    from octobrain.server.handlers import ingest, plan_ingest

    talk = tmp_path / "talk.json"
    talk.write_text(json.dumps([_said("Ana", "Kiln at 1200.", 0)]))
    for name in (NFC, NFD):
        done = cli("memory", "--scope", SCOPE, "ingest", str(talk), "--conversation", name)
        assert done.exit_code == 0, done.output
    assert "0 added, 1 already present" in done.stdout
    b = brain(tmp_path)
    for name in (NFD, NFC):
        reply = ingest(b, plan_ingest(b, {"conversation": name, "turns": [_said(NFD, "Hi", 3)]}))
        assert reply is not None
    assert len(stored(b)) == 1
    assert {t for t in stored(b)["Hi"].tags if t.startswith(("speaker:", "conversation:"))} == {
        "speaker:josé",
        "conversation:josé",
    }


@pytest.fixture
def cli_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's store under `tmp_path/data`, with the hash embedder and no config file."""
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("OCTOBRAIN_EMBEDDING_MODEL", "hash:64")
    monkeypatch.delenv("OCTOBRAIN_CONFIG_PATH", raising=False)


def _channel_export(root: Path, *, with_channels: bool) -> Path:
    day = root / "general" / "2024-03-05.json"
    day.parent.mkdir(parents=True, exist_ok=True)
    said = {"type": "message", "user": "U0ANA", "user_profile": {"display_name": "Ana"}}
    messages = [
        {**said, "text": "Moved to <#C024BE7LR>, not <#C0GONE>", "ts": "1709632800.000200"},
        {**said, "text": "Ask in <#C024BE7LR|old-name>", "ts": "1709632860.000300"},
    ]
    day.write_text(json.dumps(messages))
    if with_channels:
        channels = [{"id": "C024BE7LR", "name": "general", "created": 1449252889}, "not one"]
        (root / "channels.json").write_text(json.dumps(channels))
    return day


def test_a_slack_channel_given_by_id_alone_is_named_from_channels_json(tmp_path: Path) -> None:
    # Before: `<#C024BE7LR>` (a channel without its label) was stored as "#C024BE7LR" with the
    # export's channels.json beside users.json: "what was moved to general" matched no word.
    (chat,) = read_conversations(_channel_export(tmp_path / "export", with_channels=True))
    assert [t.text for t in chat.turns] == [
        "Moved to #general, not #C0GONE",  # (a channel channels.json lacks: by its id)
        "Ask in #old-name",  # (a label given is the one shown, as before)
    ]
    (bare,) = read_conversations(_channel_export(tmp_path / "bare", with_channels=False))
    assert bare.turns[0].text == "Moved to #C024BE7LR, not #C0GONE"


def test_a_slack_export_stored_before_its_channels_were_named_is_not_stored_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    b = brain(tmp_path)
    export = tmp_path / "export"
    day = _channel_export(export, with_channels=False)  # (as an earlier version read it)
    assert b.ingest(read_conversations(day)).added == 2
    with monkeypatch.context() as before:  # (and as one before that: as written)
        before.setattr(conversation_parse, "slack_text", lambda text, _members: text)
        assert brain(tmp_path / "raw").ingest(read_conversations(day)).added == 2
    _channel_export(export, with_channels=True)
    for stored_before in (b, brain(tmp_path / "raw")):
        again = stored_before.ingest(read_conversations(day))
        assert (again.added, again.skipped_existing, again.other_words) == (0, 2, 0)
