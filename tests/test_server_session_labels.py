"""The `experimental.session` capability's other fields: `role` and `session_id` without a
`scope` (kept on whichever lock the session gets, or none), and `git` (a boolean)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.server_support import PROJECT_A, advertise_session, call, hash_pool, run, server_for
from tests.server_transports_support import stdio_params

NOTE = {"command": "store", "key": "handoff", "content": "Rotate the staging keys."}
READ = {"command": "read", "source": "stored://handoff"}


@pytest.mark.parametrize("locked", [True, False], ids=["cwd-locked", "unlocked"])
def test_a_session_id_named_without_a_scope_keeps_the_sessions_notes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, locked: bool
) -> None:
    # The client names its session (as upstream's octomind does) and leaves the scope to the
    # server's cwd or to `scope` arguments. The id was dropped: its note was kept under the
    # server process's own id, and a later connection naming the same session had none.
    cwd = tmp_path / "work"
    cwd.mkdir()
    if locked:  # (the cwd's project: PROJECT_A)
        subprocess.run(["git", "init", "-q", str(cwd)], check=True)
        remote = f"git@github.com:{PROJECT_A.split('/', 1)[1]}.git"
        subprocess.run(["git", "-C", str(cwd), "remote", "add", "origin", remote], check=True)
    scope = {} if locked else {"scope": PROJECT_A}
    server = stdio_params(tmp_path / "data", cwd)

    async def body() -> None:
        advertise_session(monkeypatch, {"session_id": "s1", "role": "dev"})
        async with Client(server) as client:
            error, reply = await call(client, "knowledge", **NOTE, **scope)
            assert not error, reply
        advertise_session(monkeypatch, {"session_id": "s2"})
        async with Client(server) as client:
            error, reply = await call(client, "knowledge", **READ, **scope)
            assert error and reply == 'source: no stored note "handoff" in this session', reply
        advertise_session(monkeypatch, {"session_id": "s1"})
        async with Client(server) as client:
            error, reply = await call(client, "knowledge", **READ, **scope)
            assert not error and "Rotate the staging keys." in reply, reply

    run(body)


@pytest.mark.parametrize(
    ("session", "rule"),
    [
        ({"git": "false"}, "experimental.session.git: must be a boolean, got string"),
        (
            {"scope": PROJECT_A, "git": 1},
            "experimental.session.git: must be a boolean, got integer",
        ),
        ({"git": None, "session_id": ["s1"]}, "experimental.session.session_id: must be a string"),
        ({"role": "dev\nops"}, "experimental.session.role: must not contain control"),
        ({"session_id": " "}, "experimental.session.session_id: must hold visible text"),
        ({"scope": PROJECT_A, "role": "\u0301"}, "experimental.session.role: must hold visible"),
    ],
)
def test_a_session_field_of_the_wrong_kind_is_refused_with_or_without_a_scope(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, session: dict[str, Any], rule: str
) -> None:
    # Without a scope these were not read at all: the session went on in the cwd's project
    # (`git: "false"` taken as nothing said, a role with a line break dropped).
    pool = hash_pool(tmp_path / "db")
    server = server_for(pool, tmp_path, locked_to=PROJECT_A)
    advertise_session(monkeypatch, session)

    async def body() -> None:
        async with Client(server, mode="legacy") as client:
            error, reply = await call(client, "memorize", title="Local fact", content="x" * 20)
            assert error and reply.startswith(rule), reply
            error, reply = await call(client, "remember", query="local fact")
            assert error and reply.startswith(rule), reply

    run(body)
    found = pool.call(PROJECT_A, None, lambda b: b.remember("local fact", min_relevance=0))
    assert not found.hits
