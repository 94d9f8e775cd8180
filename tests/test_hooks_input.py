"""`octobrain hook …` given real Claude Code hook JSON: hooks fail open, a NUL, an odd `cwd` or
encoding, endless stdin, and the service reading a transcript before it waits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from octobrain.config import load_config
from octobrain.memory.brain import Brain
from octobrain.memory.gist import DIGEST_TAG
from octobrain.memory.hooks import digest_transcript
from octobrain.memory.transcript_file import read_transcript
from tests.hooks_support import cli, hook_json, transcript
from tests.hooks_support import env as env  # the fixture, shared


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
