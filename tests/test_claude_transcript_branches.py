"""A Claude Code transcript holding more than one branch (a prompt edited, a rewind): `memory
ingest` reads the conversation Claude Code resumes, the chain of `parentUuid`s from the last
message back to its root, and the file's order where that chain cannot be followed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
