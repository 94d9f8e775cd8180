"""What one MCP session may make the server keep, and what its errors quote back: an
`initialize` is kept for the session's life, a root is kept and opened on every call."""

from __future__ import annotations

import json
import logging
import subprocess
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
from mcp import Client

from octobrain.models import PATTERN_BYTES
from octobrain.server import build_server
from octobrain.server.wire import MAX_INITIALIZE_BYTES, MAX_INITIALIZE_VALUES, REFUSALS_LOGGED
from tests.server_support import (
    PROJECT_A,
    advertise_session,
    call,
    free_port,
    hash_pool,
    http_server,
    initialize_message,
    octobrain_cmd,
    run,
    server_env,
    workspace,
)

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _initialize(experimental: dict[str, Any]) -> bytes:
    return json.dumps(initialize_message({"experimental": experimental})).encode()


def test_an_initialize_a_session_would_keep_past_its_bound_is_refused_over_http(
    tmp_path: Path,
) -> None:
    # The SDK keeps each session's initialize params: 1 MiB of small objects held 19.5 MB a
    # session, and HTTP keeps up to mcp.max_sessions (1,000) of them (20 GB).
    many = _initialize({f"k{i}": {} for i in range(MAX_INITIALIZE_VALUES)})
    large = _initialize({"x": {"pad": "p" * MAX_INITIALIZE_BYTES}})
    port = free_port()
    with (
        http_server(tmp_path / "data", f"127.0.0.1:{port}", tmp_path),
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http,
    ):
        for body, said in [
            (many, f"over {MAX_INITIALIZE_VALUES:,} values"),
            (large, f"{len(large):,} bytes"),
        ]:
            r = http.post("/mcp", content=body, headers=HEADERS)
            error = r.json()["error"]
            assert r.status_code == 400 and r.json()["id"] == 1, r.text
            assert error["code"] == -32600 and error["message"].startswith("initialize: "), r.text
            assert said in error["message"], error["message"]
            assert "mcp-session-id" not in r.headers  # no session was opened
        # An ordinary client still connects (the SDK's initialize is a few dozen values).
        r = http.post(
            "/mcp", content=_initialize({"session": {"scope": PROJECT_A}}), headers=HEADERS
        )
        assert r.status_code == 200 and "mcp-session-id" in r.headers, r.text


def test_a_root_too_long_to_open_is_ignored_not_the_end_of_the_session(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    too_long = [
        "file:///home/someone" + "/a" * 3000,  # past PATH_MAX
        "file:///home/" + "b" * 300,  # a name past NAME_MAX
    ]

    async def roots(context: Any) -> types.ListRootsResult:
        uris = [*too_long, project.as_uri()]
        return types.ListRootsResult(roots=[types.Root(uri=u) for u in uris])  # type: ignore[arg-type]

    server = build_server(hash_pool(tmp_path / "db"), workspace(project))

    async def body() -> None:
        async with Client(server, mode="legacy", list_roots_callback=roots) as c:
            # Before: every call "internal error (OSError: [Errno 36] File name too long:
            # '/home/someone/a/a/a…')", the whole 6 kB path quoted back, tools/list failing too.
            assert {t.name for t in (await c.list_tools()).tools} >= {"memorize", "remember"}
            error, reply = await call(c, "memorize", title="Plain fact", content="x" * 20)
            assert not error, reply
            error, reply = await call(c, "remember", query="plain fact", min_relevance=0)
            assert not error and "Plain fact" in reply, reply

    run(body)


def test_an_unforeseen_error_quotes_what_it_carries_cut_to_one_line(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # An error octobrain did not foresee is answered as itself: its text may hold what the
    # client sent (a path of kilobytes, escapes), which was quoted back whole.
    import octobrain.server.app as app

    def fails(brain: Any, arguments: dict[str, Any]) -> Any:
        raise OSError(36, "File name too long", "/home/x" + "/a\x1b]0;title\x07" * 2000)

    monkeypatch.setitem(app._BRAIN_TOOLS, "remember", fails)
    server = build_server(hash_pool(tmp_path / "db"), workspace(tmp_path, PROJECT_A))

    async def body() -> None:
        async with Client(server, mode="legacy") as c:
            error, reply = await call(c, "remember", query="anything")
            assert error and reply.startswith("internal error (OSError: [Errno 36] File name")
            assert len(reply) < 1_200 and "characters cut" in reply, reply
            assert "\x1b" not in reply and "\n" not in reply, reply

    run(body)


def test_a_stdio_client_sending_garbage_gets_every_answer_and_a_few_log_lines(
    tmp_path: Path,
) -> None:
    # Each refused line was a log line (in the resident service's log file when it hosts the
    # session): 2 bytes in, 72 bytes of log out, as long as the client liked.
    sent = 1_000
    done = subprocess.run(
        octobrain_cmd("mcp"),
        input=json.dumps(initialize_message()).encode() + b"\n" + b"x\n" * sent,
        env=server_env(tmp_path / "data"),
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
    )
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    # (the initialize answer among the first: a refusal may be written while it is made)
    initialized = [a for a in answers if a["id"] == 1]
    assert len(initialized) == 1 and "result" in initialized[0]
    assert answers.index(initialized[0]) < 5
    refused = [a["error"]["code"] for a in answers if a["id"] is None]
    assert refused == [-32700] * sent and len(answers) == sent + 1
    logged = done.stderr.decode().count("refused a message")
    assert logged <= 2 * REFUSALS_LOGGED, done.stderr.decode()[-500:]
    assert "more are counted, not logged" in done.stderr.decode()


def test_a_match_pattern_is_bounded_before_it_is_parsed(tmp_path: Path) -> None:
    # The regex parser holds ~300 bytes for each byte of a character class: `[aaa…]` of
    # 900 kB (within the 1 MiB message) peaked at 291 MB for one call.
    server = build_server(hash_pool(tmp_path / "db"), workspace(tmp_path, PROJECT_A))
    note = {"command": "store", "key": "plan", "content": "alpha beta gamma"}

    async def body() -> None:
        async with Client(server, mode="legacy") as c:
            assert not (await call(c, "knowledge", **note))[0]
            widest = "[" + "a" * (PATTERN_BYTES - 8) + "lph]pha"
            error, reply = await call(c, "knowledge", command="match", pattern=widest)
            assert not error and "alpha beta gamma" in reply, reply
            error, reply = await call(c, "knowledge", command="match", pattern=widest + "a")
            assert error and reply == (
                f"pattern: must be at most {PATTERN_BYTES:,} bytes of UTF-8, "
                f"got {PATTERN_BYTES + 1:,}"
            ), reply

    run(body)


def test_warnings_a_client_can_repeat_at_each_call_are_a_few_lines(
    tmp_path: Path, monkeypatch: Any, caplog: Any
) -> None:
    # A malformed session capability was a log line at every tools/list, and each refused
    # root one at every session (a 2026-07-28 client sends its roots with every call): as
    # many lines as a client liked, in the resident service's log file when it hosts them.
    from octobrain.server.scoping import lock_from_roots

    advertise_session(monkeypatch, {"scope": 5})
    server = build_server(hash_pool(tmp_path / "db"), workspace(tmp_path))

    async def body() -> None:
        async with Client(server, mode="legacy") as c:
            for _ in range(30):
                assert (await c.list_tools()).tools

    with caplog.at_level(logging.WARNING):
        run(body)
        for _ in range(30):
            lock_from_roots(["file:///", "file:///etc", "file:///" + "b" * 300])
    said = [r.getMessage() for r in caplog.records]
    assert sum("session capability" in m for m in said) <= 4, said
    assert sum("is not read from" in m for m in said) <= 4, said
