"""`octobrain hook install --role R`: the hooks it writes brief and store digests as the role,
and hooks installed before are brought to it (a role added, another replaced, `--role ''` taken
out); installed again without `--role`, hooks keep the role they run as."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.hooks_support import cli


def _installed(tmp_path: Path, start: str, compact: str, end: str) -> Path:
    """A settings file whose three octobrain hooks run these commands."""
    commands = zip(("SessionStart", "PreCompact", "SessionEnd"), (start, compact, end), strict=True)
    settings = tmp_path / "settings.json"
    hooks = {e: [{"hooks": [{"type": "command", "command": c}]}] for e, c in commands}
    settings.write_text(json.dumps({"hooks": hooks}, indent=2) + "\n")
    return settings


def _commands(settings: Path) -> list[str]:
    hooks = json.loads(settings.read_text())["hooks"]
    return [hooks[event][0]["hooks"][0]["command"] for event in hooks]


def test_hook_install_with_a_role_writes_it_shell_quoted_into_each_command(
    tmp_path: Path,
) -> None:
    program = tmp_path / "octobrain"
    program.write_text('#!/bin/sh\nfor a in "$@"; do printf "[%s]" "$a"; done\n')
    program.chmod(0o755)
    settings = tmp_path / "settings.json"
    role = "code reviewer's"
    done = cli("hook", "install", "--settings", str(settings), "--command", str(program),
               "--role", role, "--yes")  # fmt: skip
    assert done.exit_code == 0, done.output
    assert _commands(settings) == [
        f"{program} hook {sub} --role {shlex.quote(role)}"
        for sub in ("session-start", "pre-compact", "session-end")
    ]
    ran = subprocess.run(["sh", "-c", _commands(settings)[0]], capture_output=True, text=True)
    assert ran.stdout == f"[hook][session-start][--role][{role}]"
    bad = cli("hook", "install", "--settings", str(settings), "--role", "a\nb", "--yes")
    assert bad.exit_code == 2 and "--role" in bad.output


def test_a_role_given_where_role_less_hooks_are_installed_is_set_in_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: "octobrain hooks are already installed", and the planner's sessions were briefed
    # on every role's memories and their digests stored role-less.
    settings = _installed(
        tmp_path,
        "octobrain hook session-start --max-tokens 800",
        "octobrain hook pre-compact --scope acme/api",
        "octobrain hook session-end 2>>/tmp/ob.log",
    )
    before = settings.read_text()
    install = ("hook", "install", "--settings", str(settings), "--command", "octobrain")
    shown = cli(*install, "--role", "planner")  # (no terminal: the diff shown, not written)
    assert shown.exit_code == 2 and "already installed" not in shown.output, shown.output
    assert '+            "command": "octobrain hook session-end --role planner 2>>/tmp/ob.log"' in (
        shown.stderr
    )
    assert settings.read_text() == before
    done = cli(*install, "--role", "planner", "--yes")
    assert done.exit_code == 0 and "SessionEnd (now --role planner)" in done.output, done.output
    assert _commands(settings) == [
        "octobrain hook session-start --role planner --max-tokens 800",
        "octobrain hook pre-compact --role planner --scope acme/api",
        "octobrain hook session-end --role planner 2>>/tmp/ob.log",
    ]
    again = cli(*install, "--role", "planner", "--yes")
    assert again.exit_code == 0 and "already installed" in again.output
    monkeypatch.setattr("octobrain.cli.common.stdin_is_terminal", lambda: True)
    asked = cli(*install, "--role", "reviewer", input="n\n")
    assert '-            "command": "octobrain hook session-end --role planner' in asked.output
    assert "nothing written" in asked.output
    assert _commands(settings)[2] == "octobrain hook session-end --role planner 2>>/tmp/ob.log"


def test_another_role_is_replaced_a_role_less_install_keeps_it_and_an_empty_one_drops_it(
    tmp_path: Path,
) -> None:
    settings = _installed(
        tmp_path,
        "/opt/ob hook session-start --role=reviewer",
        "/opt/ob hook pre-compact --role 'old role' --scope acme/api",
        "/opt/ob hook session-end --role reviewer --role 'second'",
    )
    install = ("hook", "install", "--settings", str(settings), "--command", "/opt/ob", "--yes")
    done = cli(*install, "--role", "planner")
    assert done.exit_code == 0 and "PreCompact (now --role planner)" in done.output, done.output
    assert _commands(settings) == [
        "/opt/ob hook session-start --role planner",
        "/opt/ob hook pre-compact --role planner --scope acme/api",
        "/opt/ob hook session-end --role planner",
    ]
    # Installed again as before (to point the hooks at a new path, say): the planner's hooks
    # stay the planner's; widening them to every role's memories takes `--role ''`.
    kept = cli(*install)
    assert kept.exit_code == 0 and "already installed" in kept.output, kept.output
    assert _commands(settings)[0] == "/opt/ob hook session-start --role planner"
    dropped = cli(*install, "--role", "")
    assert "SessionStart (now no role)" in dropped.output, dropped.output
    assert _commands(settings) == [
        "/opt/ob hook session-start",
        "/opt/ob hook pre-compact --scope acme/api",
        "/opt/ob hook session-end",
    ]
