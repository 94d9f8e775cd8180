"""A Claude Code transcript holding more than one branch (a prompt edited, a rewind): `memory
ingest` reads the conversation Claude Code resumes, the chain of `parentUuid`s from the last
message back to its root, and the file's order where that chain cannot be followed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from octobrain.errors import InvalidInput
from octobrain.memory.conversation import read_conversations
from octobrain.memory.conversation_parse import parse_text
from octobrain.memory.gist import DIGEST_TAG
from tests.hooks_support import SESSION, brain_for, cli, hook_json
from tests.hooks_support import env as env  # the fixture, shared
from tests.ingest_support import brain, stored


def _entry(uuid: str, parent: str | None, kind: str, text: str, **extra: Any) -> dict[str, Any]:
    content: Any = text if kind == "user" else [{"type": "text", "text": text}]
    return {
        "parentUuid": parent,
        "isSidechain": False,
        "sessionId": SESSION,
        "type": kind,
        "uuid": uuid,
        "timestamp": f"2026-03-02T10:{len(uuid):02d}:00.000Z",
        "message": {"role": kind, "content": content},
    } | extra


def _said(entries: list[dict[str, Any]], tmp_path: Path) -> list[str]:
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    (conversation,) = read_conversations(path)
    return [turn.text for turn in conversation.turns]


_ASKED = [
    _entry("u1", None, "user", "Which queue should the mailer use?"),
    _entry("a1", "u1", "assistant", "Redis streams fit the volume."),
    _entry("u2", "a1", "user", "Use RabbitMQ then."),
    _entry("a2", "u2", "assistant", "Switched the mailer to RabbitMQ."),
]


def test_an_edited_prompt_leaves_its_abandoned_branch_out(tmp_path: Path) -> None:
    # Both branches were read in file order: "Use RabbitMQ" was recalled as said, though the
    # user edited it away and Claude Code resumes without it.
    edited = [
        _entry("u2e", "a1", "user", "Keep Redis streams."),
        _entry("a2e", "u2e", "assistant", "Kept Redis streams for the mailer."),
        {"type": "system", "subtype": "turn_duration", "uuid": "s1", "parentUuid": "a2e"},
        {"type": "file-history-snapshot", "messageId": "u2", "snapshot": {}},
    ]
    assert _said(_ASKED + edited, tmp_path) == [
        "Which queue should the mailer use?",
        "Redis streams fit the volume.",
        "Keep Redis streams.",
        "Kept Redis streams for the mailer.",
    ]


def test_an_edited_first_prompt_is_a_root_of_its_own(tmp_path: Path) -> None:
    edited = [
        _entry("u1e", None, "user", "Which database for the ledger?"),
        _entry("a1e", "u1e", "assistant", "Postgres, for its transactions."),
    ]
    assert _said(_ASKED + edited, tmp_path) == [
        "Which database for the ledger?",
        "Postgres, for its transactions.",
    ]


def test_a_compaction_keeps_the_turns_before_it(tmp_path: Path) -> None:
    compacted = [
        {"type": "system", "subtype": "compact_boundary", "uuid": "c1", "parentUuid": None,
         "logicalParentUuid": "a2", "isSidechain": False},
        _entry("u3", "c1", "user", "Summary of the above.", isCompactSummary=True),
        _entry("u4", "u3", "user", "Now add retries."),
        _entry("a4", "u4", "assistant", "Retries added."),
    ]  # fmt: skip
    said = _said(_ASKED + compacted, tmp_path)
    assert said[:4] == _said(_ASKED, tmp_path)
    assert said[4:] == ["Now add retries.", "Retries added."]


def test_a_chain_that_cannot_be_followed_is_read_in_file_order(tmp_path: Path) -> None:
    # A parent Claude Code named but never wrote (a known fault of its writer): every turn is
    # kept rather than the ones before the gap dropped; only a branch that provably forks off
    # the part that could be followed is left out.
    gap = [
        _entry("u5", "never-written", "user", "Add a dead-letter queue."),
        _entry("a5", "u5", "assistant", "Dead letters would go to S3."),
        _entry("a5e", "u5", "assistant", "Dead letters go to a second stream."),
    ]
    assert _said(_ASKED + gap, tmp_path) == [
        "Which queue should the mailer use?",
        "Redis streams fit the volume.",
        "Use RabbitMQ then.",
        "Switched the mailer to RabbitMQ.",
        "Add a dead-letter queue.",
        "Dead letters go to a second stream.",
    ]
    older = [{k: v for k, v in e.items() if k != "parentUuid"} for e in _ASKED]
    assert len(_said(older, tmp_path)) == 4  # (a transcript of before `parentUuid`)


def test_a_subagent_s_last_line_does_not_choose_the_branch(tmp_path: Path) -> None:
    agent = _entry("x1", None, "assistant", "The agent is done.", isSidechain=True)
    assert len(_said([*_ASKED, agent], tmp_path)) == 4


def test_turns_of_an_abandoned_branch_stored_earlier_are_kept(tmp_path: Path) -> None:
    # An ingest of before stored both branches; ingesting the file again adds nothing and
    # removes nothing: the turns are the user's words, and `forget` removes one on purpose.
    b = brain(tmp_path)
    text = "".join(json.dumps(e) + "\n" for e in _ASKED)
    assert b.ingest(parse_text(text)).added == 4
    edited = [_entry("u2e", "a1", "user", "Keep Redis streams.")]
    report = b.ingest(parse_text(text + "".join(json.dumps(e) + "\n" for e in edited)))
    assert (report.added, report.skipped_existing, report.abandoned) == (1, 2, 2)
    assert "2 of a branch left by editing an earlier prompt skipped" in report.summary("1")
    assert "Use RabbitMQ then." in stored(b) and len(stored(b)) == 5


def test_the_digest_hooks_read_the_same_branch(env: Path, tmp_path: Path) -> None:
    # The session's digest listed "Use RabbitMQ" among its decisions, edited away.
    entries = [
        *_ASKED[:2],
        _entry("u2", "a1", "user", "We decided to use RabbitMQ for the mailer."),
        _entry("u2e", "a1", "user", "We decided to keep Redis streams for the mailer."),
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    result = cli("hook", "session-end", input=hook_json("SessionEnd", env, path, reason="exit"))
    assert result.exit_code == 0, result.output
    (digest,) = [m for m in brain_for(env).recent(10) if DIGEST_TAG in m.tags]
    assert "keep Redis streams" in digest.content and "RabbitMQ" not in digest.content


def _counted(monkeypatch: pytest.MonkeyPatch, module: Any) -> list[int]:
    parsed = [0]
    read = module.read_json

    def counting(text: str | bytes) -> Any:
        parsed[0] += 1
        return read(text)

    monkeypatch.setattr(module, "read_json", counting)
    return parsed


_LONG = [
    entry
    for i in range(40)
    for entry in (
        _entry(f"u{i}", f"a{i - 1}" if i else None, "user", f"Question {i} about the mailer?"),
        _entry(f"a{i}", f"u{i}", "assistant", f"Answer {i}: the queue holds."),
    )
]


def test_a_turn_without_a_uuid_after_an_abandoned_one_is_checked_under_its_own_key(
    tmp_path: Path,
) -> None:
    # Such a turn's key counts the turns before it; checked while the abandoned one still
    # counted, it missed the turn it repeats (the same key, speaker and words) and both were
    # stored.
    bare = {"type": "user", "sessionId": SESSION, "message": {"role": "user", "content": "Hi."}}
    alone = parse_text("".join(json.dumps(e) + "\n" for e in [*_ASKED[:2], bare]))[0]
    twin = _entry(alone.turns[2].key, "a1", "user", "Hi.")
    edited = [_entry("u2", "a1", "user", "Use RabbitMQ then."), bare, twin]
    (conversation,) = parse_text("".join(json.dumps(e) + "\n" for e in [*_ASKED[:2], *edited]))
    said = [t.text for t in conversation.turns]
    assert said == ["Which queue should the mailer use?", "Redis streams fit the volume.", "Hi."]


def test_a_hook_parses_its_part_of_a_transcript_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The hook's 60 s: a 32 MiB part's digest took 12.0 s where 8.4 s read it once.
    from octobrain.memory import transcript_file
    from octobrain.memory.transcript_parts import transcript_part

    parsed = _counted(monkeypatch, transcript_file)
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in _LONG))
    assert transcript_part(path).done
    assert parsed[0] == len(_LONG)


def test_an_abandoned_turn_s_bad_time_refuses_nothing(tmp_path: Path) -> None:
    # Turns are checked before the branch is known (one parse): a check that fails at a turn
    # abandoned is no reason to refuse the transcript, which is read again, the branch known.
    abandoned = _entry("u2", "a1", "user", "Use RabbitMQ then.", timestamp="yesterday")
    edited = [abandoned, _entry("u2e", "a1", "user", "Keep Redis streams.")]
    assert _said([*_ASKED[:2], *edited], tmp_path)[-1] == "Keep Redis streams."
    undated = [_entry("u2", "a1", "user", "Use RabbitMQ.", timestamp=None), edited[1]]
    (conversation,) = parse_text("".join(json.dumps(e) + "\n" for e in [*_ASKED[:2], *undated]))
    assert (conversation.abandoned, conversation.undated) == (1, 0)
    with pytest.raises(InvalidInput, match="timestamp"):
        _said([*_ASKED[:2], abandoned], tmp_path)  # (on the branch: refused, as before)


def test_a_hook_s_full_digest_stops_where_it_filled_though_a_branch_was_left_out(
    env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A digest full before the part's end stops there: the next hook reads on from that line,
    # the abandoned branch before it still left out of the points.
    from octobrain.memory import hooks
    from octobrain.memory.transcript_parts import transcript_part

    monkeypatch.setattr(hooks, "MAX_POINTS", 1)
    monkeypatch.setattr(hooks, "MAX_FILES", 0)
    said = [
        _entry("u1", None, "user", "We decided to use RabbitMQ for the mailer."),
        _entry("u1e", None, "user", "We decided to keep Redis streams for the mailer."),
        _entry("a1", "u1e", "assistant", "We decided to retry each send three times."),
        _entry("u2", "a1", "user", "Fixed the bug in the retry loop by waiting."),
        _entry("u3", "u2", "user", "Fixed the crash on empty batches with a guard."),
        _entry("u4", "u3", "user", "We decided on a dead-letter queue after that."),
    ]
    lines = [json.dumps(e) + "\n" for e in said]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(lines))
    part = transcript_part(path)
    assert part.digest.decisions == [
        "We decided to keep Redis streams for the mailer.",
        "We decided to retry each send three times.",
    ]
    assert part.digest.fixes == [
        "Fixed the bug in the retry loop by waiting.",
        "Fixed the crash on empty batches with a guard.",
    ]
    assert part.done and part.end == len("".join(lines[:5]).encode())
