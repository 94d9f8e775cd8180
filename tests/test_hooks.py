"""`octobrain brief`, `octobrain hook …` with real Claude Code hook JSON, and the MCP briefing."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from mcp import Client

from octobrain.config import load_config
from octobrain.errors import InvalidInput
from octobrain.memory.brain import Brain
from octobrain.memory.gist import DIGEST_TAG
from octobrain.memory.hooks import digest_transcript
from octobrain.memory.transcript_file import read_transcript
from octobrain.models import Source
from octobrain.scope import derive_scope
from tests.server_support import PROJECT_A, briefed_pool, run, server_for

SESSION = "9f0c2a4e-51b7-4c1e-8d0a-3f2b6c7d8e90"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OCTOBRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("OCTOBRAIN_EMBEDDING_MODEL", "hash:64")
    monkeypatch.delenv("OCTOBRAIN_CONFIG_PATH", raising=False)
    project = tmp_path / "proj"
    project.mkdir()
    return project


def cli(*args: str, input: str | None = None) -> Result:
    from octobrain.cli.main import main

    return CliRunner().invoke(main, list(args), input=input)


def brain_for(project: Path, session_id: str = "") -> Brain:
    return Brain(derive_scope(project), config=load_config(), session_id=session_id)


def transcript(path: Path, project: Path) -> Path:
    """A Claude Code JSONL transcript: user text, assistant text + tool_use, tool results."""
    entries: list[dict[str, Any]] = [
        {"type": "summary", "summary": "Fixing the export", "leafUuid": "x"},
        {
            "type": "user",
            "sessionId": SESSION,
            "cwd": str(project),
            "message": {"role": "user", "content": "The nightly export crashes, please look."},
        },
        {
            "type": "assistant",
            "sessionId": SESSION,
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me run the tests first."},
                    {
                        "type": "tool_use",
                        "id": "toolu_01",
                        "name": "Bash",
                        "input": {"command": "pytest -q tests/test_export.py"},
                    },
                ],
            },
        },
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_01",
                        "content": "TypeError: can't compare offset-naive and offset-aware",
                        "is_error": True,
                    }
                ],
            },
        },
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [
                    {
                        "type": "text",
                        "text": "The root cause is naive datetimes from the importer. "
                        "We decided to normalise all timestamps to UTC at the boundary.",
                    },
                    {
                        "type": "tool_use",
                        "id": "toolu_02",
                        "name": "Edit",
                        "input": {
                            "file_path": str(project / "src" / "export.py"),
                            "old_string": "a",
                            "new_string": "b",
                        },
                    },
                    {
                        "type": "tool_use",
                        "id": "toolu_03",
                        "name": "Write",
                        "input": {
                            "file_path": str(project / "tests" / "test_tz.py"),
                            "content": "",
                        },
                    },
                ],
            },
        },
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": "Fixed: the export test now passes."}],
            },
        },
    ]
    path.write_text("\n".join(json.dumps(e) for e in entries) + "\nnot json\n")
    return path


def hook_json(event: str, project: Path, transcript_path: Path, **extra: str) -> str:
    return json.dumps(
        {
            "session_id": SESSION,
            "transcript_path": str(transcript_path),
            "cwd": str(project),
            "hook_event_name": event,
            **extra,
        }
    )


def test_digest_is_extractive(tmp_path: Path) -> None:
    project = tmp_path / "p"
    digest = digest_transcript(
        read_transcript(transcript(tmp_path / "t.jsonl", project)), str(project)
    )
    assert digest.files == ["src/export.py", "tests/test_tz.py"]
    assert any("root cause is naive datetimes" in f for f in digest.fixes)
    assert digest.decisions == ["We decided to normalise all timestamps to UTC at the boundary."]
    with pytest.raises(InvalidInput, match=r"^transcript_path: no such file"):
        read_transcript(tmp_path / "missing.jsonl")


def test_a_transcript_line_json_cannot_read_is_skipped_and_the_rest_kept(tmp_path: Path) -> None:
    # An integer longer than Python converts raised a bare ValueError: the whole digest lost.
    kept = {"type": "user", "message": {"role": "user", "content": "We chose blue-green."}}
    path = tmp_path / "t.jsonl"
    lines = [json.dumps(kept), '{"n": ' + "9" * 5000 + "}", "[" * 100_000, "not json"]
    path.write_text("\n".join(lines) + "\n")
    assert list(read_transcript(path)) == [kept]


def _said(text: str, *edits: str) -> dict[str, Any]:
    """An assistant entry saying `text` and editing `edits`."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}]
    blocks += [{"type": "tool_use", "name": "Edit", "input": {"file_path": f}} for f in edits]
    return {"type": "assistant", "message": {"role": "assistant", "content": blocks}}


def test_odd_paths_and_control_characters_do_not_cost_the_digest(env: Path, tmp_path: Path) -> None:
    # A path too long to store, a NUL or a lone surrogate in one used to fail the whole
    # digest; terminal escapes in what was said were stored and printed back raw.
    # (A bidirectional override, refused in a stored path, is dropped too.)
    odd = ["a/" * 300 + "long.py", "src/nul\x00.py", "src/\udcff.py", "src/\x1b[31mred.py"]
    odd.append("src/\u202eyp.evil")
    said = "We decided to \x1b]52;c;ZXZpbA==\x07use UTC\x1b[2J everywhere."
    path = tmp_path / "t.jsonl"
    lines = [json.dumps(_said(said, *odd, "src/kept.py"))]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
    digest = digest_transcript(read_transcript(path))
    assert digest.files == ["src/kept.py"]
    assert digest.decisions == ["We decided to ]52;c;ZXZpbA==use UTC[2J everywhere."]
    result = cli("hook", "session-end", input=hook_json("SessionEnd", env, path, reason="exit"))
    assert result.exit_code == 0 and "digest stored" in result.output, result.output
    [stored] = [m for m in brain_for(env).recent(10) if DIGEST_TAG in m.tags]
    assert stored.related_files == ["src/kept.py"] and "\x1b" not in stored.content


def test_a_line_over_the_cap_is_skipped_unread_and_the_rest_digested(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from octobrain.memory import transcript_file

    monkeypatch.setattr(transcript_file, "LINE_BYTES", 1000)
    path = tmp_path / "t.jsonl"
    big = json.dumps(_said("We decided to skip this one. " + "x" * 5000))
    kept = json.dumps(_said("We decided to keep this one."))
    path.write_text(f"{big}\n{kept}\n")
    assert digest_transcript(read_transcript(path)).decisions == ["We decided to keep this one."]


@pytest.mark.parametrize("end", ["\r", "\r\n"])
def test_a_transcript_with_other_line_ends_is_digested(tmp_path: Path, end: str) -> None:
    # Lone CRs (old Mac) made the transcript one line, unreadable: no digest at all.
    path = tmp_path / "t.jsonl"
    entries = [_said("We decided to use Redis."), _said("We decided to pin the client.")]
    path.write_bytes(end.join(json.dumps(e) for e in entries).encode() + end.encode())
    digest = digest_transcript(read_transcript(path))
    assert digest.decisions == ["We decided to use Redis.", "We decided to pin the client."]


def test_two_long_session_ids_that_share_a_start_keep_two_digests(
    env: Path, tmp_path: Path
) -> None:
    # Tags hold 50 characters: ids cut to the same 42 were one session, and the second
    # session's digest replaced the first's.
    ids = [f"ci-runner-7/pipeline-20261203-nightly-build-job-000{i}" for i in (1, 2)]
    for sid, choice in zip(ids, ("Redis", "Postgres"), strict=True):
        path = tmp_path / f"{sid[-4:]}.jsonl"
        path.write_text(json.dumps(_said(f"We decided to use {choice} for the queue.")) + "\n")
        event = json.loads(hook_json("SessionEnd", env, path, reason="exit"))
        result = cli("hook", "session-end", input=json.dumps({**event, "session_id": sid}))
        assert result.exit_code == 0, result.output
    digests = [m for m in brain_for(env).recent(10) if DIGEST_TAG in m.tags]
    assert sorted("Redis" in m.content for m in digests) == [False, True]
    assert all(len(t) <= 50 for m in digests for t in m.tags)


def test_pre_compact_and_session_end_store_one_digest(env: Path, tmp_path: Path) -> None:
    path = transcript(tmp_path / "session.jsonl", env)
    result = cli(
        "hook",
        "pre-compact",
        input=hook_json("PreCompact", env, path, trigger="auto", custom_instructions=""),
    )
    assert result.exit_code == 0, result.output
    result = cli("hook", "session-end", input=hook_json("SessionEnd", env, path, reason="exit"))
    assert result.exit_code == 0, result.output
    brain = brain_for(env)
    digests = [m for m in brain.recent(50) if DIGEST_TAG in m.tags]
    assert len(digests) == 1
    digest = digests[0]
    assert digest.source is Source.AGENT_INFERRED and digest.importance == pytest.approx(0.3)
    assert f"session:{SESSION}" in digest.tags
    assert "Files touched: src/export.py, tests/test_tz.py" in digest.content
    assert "normalise all timestamps to UTC" in digest.content
    assert digest.related_files == ["src/export.py", "tests/test_tz.py"]


def test_two_hooks_of_one_session_at_once_store_one_digest(
    env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A PreCompact and a SessionEnd fired together each looked for the session's digest, found
    # none, and stored one: two digests, of which later hooks refreshed only the first.
    import threading

    from octobrain.memory import hooks, session_digest, transcript_parts

    path = transcript(tmp_path / "session.jsonl", env)
    both_looked = threading.Barrier(2)
    looked = session_digest._session_digests

    def look_then_wait(brain: Brain, tag: str) -> Any:
        found = looked(brain, tag)
        with contextlib.suppress(threading.BrokenBarrierError):  # the other one waits its turn
            both_looked.wait(timeout=2)
        return found

    monkeypatch.setattr(session_digest, "_session_digests", look_then_wait)

    def hook(event: str, more: list[str]) -> None:  # the later hook has seen more
        given = hooks.HookInput(event, SESSION, str(path), str(env), {})
        part = transcript_parts.transcript_part(path, str(env))
        part.digest.decisions += more
        session_digest.store_digest(brain_for(env, SESSION), given, part)

    threads = [
        threading.Thread(target=hook, args=("PreCompact", [])),
        threading.Thread(target=hook, args=("SessionEnd", ["We decided to keep the cron job."])),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    digests = [m for m in brain_for(env).recent(50) if DIGEST_TAG in m.tags]
    assert len(digests) == 1


def test_hooks_fail_open(env: Path) -> None:
    result = cli("hook", "session-end", input="{not json")
    assert result.exit_code == 0 and "stdin: must be the hook's JSON object" in result.output


@pytest.mark.parametrize("hook", ["session-start", "pre-compact", "session-end"])
def test_a_nul_in_a_hook_s_cwd_or_transcript_path_is_named(env: Path, hook: str) -> None:
    # Before: a cwd holding one was "directory: must not contain NUL characters", a field the
    # hook's JSON has not.
    for key in ("cwd", "transcript_path"):
        given = {"session_id": "s1", "cwd": str(env), "transcript_path": "t.jsonl", key: "a\x00b"}
        result = cli("hook", hook, input=json.dumps(given))
        assert result.exit_code == 0, result.output  # (a hook fails open)
        assert f"stdin.{key}: must not contain NUL characters" in result.stderr, result.stderr


def test_a_hook_cwd_removed_or_a_file_in_a_repository_is_the_repository_s_scope(
    env: Path, tmp_path: Path
) -> None:
    # A cwd that was not a directory was a scope of its own, `local/<parent>/<name>`: a session
    # that ended in a directory it had removed stored its digest where no briefing of the
    # repository looked.
    subprocess.run(["git", "init", "-q", str(env)], check=True)
    subprocess.run(
        ["git", "-C", str(env), "remote", "add", "origin", "https://github.com/acme/shop"]
    )
    (env / "README.md").write_text("shop\n")
    path = transcript(tmp_path / "session.jsonl", env)
    gone = env / "build" / "tmp"
    for cwd in (gone, env / "README.md"):
        given = json.loads(hook_json("SessionStart", cwd, path))
        result = cli("hook", "session-start", input=json.dumps(given))
        context = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
        assert context.startswith("# Memory briefing: github.com/acme/shop\n"), context
    ended = cli("hook", "session-end", input=hook_json("SessionEnd", gone, path))
    assert ended.exit_code == 0 and "digest stored" in ended.stderr, ended.output
    brain = Brain("github.com/acme/shop", config=load_config())
    assert [DIGEST_TAG in m.tags for m in brain.recent(10)] == [True]


def test_the_hook_json_is_read_as_utf8_whatever_stdin_decodes(tmp_path: Path) -> None:
    # Decoded as the process's stdin decodes (PYTHONIOENCODING=latin-1, a Windows code page),
    # the cwd `/…/josé` was `/…/josÃ©`: another scope, local/<parent>/josÃ©.
    project = tmp_path / "josé"
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    subprocess.run(
        ["git", "-C", str(project), "remote", "add", "origin", "https://github.com/acme/jose"]
    )
    env = {**os.environ, "OCTOBRAIN_DATA_DIR": str(tmp_path / "data"),
           "PYTHONIOENCODING": "latin-1", "OCTOBRAIN_SERVICE_ENABLED": "0",
           "OCTOBRAIN_EMBEDDING_MODEL": "hash:64"}  # fmt: skip

    def session_start(given: bytes) -> subprocess.CompletedProcess[bytes]:
        argv = [sys.executable, "-m", "octobrain", "hook", "session-start"]
        return subprocess.run(argv, input=given, capture_output=True, env=env, timeout=120)

    given = {"hook_event_name": "SessionStart", "session_id": "s1", "cwd": str(project)}
    done = session_start(json.dumps(given, ensure_ascii=False).encode("utf-8"))
    assert done.returncode == 0, done.stderr
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert context.startswith("# Memory briefing: github.com/acme/jose\n"), context
    # A byte that is not UTF-8 (a directory named in Latin-1) is the directory's byte, as a C
    # locale read it: under a UTF-8 one it was a UnicodeDecodeError and no briefing.
    latin = os.fsencode(tmp_path) + b"/caf\xe9"
    os.rename(project, latin)
    env.pop("PYTHONIOENCODING")
    done = session_start(b'{"session_id": "s\xff1", "cwd": "' + latin + b'"}')
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert context.startswith("# Memory briefing: github.com/acme/jose\n"), context


def test_session_start_prints_the_briefing_as_additional_context(env: Path) -> None:
    brain = brain_for(env)
    brain.memorize(
        "Use ruff",
        "Lint and format with ruff; no black, no isort.",
        memory_type="decision",
        source="user_confirmed",
    )
    payload = json.dumps(
        {
            "session_id": SESSION,
            "transcript_path": "/tmp/none.jsonl",
            "cwd": str(env),
            "hook_event_name": "SessionStart",
            "source": "startup",
        }
    )
    result = cli("hook", "session-start", input=payload)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    context = out["hookSpecificOutput"]["additionalContext"]
    assert context.startswith(f"# Memory briefing: {derive_scope(env)}") and "Use ruff" in context


def test_brief_command_markdown_and_json(env: Path) -> None:
    brain = brain_for(env)
    brain.memorize(
        "Use ruff", "Lint and format with ruff; no black, no isort.", memory_type="decision"
    )
    scope = derive_scope(env)
    md = cli("brief", "--scope", scope)
    assert md.exit_code == 0 and "## What is true about this project" in md.output
    js = cli("brief", "--scope", scope, "--format", "json", "--max-tokens", "200")
    data = json.loads(js.output)
    assert data["max_tokens"] == 200 and data["tokens"] <= 200
    assert data["sections"][0]["items"][0]["title"] == "Use ruff"
    bad = cli("brief", "--scope", scope, "--max-tokens", "5")
    assert bad.exit_code == 2 and "max_tokens: must be an integer in [50, 100000]" in bad.output


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


def test_a_hook_given_endless_stdin_reads_a_bounded_amount_and_fails_open(tmp_path: Path) -> None:
    env = {**os.environ, "OCTOBRAIN_DATA_DIR": str(tmp_path), "OCTOBRAIN_SERVICE_ENABLED": "0",
           "OCTOBRAIN_EMBEDDING_MODEL": "hash:64"}  # fmt: skip
    with open("/dev/zero", "rb") as endless:
        done = subprocess.run(
            [sys.executable, "-m", "octobrain", "hook", "pre-compact", "--scope", "a/b"],
            stdin=endless, capture_output=True, env=env, timeout=60,
        )  # fmt: skip
    # Before: read until memory ran out (6–7 GB in 10 s).
    assert done.returncode == 0, done.stderr
    assert b"stdin: the hook's JSON must be at most 1,048,576 bytes" in done.stderr


# ---- MCP prompt and resource ----------------------------------------------------------------


def test_mcp_prompt_and_resource_brief_the_locked_scope(tmp_path: Path) -> None:
    pool = briefed_pool(tmp_path / "db")
    pool.call(
        "github.com/acme/other",
        None,
        lambda b: b.memorize(
            "Other project fact", "Only the other project knows this.", memory_type="decision"
        ),
    )
    server = server_for(pool, tmp_path, PROJECT_A)

    async def body() -> None:
        async with Client(server) as client:
            prompts = await client.list_prompts()
            assert [p.name for p in prompts.prompts] == ["brief"]
            prompt = await client.get_prompt("brief", {"max_tokens": "300"})
            text = prompt.messages[0].content.text  # type: ignore[union-attr]
            assert "Use ruff" in text and "Other project" not in text
            resources = await client.list_resources()
            assert [str(r.uri) for r in resources.resources] == ["octobrain://brief"]
            read = await client.read_resource("octobrain://brief")
            content = read.contents[0]
            assert content.mime_type == "text/markdown"
            assert "Use ruff" in content.text  # type: ignore[union-attr]
            with pytest.raises(Exception, match="scope"):
                await client.get_prompt("brief", {"scope": "github.com/acme/other"})
            # An unknown parameter named nothing it takes; a 5,000-digit value came back whole;
            # int() took other scripts' digits ("١٢٣").
            with pytest.raises(Exception, match="x: unknown parameter; the briefing takes max_"):
                await client.read_resource("octobrain://brief?x=1")
            for value in ("9" * 5_000, "١٢٣", "1e3"):
                with pytest.raises(Exception, match="max_tokens: must be an integer") as refused:
                    await client.get_prompt("brief", {"max_tokens": value})
                assert len(str(refused.value)) < 300, str(refused.value)

    run(body)


def test_the_service_reads_a_transcript_before_it_waits_for_its_turn(
    env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 200 MB transcript took 30 s to read inside the service's run lock, and a hosted MCP
    `remember` waited all that time. The service now reads it first, with the lock held by
    someone else, and the command finds the digest already read."""
    import base64
    import threading

    from octobrain.cli.service_command import prefetch
    from octobrain.cli.service_daemon import Service
    from octobrain.cli.service_settings import Settings
    from octobrain.memory import transcript_parts

    path = transcript(tmp_path / "session.jsonl", env)
    settings = Settings(True, 60.0, 5.0, "k", str(tmp_path), str(tmp_path / "none.toml"))
    service = Service(settings)
    request = {
        "argv": ["hook", "session-end"],
        "cwd": str(tmp_path),
        "stdin": base64.b64encode(
            hook_json("SessionEnd", env, path.relative_to(tmp_path)).encode()
        ).decode(),
    }
    with service.run_lock:  # another command runs meanwhile
        reader = threading.Thread(target=prefetch, args=(request,))
        reader.start()
        reader.join(30)
        assert not reader.is_alive()

    def unread(*_: object) -> None:
        raise AssertionError("read again")

    monkeypatch.setattr(transcript_parts, "_read_part", unread)
    monkeypatch.chdir(tmp_path)  # as the service runs the command: in the caller's cwd
    read_first = transcript_parts.transcript_part(path.relative_to(tmp_path), str(env)).digest
    assert read_first == digest_transcript(read_transcript(path), str(env))
    assert read_first.decisions and read_first.files
    path.write_text(path.read_text() + "\n")  # a changed file is read afresh
    with pytest.raises(AssertionError, match="read again"):
        transcript_parts.transcript_part(path, str(env))


def test_a_credential_in_the_transcript_costs_its_sentence_not_the_digest(
    env: Path, tmp_path: Path
) -> None:
    path = transcript(tmp_path / "session.jsonl", env)
    leaked = {
        "type": "user",
        "message": {
            "role": "user",
            "content": "We decided to deploy with the key AKIAIOSFODNN7EXAMPLE for now.",
        },
    }
    path.write_text(path.read_text() + json.dumps(leaked) + "\n")
    result = cli("hook", "session-end", input=hook_json("SessionEnd", env, path, reason="exit"))
    assert result.exit_code == 0 and "digest stored" in result.output, result.output
    (digest,) = [m for m in brain_for(env).recent(50) if DIGEST_TAG in m.tags]
    assert "normalise all timestamps to UTC" in digest.content
    assert "AKIA" not in digest.content and "deploy with the key" not in digest.content


def test_the_digest_keeps_the_session_s_words_not_what_the_client_injected(tmp_path: Path) -> None:
    # CLAUDE.md comes back in a <system-reminder> every session: its "We decided …" lines took
    # the five decision places of every digest, before the session's own decision. A subagent's
    # turns and a compaction's summary are not the conversation either.
    claude_md = (
        "<system-reminder>\nContents of CLAUDE.md:\n"
        + "\n".join(f"- We decided long ago on rule {i} for this repository." for i in range(6))
        + "\n</system-reminder>"
    )
    user = {"type": "user", "message": {"content": [
        {"type": "text", "text": claude_md},
        {"type": "text", "text": "Please make the login page faster."},
    ]}}  # fmt: skip
    inline = _said("We decided to lazy-load the avatar images. <system-reminder>We decided on "
                   "rule 9.</system-reminder>")  # fmt: skip
    sidechain = {**_said("Search agent: I chose to grep for every caller first."),
                 "isSidechain": True}  # fmt: skip
    summary = {**_said("The user agreed to delete the legacy PayPal integration."),
               "isCompactSummary": True}  # fmt: skip
    digest = digest_transcript([user, inline, sidechain, summary])
    assert digest.decisions == ["We decided to lazy-load the avatar images."]


def test_injected_text_is_cut_in_one_pass_however_it_is_broken(tmp_path: Path) -> None:
    # 20,000 "<command-name " with no ">" took 3.2 s: each scanned to the end for its ">".
    import time

    from octobrain.memory.hooks import transcript_text

    entry = _said("<command-name " * 20_000 + "We decided to ship.")
    started = time.process_time()
    assert transcript_text(entry).endswith("We decided to ship.")
    assert time.process_time() - started < 0.5


def test_the_digest_leaves_out_sentences_that_name_a_credential(tmp_path: Path) -> None:
    # Nobody chose what a digest keeps: a password said in prose, or one assigned to a name,
    # is not read back into every later session's briefing.
    leaks = [
        "We agreed the staging DB_PASSWORD=S3cr3tP@ssw0rd99 stays until Friday.",
        "My sudo password is correcthorsebattery, we decided to share it with the team.",
        "We decided to use the webhook https://hooks.slack.com/services/T0AAAA/B0BBBB/abcdefgh.",
        "Going with the API key 9f8e7d6c5b4a39281706f5e4d3c2b1a0 for the staging account.",
        "We decided the access token is kept for one more day.",
    ]
    kept = "We decided to cap the briefing at 1500 tokens per session."
    digest = digest_transcript([_said(text) for text in [*leaks, kept]])
    assert digest.decisions == [kept]
