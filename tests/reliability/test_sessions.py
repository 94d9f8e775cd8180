"""Hooks and instructions: a hook that cannot read its transcript says so on stderr (and still
fails open), and the server's instructions hold whichever project locks the session."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client

from octobrain.server import Workspace, build_server
from tests.reliability.test_storage_faults import EXE
from tests.server_support import PROJECT_A, PROJECT_B, call, hash_pool, outside_env, run


@pytest.mark.parametrize("kind", ["missing", "directory", "garbage", "fifo", "device"])
def test_session_end_with_an_unreadable_transcript_says_so(tmp_path: Path, kind: str) -> None:
    # A FIFO held the hook (and a service running it) until a writer came; /dev/zero was read
    # until memory ran out. Both are refused at once: not regular files.
    path = tmp_path / "transcript.jsonl"
    if kind == "directory":
        path.mkdir()
    elif kind == "garbage":
        path.write_bytes(b"\x00\x01 not json at all\n{{{{\n")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path = Path("/dev/zero")
    hook = {"hook_event_name": "SessionEnd", "session_id": "s1", "cwd": str(tmp_path),
            "transcript_path": str(path), "reason": "exit"}  # fmt: skip
    keep = outside_env()
    env = {
        **keep,
        "OCTOBRAIN_DATA_DIR": str(tmp_path / "data"),
        "OCTOBRAIN_EMBEDDING_MODEL": "hash:64",
    }
    done = subprocess.run(
        [EXE, "hook", "session-end"],
        input=json.dumps(hook),
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0 and done.stdout == ""  # fails open: the session goes on
    [line] = done.stderr.splitlines()
    assert line.startswith("octobrain session-end: transcript_path: ") and str(path) in line
    if kind in ("fifo", "device"):
        assert line.endswith("is not a regular file")


def test_hook_input_nested_too_deeply_is_named_and_one_such_transcript_line_skipped(
    tmp_path: Path,
) -> None:
    env = {
        **outside_env(),
        "OCTOBRAIN_DATA_DIR": str(tmp_path / "data"),
        "OCTOBRAIN_EMBEDDING_MODEL": "hash:64",
    }

    def hook(event: str, stdin: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [EXE, "hook", event], input=stdin, env=env, capture_output=True, text=True,
            timeout=60, check=False,
        )  # fmt: skip

    deep = "[" * 100_000 + "]" * 100_000
    done = hook("session-start", deep)
    assert done.returncode == 0 and done.stdout == ""  # fails open
    assert done.stderr.startswith("octobrain session-start: stdin: ") and "nested" in done.stderr
    # One line of the transcript nested too deeply: the rest of the session is still kept.
    said = "We chose blue-green deploys for the billing service after the outage."
    turn = {"type": "user", "message": {"role": "user", "content": said}, "sessionId": "s9"}
    path = tmp_path / "transcript.jsonl"
    path.write_text(json.dumps(turn) + "\n" + '{"a": ' + deep + "}\n")
    event = {"hook_event_name": "SessionEnd", "session_id": "s9", "cwd": str(tmp_path),
             "transcript_path": str(path), "reason": "exit"}  # fmt: skip
    done = hook("session-end", json.dumps(event))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "recursion" not in done.stderr, done.stderr


def _git_repo(path: Path, remote: str) -> Path:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    subprocess.run(["git", "-C", str(path), "remote", "add", "origin", remote], check=True)
    return path


def test_instructions_hold_when_roots_lock_the_session_to_another_project(
    tmp_path: Path,
) -> None:
    api = _git_repo(tmp_path / "api", "git@github.com:acme/api.git")
    web = _git_repo(tmp_path / "web", "https://github.com/acme/web.git")
    server = build_server(hash_pool(tmp_path / "db"), Workspace.scan(api))

    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=web.as_uri())])  # type: ignore[arg-type]

    async def body() -> None:
        async with Client(server, mode="legacy", list_roots_callback=roots) as client:
            text = client.instructions or ""
            assert "locked to the project scope" not in text  # not a claim the roots undo
            assert "MCP roots" in text and PROJECT_A in text
            _, reply = await call(client, "memorize", title="Web fact", content="w" * 20)
            assert f"Scope: {PROJECT_B}" in reply

    run(body)
