"""A turn of an ingested conversation is stored once, whichever calls or files bring it: a chat
turn without an id of its own is what was said when and by whom, not its place in a call."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from mcp import Client

from octobrain.config import Config, EmbeddingConfig
from octobrain.errors import InvalidInput
from octobrain.memory.brain import Brain
from octobrain.memory.conversation import Conversation, Turn, parse_chat
from octobrain.memory.turn_keys import placed_key
from octobrain.models import RelationshipType
from tests.server_support import PROJECT_A, call, hash_pool, run, server_for

START = "2024-03-05T10:00:00Z"


def said(i: int, text: str | None = None, **more: Any) -> dict[str, Any]:
    """Turn `i` of a chat, said `i` seconds after 10:00."""
    speaker = "ann" if i % 2 else "bob"
    when = f"2024-03-05T10:{i // 60:02d}:{i % 60:02d}Z"
    words = text or f"turn {i}: about topic {i * 7}"
    return {"speaker": speaker, "text": words, "time": when, **more}


def brain_at(db: Path) -> Brain:
    return Brain(PROJECT_A, config=Config(embedding=EmbeddingConfig(model="hash:64")), uri=db)


def turns_held(b: Brain) -> list[str]:
    """The words of every ingested turn held, one entry per row."""
    return sorted(r["content"] for r in b.store.scan("true", columns=["content"]))


def chain(b: Brain) -> set[tuple[str, str]]:
    """The same-session links, by the words of the turns they join (later → earlier)."""
    words = dict(zip(*_ids_and_words(b), strict=True))
    return {
        (words[e.source_id], words[e.target_id])
        for e in b.store.all_relationships()
        if e.relationship_type is RelationshipType.SAME_SESSION
    }


def _ids_and_words(b: Brain) -> tuple[list[str], list[str]]:
    rows = b.store.scan("true", columns=["id", "content"])
    return [r["id"] for r in rows], [r["content"] for r in rows]


def test_overlapping_windows_over_mcp_store_each_turn_once_and_one_chain(tmp_path: Path) -> None:
    # Before: turns keyed by their place in the call, so the second window (turns 40-90)
    # stored turns 40-50 a second time: "51 turns added", 101 rows for 90 turns.
    server = server_for(hash_pool(tmp_path / "db"), tmp_path, PROJECT_A)

    async def body() -> None:
        async with Client(server) as client:
            first = [said(i) for i in range(1, 51)]
            error, reply = await call(client, "ingest", conversation="w", turns=first)
            assert not error and "50 turns added" in reply, reply
            second = [said(i) for i in range(40, 91)]
            error, reply = await call(client, "ingest", conversation="w", turns=second)
            assert not error and "40 turns added, 11 already present, 40 links" in reply, reply
            error, reply = await call(client, "ingest", conversation="w", turns=second)
            assert not error and "0 turns added, 51 already present" in reply, reply

    run(body)
    b = brain_at(tmp_path / "db")
    assert turns_held(b) == sorted(said(i)["text"] for i in range(1, 91))
    assert chain(b) == {(said(i)["text"], said(i - 1)["text"]) for i in range(2, 91)}


def test_a_window_after_the_last_is_linked_to_its_last_turn(tmp_path: Path) -> None:
    # Before: turn 51, the first of the second call, was linked to nothing: a hit on it never
    # brought turn 50 along.
    server = server_for(hash_pool(tmp_path / "db"), tmp_path, PROJECT_A)

    async def body() -> None:
        async with Client(server) as client:
            for window in (range(1, 51), range(51, 91)):
                turns = [said(i, session="s1") for i in window]
                error, reply = await call(client, "ingest", conversation="w", turns=turns)
                assert not error and f"{len(window)} turns added" in reply, reply
            # Without session labels: a silence under 4 hours is the same session.
            for window in (range(1, 3), range(3, 5)):
                turns = [said(i, f"v{i}") for i in window]
                error, reply = await call(client, "ingest", conversation="v", turns=turns)
                assert not error and "2 turns added" in reply, reply

    run(body)
    links = chain(brain_at(tmp_path / "db"))
    assert (said(51)["text"], said(50)["text"]) in links
    assert ("v3", "v2") in links
    assert len(links) == 89 + 3


def test_two_different_turns_with_the_same_words_at_the_same_place_are_two(
    tmp_path: Path,
) -> None:
    # Before: "ok" said at 10:00 and "ok" said at 11:00, each first in its call, had one key:
    # the second call answered "0 turns added, 1 already present" and the turn was lost.
    server = server_for(hash_pool(tmp_path / "db"), tmp_path, PROJECT_A)

    async def body() -> None:
        async with Client(server) as client:
            for hour in (10, 11):
                turn = {"speaker": "ann", "text": "ok", "time": f"2024-03-06T{hour}:00:00Z"}
                error, reply = await call(client, "ingest", conversation="k", turns=[turn])
                assert not error and "1 turn added, 0 already present" in reply, reply
            # The same words said twice at one time are two turns too; sent again, none.
            twice = [{"speaker": "ann", "text": "ha", "time": START}] * 2
            for added in ("2 turns added", "0 turns added, 2 already present"):
                error, reply = await call(client, "ingest", conversation="k", turns=twice)
                assert not error and added in reply, reply

    run(body)
    assert turns_held(brain_at(tmp_path / "db")) == ["ha", "ha", "ok", "ok"]


def test_cli_ingest_of_overlapping_exports_stores_each_turn_once(tmp_path: Path) -> None:
    # Before: `memory ingest` of chat.jsonl holding turns 1-50, then of a later export of the
    # same chat holding turns 40-90: "51 added", turns 40-50 twice.
    from octobrain.cli.main import main

    for folder, window in (("a", range(1, 51)), ("b", range(40, 91))):
        (tmp_path / folder).mkdir()
        lines = "".join(json.dumps(said(i)) + "\n" for i in window)
        (tmp_path / folder / "chat.jsonl").write_text(lines)
    env = {
        "OCTOBRAIN_DATA_DIR": str(tmp_path / "data"),
        "OCTOBRAIN_EMBEDDING_MODEL": "hash:64",
        "OCTOBRAIN_SERVICE_ENABLED": "0",
    }
    shown = []
    for folder in ("a", "b"):
        path = str(tmp_path / folder / "chat.jsonl")
        result = CliRunner().invoke(main, ["memory", "ingest", path, "--scope", PROJECT_A], env=env)
        assert result.exit_code == 0, result.output
        shown.append(result.output)
    assert "50 added, 0 already present, 49 links" in shown[0], shown
    assert "40 added, 11 already present, 40 links" in shown[1], shown


def _stored_the_old_way(b: Brain, turns: list[dict[str, Any]], key: str = "w") -> None:
    """Store `turns` (one session, no `session` field) as every version before this one
    did: each keyed by its place in the call, its speaker and its words as sent."""
    old = [
        Turn(
            " ".join(t["speaker"].split()),
            t["text"].strip(),
            "1",
            placed_key("1", place, " ".join(t["speaker"].split()), t["text"]),
            parse_chat([t]).turns[0].time,
        )
        for place, t in enumerate(turns, 1)
    ]
    b.ingest([Conversation(key, old)])


def test_a_store_of_turns_keyed_by_place_gets_none_again_after_the_upgrade(
    tmp_path: Path,
) -> None:
    # Stored by an earlier version (keyed by place), the same transcript ingested again got
    # every turn a second time, and a turn forgotten then came back.
    b = brain_at(tmp_path / "db")
    turns = [said(i) for i in range(1, 31)]
    _stored_the_old_way(b, turns)
    forgotten = b.store.scan(f"content = '{said(7)['text']}'", columns=["id"])[0]["id"]
    b.forget([forgotten], confirm=True)
    report = b.ingest([parse_chat(turns, key="w")])
    assert (report.added, report.skipped_existing, report.forgotten) == (0, 29, 1)
    assert report.links == 0
    # Later turns follow on from the old ones, and another "ok" at an old turn's place is its
    # own turn: a turn is taken for an old one only when said at the same time.
    report = b.ingest([parse_chat([said(i) for i in range(31, 41)], key="w")])
    assert (report.added, report.skipped_existing) == (10, 0)
    report = b.ingest([parse_chat([said(1, time="2024-03-05T12:00:00Z")], key="w")])
    assert (report.added, report.skipped_existing) == (1, 0)
    held = turns_held(b)
    assert len(held) == 40 and held.count(said(1)["text"]) == 2
    assert (said(31)["text"], said(30)["text"]) in chain(b)


def test_a_speaker_stored_with_bidi_controls_gets_none_again(tmp_path: Path) -> None:
    # Stored before bidirectional controls were dropped from names, a transcript whose speaker
    # held them got new ids when ingested again: every turn twice (titles alice and al‮ice).
    b = brain_at(tmp_path / "db")
    plain = [said(i) for i in range(1, 5)]
    marked = [{**t, "speaker": f"{t['speaker']}\u202c\u2069"} for t in plain]
    _stored_the_old_way(b, marked)
    untimed = [{k: v for k, v in t.items() if k != "time"} for t in marked]
    _stored_the_old_way(b, untimed, key="u")
    for key, sent in (("w", marked), ("u", untimed)):
        report = b.ingest([parse_chat(sent, key=key)])
        assert (report.added, report.skipped_existing) == (0, 4), key
    assert len(turns_held(b)) == 8


def test_sessions_found_by_silence_are_numbered_across_calls_as_in_one(tmp_path: Path) -> None:
    # Before: each call numbered its sessions from 1, so a later call's new session was
    # tagged and indexed as "session 1" of the conversation, with the first day's turns.
    def at(day: int, minute: int, text: str) -> dict[str, Any]:
        return {"speaker": "ann", "text": text, "time": f"2024-03-{day:02d}T10:{minute:02d}:00Z"}

    whole = [at(1, 0, "d1"), at(3, 0, "d3"), at(3, 30, "d3 later"), at(20, 0, "d20")]
    server = server_for(hash_pool(tmp_path / "db"), tmp_path, PROJECT_A)

    async def body() -> None:
        async with Client(server) as client:
            for turns, added in (
                (whole[:2], "2 turns added"),
                (whole[2:], "2 turns added, 0 already present, 1 link"),
                ([*whole, at(28, 0, "d28")], "1 turn added, 4 already present"),
            ):
                error, reply = await call(client, "ingest", conversation="c", turns=turns)
                assert not error and added in reply, reply

    run(body)
    rows = brain_at(tmp_path / "db").store.scan("true", columns=["content", "tags", "context"])
    sessions = {r["content"]: next(t for t in r["tags"] if t.startswith("session:")) for r in rows}
    assert sessions == {
        "d1": "session:c/1",
        "d3": "session:c/2",
        "d3 later": "session:c/2",  # said 30 minutes after: the session it continues
        "d20": "session:c/3",
        "d28": "session:c/4",
    }
    assert [r["context"] for r in rows if r["content"] == "d20"] == [
        "Conversation between ann, session 3 on 20 March 2024"
    ]


def test_a_window_sent_before_the_one_it_precedes_is_chained_to_it(tmp_path: Path) -> None:
    # Before: the later window's first turn, stored first in its session, was never linked
    # to the turn said just before it once that turn came: a hit on turn 5 did not bring 4.
    server = server_for(hash_pool(tmp_path / "db"), tmp_path, PROJECT_A)

    async def body() -> None:
        async with Client(server) as client:
            for conversation, labels in (("labelled", {"session": "s1"}), ("silence", {})):
                for window, links in ((range(5, 9), 3), (range(1, 5), 4)):
                    turns = [said(i, f"{conversation} {i}", **labels) for i in window]
                    error, reply = await call(
                        client, "ingest", conversation=conversation, turns=turns
                    )
                    assert not error and f"4 turns added, 0 already present, {links} links" in (
                        reply
                    ), reply
                everything = [said(i, f"{conversation} {i}", **labels) for i in range(1, 9)]
                error, reply = await call(
                    client, "ingest", conversation=conversation, turns=everything
                )
                assert not error and "0 turns added, 8 already present, 0 links" in reply, reply

    run(body)
    b = brain_at(tmp_path / "db")
    for conversation in ("labelled", "silence"):
        assert {link for link in chain(b) if link[0].startswith(conversation)} == {
            (f"{conversation} {i}", f"{conversation} {i - 1}") for i in range(2, 9)
        }
    tags = {r["content"]: r["tags"][1] for r in b.store.scan("true", columns=["content", "tags"])}
    assert {tags[f"silence {i}"] for i in range(1, 9)} == {"session:silence/1"}


def test_a_link_to_an_earlier_window_lost_to_a_kill_is_mended_by_sending_it_again(
    tmp_path: Path,
) -> None:
    b = brain_at(tmp_path / "db")
    first, second = (
        parse_chat([said(i, f"t{i}") for i in window], key="k") for window in (range(3, 5), (1, 2))
    )
    b.ingest([first])
    assert b.ingest([second]).links == 2  # t2 → t1, and t3 (stored first) → t2
    b.store.delete_relationships("relationship_type = 'same_session'")  # the kill's state
    again = b.ingest([second])
    assert (again.added, again.links) == (0, 2)
    assert ("t3", "t2") in chain(b) and b.ingest([second]).links == 0


def test_turns_said_in_the_first_hours_of_year_one_are_stored(tmp_path: Path) -> None:
    # Before: the look for the turn before it (4 hours earlier) fell before year 1, and the
    # ingest failed with an internal OverflowError.
    b = brain_at(tmp_path / "db")
    for time, text in (("0001-01-01T03:59:59Z", "first"), ("0001-01-01T00:00:00-05:00", "next")):
        conv = parse_chat([{"speaker": "ann", "text": text, "time": time}], key="y1")
        assert b.ingest([conv]).added == 1
    assert chain(b) == {("next", "first")}


def test_conversations_whose_tags_coincide_are_not_chained_into_each_other(
    tmp_path: Path,
) -> None:
    # Before: a conversation's tag is its name lowercased, spaces made dashes and cut to 37
    # characters, and its sessions' tags drop the spaces: "Standup" and "standup", or
    # "team sync" and "teamsync" (or two exports named alike for 37 characters), were looked up
    # as one conversation. A turn of one was linked as said next after a turn of the other
    # ("same session as …" in `remember`), and a session was numbered anew because the other
    # conversation had spoken last.
    b = brain_at(tmp_path / "db")

    def turns(key: str, *said: tuple[str, str], **labels: str) -> None:
        records = [
            {"speaker": "ann", "text": text, "time": f"2024-03-05T{at}:00Z", **labels}
            for at, text in said
        ]
        b.ingest([parse_chat(records, key=key)])

    turns("Standup", ("10:00", "x1"), ("10:01", "x2"))
    turns("standup", ("10:30", "y1"))
    turns("Standup", ("10:45", "x3"))
    turns("standup", ("11:00", "y2"))
    long = "slack-engineering-channel-export-2024"
    turns(f"{long}-01", ("12:00", "m1"))
    turns(f"{long}-02", ("12:10", "n1"))
    turns("team sync", ("13:00", "t1"), session="s1")
    turns("teamsync", ("13:10", "u1"), session="s1")
    assert chain(b) == {("x2", "x1"), ("x3", "x2"), ("y2", "y1")}
    tags = {r["content"]: r["tags"][1] for r in b.store.scan("true", columns=["content", "tags"])}
    assert tags["y2"] == tags["y1"] == "session:standup/1"


def test_a_turn_id_respelled_with_spaces_or_decomposed_is_the_same_turn(tmp_path: Path) -> None:
    # Before: ids "a" and "a " (or "a" with a zero-width space, or "é1" composed and
    # decomposed) were two turns: an export that wrote its ids another way stored every turn
    # again.
    b = brain_at(tmp_path / "db")
    nfd = unicodedata.normalize("NFD", "é1")
    first = [said(1, id="a"), said(2, id="é1")]
    respelled = [said(1, id=" a\u200b\t"), said(2, id=nfd)]
    assert b.ingest([parse_chat(first, key="w")]).added == 2
    report = b.ingest([parse_chat(respelled, key="w")])
    assert (report.added, report.skipped_existing) == (0, 2)
    with pytest.raises(InvalidInput, match=r"^turns\[1\]\.id: .*\"a\""):
        parse_chat([said(1, id="a"), said(2, id="a ")])  # one id, two turns


def test_turns_stored_under_an_id_as_spelled_before_get_none_again(tmp_path: Path) -> None:
    # A store of an earlier version holds a turn under "a " as written: ingesting it again
    # (now named "a") finds it.
    b = brain_at(tmp_path / "db")
    t = said(1, id="a ")
    old = Turn(t["speaker"], t["text"], "1", "a ", parse_chat([t]).turns[0].time)
    b.ingest([Conversation("w", [old])])
    report = b.ingest([parse_chat([t, said(2, id="b")], key="w")])
    assert (report.added, report.skipped_existing) == (1, 1)
    assert turns_held(b) == sorted([said(1)["text"], said(2)["text"]])
