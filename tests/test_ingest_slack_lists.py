"""`memory ingest` of a Slack export (or a day file of one) whose `users.json` or list of
conversations cannot be read as Slack's: skipped, the ingest going on, and a warning on stderr
naming the file and why; a file beside any other ingested file, not an export's, quietly."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from octobrain.memory.conversation import read_conversations
from tests.cli_memory_support import memory_env, run
from tests.test_ingest_slack_channels import _export

__all__ = ["memory_env"]


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_an_export_s_broken_users_json_is_said_once_on_stderr(
    tmp_path: Path, memory_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: skipped without a word, each speaker then shown by id (U0ANA), no word why.
    from octobrain.cli.library_log import install

    root = tmp_path / "export"
    _export(root, lists=("channels.json",))
    (root / "users.json").write_bytes(b'[{"id": "U0ANA", "name": "Ana \xff"}]')
    root_logger = logging.getLogger()
    monkeypatch.setattr(root_logger, "handlers", list(root_logger.handlers))
    install()  # as the command line does: library warnings on stderr
    done = run("ingest", str(root))
    assert done.exit_code == 0, done.output
    assert "ingested 4 turns of 4 conversations" in done.stdout
    said = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert said == [
        "warning: users.json: not read, is not UTF-8 text (line 1, column 31); save it as "
        "UTF-8; its members are named by their Slack user id"
    ]


def test_a_day_file_s_lists_not_slack_s_are_each_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    days = _export(tmp_path / "export", lists=("users.json",))
    (tmp_path / "export" / "channels.json").write_text('{"channels": []}')  # (not a list)
    (tmp_path / "export" / "groups.json").write_text('[{"id": "G0SEC", "name": ')  # (cut)
    (tmp_path / "export" / "dms.json").write_bytes(b"\xff not UTF-8")
    with caplog.at_level(logging.WARNING):
        (chat,) = read_conversations(days["general"])
    assert chat.turns[0].speaker == "Ana"  # (users.json read: the ingest goes on)
    where = tmp_path / "export"
    assert _warnings(caplog) == [
        f"warning: {where / 'channels.json'}: not read, must be Slack's list of channels "
        "({id, name}); the channels it lists are named by id, their turns untitled",
        f"warning: {where / 'groups.json'}: not read, is not JSON (Expecting value); expected "
        "Slack's list of private channels ({id, name}); the private channels it lists "
        "are named by id, their turns untitled",
        f"warning: {where / 'dms.json'}: not read, is not UTF-8 text (line 1, column 1); save "
        "it as UTF-8; the direct messages it lists are named by id, their turns untitled",
    ]


def test_another_program_s_users_json_beside_a_chat_file_is_skipped_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Not a Slack export's (no day file ingested): nothing there is this ingest's to mention.
    (tmp_path / "users.json").write_text('{"users": [{"id": 1}]}')
    (tmp_path / "channels.json").write_bytes(b"\xff")
    talk = tmp_path / "talk.jsonl"
    talk.write_text(json.dumps({"speaker": "Ana", "text": "Deploy is done"}) + "\n")
    with caplog.at_level(logging.WARNING):
        (chat,) = read_conversations(talk)
    assert [t.text for t in chat.turns] == ["Deploy is done"]
    assert _warnings(caplog) == []
