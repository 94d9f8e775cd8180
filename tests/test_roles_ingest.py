"""Roles and ingest: a turn's id names the role that stored it, so a second role ingesting a
conversation another role stored gets its own copy (it cannot see the other's), and a role's
turns stored before the id named the role are still found as present."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from octobrain.cli.main import main
from octobrain.memory import ingest
from tests.cli_memory_support import memory_env
from tests.server_support import PROJECT_A

__all__ = ["memory_env"]

TURNS = [
    {"speaker": "ana", "text": "The canary deploy goes out on Tuesday."},
    {"speaker": "bo", "text": "Then the rollback drill runs on Wednesday."},
]


def _memory(*args: str) -> Result:
    return CliRunner().invoke(main, ["memory", "--scope", PROJECT_A, *args])


def _ingest(role: str, chat: Path) -> str:
    done = _memory("--role", role, "ingest", str(chat))
    assert done.exit_code == 0, done.output
    return done.output


def _found(role: str) -> list[str]:
    listed = _memory("--role", role, "remember", "canary rollback", "--min-relevance", "0",
                     "--format", "json")  # fmt: skip
    assert listed.exit_code == 0, listed.output
    return sorted(hit["content"] for hit in json.loads(listed.stdout)["results"])


def test_a_second_role_ingesting_a_conversation_finds_its_turns(
    memory_env: dict[str, str], tmp_path: Path
) -> None:
    # The planner was told "0 added, 2 already present" and then found none of them: the
    # turns were the reviewer's, under ids that named no role.
    chat = tmp_path / "standup.json"
    chat.write_text(json.dumps(TURNS))
    assert "2 added" in _ingest("reviewer", chat)
    assert "2 added" in _ingest("planner", chat)
    said = sorted(t["text"] for t in TURNS)
    assert _found("planner") == _found("reviewer") == said
    assert "0 added, 2 already present" in _ingest("planner", chat)


def test_a_role_s_turns_stored_under_ids_naming_no_role_are_present(
    memory_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = tmp_path / "standup.json"
    chat.write_text(json.dumps(TURNS))
    role_blind = ingest.turn_id
    with monkeypatch.context() as before:  # ids as the version before them made them
        before.setattr(ingest, "turn_id", lambda s, c, k, role="": role_blind(s, c, k))
        assert "2 added" in _ingest("reviewer", chat)
    assert "0 added, 2 already present" in _ingest("reviewer", chat)
    assert "2 added" in _ingest("planner", chat)  # not the reviewer's turns
    assert len(_found("planner")) == len(_found("reviewer")) == 2
