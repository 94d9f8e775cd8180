"""`octobrain hook install`: idempotent, keeps other settings and the hooks' options, reads only a
settings file it can, writes through a symlink and never over a device."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.hooks_support import cli


def test_hook_install_is_idempotent_and_keeps_other_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    original = {
        "model": "opus",
        "hooks": {
            "PreToolUse": [
                {"matcher": "Bash", "hooks": [{"type": "command", "command": "echo hi"}]}
            ]
        },
    }
    settings.write_text(json.dumps(original, indent=2) + "\n")
    refused = cli("hook", "install", "--settings", str(settings), "--command", "ob")
    # The diff it would have written is shown on stderr: a failed command's stdout is empty.
    assert (refused.exit_code, refused.stdout) == (2, ""), refused.output
    assert "+" in refused.stderr and "error: --yes: required to write without a terminal" in (
        refused.stderr
    )
    assert "Aborted" not in refused.output and json.loads(settings.read_text()) == original
    monkeypatch.setattr("octobrain.cli.common.stdin_is_terminal", lambda: True)
    declined = cli("hook", "install", "--settings", str(settings), "--command", "ob", input="n\n")
    assert (
        declined.exit_code == 0 and "+" in declined.output and "nothing written" in declined.output
    )
    assert json.loads(settings.read_text()) == original
    first = cli("hook", "install", "--settings", str(settings), "--command", "ob", "--yes")
    assert first.exit_code == 0, first.output
    data = json.loads(settings.read_text())
    assert (
        data["model"] == "opus" and data["hooks"]["PreToolUse"] == original["hooks"]["PreToolUse"]
    )
    start = data["hooks"]["SessionStart"][0]
    assert start["hooks"][0]["command"] == "ob hook session-start"
    assert data["hooks"]["PreCompact"][0]["hooks"][0]["command"] == "ob hook pre-compact"
    assert data["hooks"]["SessionEnd"][0]["hooks"][0]["command"] == "ob hook session-end"
    before = settings.read_text()
    again = cli("hook", "install", "--settings", str(settings), "--command", "ob", "--yes")
    assert again.exit_code == 0 and "already installed" in again.output
    assert settings.read_text() == before
    # Hooks installed as a bare `octobrain` (which Claude Code's environment may not find):
    # installing with a path points them at it, keeping the rest. Before: "already installed".
    bare = json.loads(before.replace('"ob hook', '"octobrain hook'))
    settings.write_text(json.dumps(bare, indent=2) + "\n")
    moved = cli("hook", "install", "--settings", str(settings), "--command", "/opt/ob", "--yes")
    assert moved.exit_code == 0 and "SessionEnd (now /opt/ob)" in moved.output, moved.output
    data = json.loads(settings.read_text())
    assert [data["hooks"][e][0]["hooks"][0]["command"] for e in data["hooks"]] == [
        "echo hi",
        "/opt/ob hook session-start",
        "/opt/ob hook pre-compact",
        "/opt/ob hook session-end",
    ]
    assert data["hooks"]["SessionStart"][0]["matcher"] == start["matcher"]
    # Only a bare `octobrain` is pointed elsewhere; `uvx octobrain …` runs as its user chose,
    # and what follows the program (options included) is kept.
    kept = json.loads(before.replace('"ob hook', '"uvx octobrain hook'))
    kept["hooks"]["SessionEnd"][0]["hooks"][0]["command"] = "octobrain -v hook session-end"
    settings.write_text(json.dumps(kept, indent=2) + "\n")
    cli("hook", "install", "--settings", str(settings), "--command", "/opt/ob", "--yes")
    data = json.loads(settings.read_text())
    assert [data["hooks"][e][0]["hooks"][0]["command"] for e in data["hooks"]][1:] == [
        "uvx octobrain hook session-start",
        "uvx octobrain hook pre-compact",
        "/opt/ob -v hook session-end",
    ]
    broken = tmp_path / "broken.json"
    broken.write_text("{oops")
    bad = cli("hook", "install", "--settings", str(broken), "--yes")
    assert bad.exit_code == 2 and "is not JSON" in bad.output and broken.read_text() == "{oops"


def test_hook_install_knows_its_hooks_with_options_and_quotes_a_path_with_spaces(
    tmp_path: Path,
) -> None:
    # Hooks written with the documented options (or a redirection) were not recognised: a
    # second entry of each was added, two briefings injected at every start. A --command
    # naming a file in a folder with a space was written unquoted: `sh` ran `/opt/my`.
    settings = tmp_path / "settings.json"
    commands = {
        "SessionStart": "octobrain hook session-start --max-tokens 800",
        "PreCompact": "octobrain hook pre-compact --scope acme/api",
        "SessionEnd": "octobrain hook session-end 2>>/tmp/ob.log",
    }
    hooks = {e: [{"hooks": [{"type": "command", "command": c}]}] for e, c in commands.items()}
    settings.write_text(json.dumps({"hooks": hooks}))
    again = cli("hook", "install", "--settings", str(settings), "--command", "octobrain", "--yes")
    assert again.exit_code == 0 and "already installed" in again.output, again.output
    assert json.loads(settings.read_text()) == {"hooks": hooks}
    program = tmp_path / "my dir" / "octobrain"
    program.parent.mkdir()
    program.write_text('#!/bin/sh\necho ran "$@"\n')
    program.chmod(0o755)
    fresh = tmp_path / "fresh.json"
    done = cli("hook", "install", "--settings", str(fresh), "--command", str(program), "--yes")
    assert done.exit_code == 0, done.output
    start = json.loads(fresh.read_text())["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    assert start == f"{shlex.quote(str(program))} hook session-start"
    ran = subprocess.run(["sh", "-c", start], capture_output=True, text=True, check=False)
    assert ran.stdout == "ran hook session-start\n"


def test_hook_install_refuses_an_empty_command_rather_than_use_the_default(
    tmp_path: Path,
) -> None:
    settings = tmp_path / "settings.json"
    for given in ("", "  "):
        done = cli("hook", "install", "--settings", str(settings), "--command", given, "--yes")
        assert (done.exit_code, done.stdout) == (2, ""), done.output
        assert done.stderr == (
            "error: --command: must be how to run octobrain (e.g. /usr/local/bin/octobrain), "
            f'got "{given}"\n'
        )
        assert not settings.exists()


@pytest.mark.parametrize(
    ("make", "rule"),
    [
        (lambda p: os.mkfifo(p), "is not a regular file"),
        (lambda p: p.write_bytes(b"\xff\xfe{}"), "is not UTF-8 text"),
        (lambda p: p.write_text("[" * 200_000), "is nested too deeply"),
        (lambda p: p.write_bytes(b" " * (5 << 20)), "is over 4,194,304 bytes"),
        # (before: written back as NaN, which Claude Code cannot read)
        (lambda p: p.write_text('{"x": NaN}'), "holds NaN or Infinity, which JSON has not"),
    ],
    ids=["fifo", "not-utf8", "deep", "huge", "nan"],
)
def test_hook_install_reads_only_a_settings_file_it_can(
    tmp_path: Path, make: Any, rule: str
) -> None:
    # Before: a FIFO hung, /dev/zero took 5 GB in 8 s, the others were tracebacks.
    settings = tmp_path / "settings.json"
    make(settings)
    done = cli("hook", "install", "--settings", str(settings), "--command", "/opt/ob", "--yes")
    assert done.exit_code == 2 and "Traceback" not in done.output, done.output
    assert done.output.startswith("error: settings: ") and rule in done.output, done.output


def test_files_saved_with_a_utf8_byte_order_mark_are_read(tmp_path: Path) -> None:
    # Before: each was refused with Python's "Unexpected UTF-8 BOM (decode using utf-8-sig)".
    from octobrain.memory.conversation import read_conversations

    settings = tmp_path / "settings.json"
    settings.write_bytes(b'\xef\xbb\xbf{"theme": "dark"}')
    done = cli("hook", "install", "--settings", str(settings), "--command", "/opt/ob", "--yes")
    assert done.exit_code == 0, done.output
    assert json.loads(settings.read_text())["theme"] == "dark"
    chat = tmp_path / "chat.json"
    chat.write_bytes(b'\xef\xbb\xbf[{"speaker": "A", "text": "said with a mark"}]')
    [conversation] = read_conversations(chat)
    assert [t.text for t in conversation.turns] == ["said with a mark"]


def test_a_settings_string_utf8_cannot_write_is_kept_as_its_escape(tmp_path: Path) -> None:
    # Before: a lone surrogate ("\\ud800", which JSON may hold) was a UnicodeEncodeError
    # traceback as the change was shown; nothing installed.
    settings = tmp_path / "settings.json"
    settings.write_text('{"env": {"X": "\\ud800"}}')
    done = cli("hook", "install", "--settings", str(settings), "--command", "/opt/ob", "--yes")
    assert done.exit_code == 0, done.output
    assert '"X": "\\ud800"' in settings.read_text()
    assert json.loads(settings.read_text())["env"]["X"] == "\ud800"


def test_hook_install_writes_through_a_symlink_and_never_over_a_device(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "settings.json"
    real.parent.mkdir()
    real.write_text('{"model": "opus"}\n')
    real.chmod(0o600)
    link = tmp_path / "settings.json"
    link.symlink_to(real)
    done = cli("hook", "install", "--settings", str(link), "--command", "/opt/ob", "--yes")
    assert done.exit_code == 0, done.output
    # Before: the link was replaced by a plain file and the dotfiles copy never changed.
    assert link.is_symlink() and "SessionStart" in json.loads(real.read_text())["hooks"]
    assert real.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in real.parent.iterdir()] == ["settings.json"]  # nothing left beside
    # Before: a character device (how /dev/null was lost) was replaced by a regular file.
    device = tmp_path / "device"
    device.symlink_to("/dev/null")
    refused = cli("hook", "install", "--settings", str(device), "--command", "/opt/ob", "--yes")
    assert refused.exit_code == 2 and "is not a regular file" in refused.output, refused.output
    assert Path("/dev/null").is_char_device()


def test_hook_install_without_octobrain_on_path_runs_this_interpreter_s_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `python -m octobrain hook install` from an interpreter whose scripts are not on PATH:
    # the hooks run that interpreter, by its absolute path, with `-m octobrain`.
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    settings = tmp_path / "settings.json"
    done = cli("hook", "install", "--settings", str(settings), "--yes")
    assert done.exit_code == 0, done.output
    entry = json.loads(settings.read_text())["hooks"]["SessionStart"][0]["hooks"][0]
    assert entry["command"] == f"{shlex.quote(sys.executable)} -m octobrain hook session-start"
    monkeypatch.undo()
    (tmp_path / "repo").mkdir()
    event = {"hook_event_name": "SessionStart", "session_id": "s1", "source": "startup"}
    env = {**os.environ, "OCTOBRAIN_DATA_DIR": str(tmp_path / "data"), "PATH": "/usr/bin:/bin",
           "OCTOBRAIN_SERVICE_ENABLED": "0", "OCTOBRAIN_EMBEDDING_MODEL": "hash:64"}  # fmt: skip
    ran = subprocess.run(
        entry["command"], shell=True, input=json.dumps({**event, "cwd": str(tmp_path / "repo")}),
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert ran.returncode == 0 and ran.stderr == "", ran.stderr
