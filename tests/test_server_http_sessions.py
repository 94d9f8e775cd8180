"""`octobrain mcp` over streamable HTTP in a subprocess: sessions share brains but not notes, the
origin and a token are checked, slow and idle connections and sessions make room."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import anyio
import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from tests.server_support import (
    PROJECT_A,
    call,
    free_port,
    http_server,
    initialize_message,
    refused_start,
    run,
)
from tests.server_transports_support import FACT, open_session

TOKEN = "s3cret-token-0123456789"


def test_http_loopback_shares_brains_across_sessions_and_checks_origin(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with http_server(tmp_path / "data", f"127.0.0.1:{port}", tmp_path) as proc:
        assert proc.stderr is not None
        os.set_blocking(proc.stderr.fileno(), False)
        # The port accepts connections from `listen`, before the banner is logged: wait for it.
        banner, deadline = "", time.monotonic() + 20
        while f"on {url}" not in banner and time.monotonic() < deadline:
            banner += (proc.stderr.read() or b"").decode()
            time.sleep(0.05)
        # Where it listens is information, shown without -v, and not dressed up as a warning.
        assert f"octobrain INFO octobrain.server.http: octobrain MCP server on {url}" in banner
        assert "WARNING" not in banner

        async def body() -> None:
            async with Client(url) as first:  # 2026-07-28 (discover) session
                error, reply = await call(first, "memorize", **FACT, scope=PROJECT_A)
                assert not error, reply
            async with Client(url, mode="legacy") as second:  # handshake session
                error, reply = await call(second, "remember", query="release", scope=PROJECT_A)
                assert not error and "Release process" in reply

        run(body)
        body_json = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        evil = httpx.post(url, json=body_json, headers={"Origin": "http://evil.example"})
        assert evil.status_code == 403
        assert "access-control-allow-origin" not in evil.headers
        rebinding = httpx.post(url, json=body_json, headers={"Host": "evil.example"})
        assert rebinding.status_code == 421


def test_http_clients_do_not_share_session_notes(tmp_path: Path) -> None:
    # Every HTTP client that named no session shared the server's one default: a note
    # "for this session" was read and deleted by an unrelated client.
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    note = {"command": "store", "key": "handoff", "content": "Rotate the staging keys."}
    read = {"command": "read", "source": "stored://handoff"}
    with http_server(tmp_path / "data", f"127.0.0.1:{port}", tmp_path):

        async def body() -> None:
            async with Client(url, mode="legacy") as first:
                error, reply = await call(first, "knowledge", **note, scope=PROJECT_A)
                assert not error, reply
                async with Client(url, mode="legacy") as second:
                    error, reply = await call(second, "knowledge", **read, scope=PROJECT_A)
                    assert error and reply == 'source: no stored note "handoff" in this session'
                error, reply = await call(first, "knowledge", **read, scope=PROJECT_A)
                assert not error and "Rotate the staging keys." in reply
            async with Client(url) as stateless:  # 2026-07-28: no MCP session to keep notes in
                error, reply = await call(stateless, "knowledge", **note, scope=PROJECT_A)
                assert error and reply.startswith("session_id: session notes need a session")
                error, reply = await call(stateless, "knowledge", **read, scope=PROJECT_A)
                assert error and reply.startswith("source: no stored note")

        run(body)


def test_non_loopback_bind_needs_a_token(tmp_path: Path) -> None:
    port = free_port()
    stderr = refused_start(tmp_path, "--bind", f"0.0.0.0:{port}")
    assert stderr.startswith('error: --token: required to bind "0.0.0.0"')

    url = f"http://127.0.0.1:{port}/mcp"
    with http_server(tmp_path / "data", f"0.0.0.0:{port}", tmp_path, OCTOBRAIN_TOKEN=TOKEN):
        body_json = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        assert httpx.post(url, json=body_json).status_code == 401
        wrong = httpx.post(url, json=body_json, headers={"Authorization": "Bearer wrong"})
        assert wrong.status_code == 401 and wrong.headers["www-authenticate"].startswith("Bearer")

        async def body() -> None:
            auth = {"Authorization": f"Bearer {TOKEN}"}
            async with (
                httpx2.AsyncClient(headers=auth, timeout=120) as http,  # a loaded CI box
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                error, reply = await call(client, "memorize", **FACT, scope=PROJECT_A)
                assert not error, reply

        run(body)


def test_http_closes_a_connection_whose_request_does_not_arrive_in_time(tmp_path: Path) -> None:
    # Before the token is even checked a client could open connections and never finish a
    # request: each one held, with its file descriptor, for as long as it liked.
    import socket
    import time

    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    env = {"OCTOBRAIN_MCP_REQUEST_SECONDS": "2"}
    with http_server(tmp_path / "data", f"127.0.0.1:{port}", tmp_path, **env):
        head = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        half_headers = head.encode()
        half_body = (
            head + "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
        ).encode()
        for partial in (b"", half_headers, half_body):
            with socket.create_connection(("127.0.0.1", port), timeout=15) as conn:
                conn.sendall(partial)
                started = time.monotonic()
                assert conn.recv(1024) == b""  # closed by the server, not answered
                assert time.monotonic() - started < 10

        async def body() -> None:  # a client that takes its time between calls is unaffected
            async with Client(url) as client:
                error, reply = await call(client, "memorize", **FACT, scope=PROJECT_A)
                assert not error, reply
                await anyio.sleep(3)
                error, reply = await call(client, "remember", query="release", scope=PROJECT_A)
                assert not error and "Release process" in reply

        run(body)


def test_http_sessions_left_open_make_room_instead_of_locking_clients_out(tmp_path: Path) -> None:
    # The SDK refused new sessions past 10,000 open ones, for the 30 minutes they took to
    # expire: one local client that opened them and left locked every other client out.
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    headers = {"Accept": "application/json, text/event-stream"}
    initialize = initialize_message()
    with http_server(
        tmp_path / "data", f"127.0.0.1:{port}", tmp_path, OCTOBRAIN_MCP_MAX_SESSIONS="3"
    ):
        opened = []
        # With the protocol version named too (as some clients send it), the cap was passed by.
        version = {"mcp-protocol-version": LATEST_HANDSHAKE_VERSION}
        for _ in range(8):
            answer = httpx.post(url, json=initialize, headers={**headers, **version}, timeout=30)
            assert answer.status_code == 200, answer.text
            opened.append(answer.headers["mcp-session-id"])

        def status(session: str) -> int:
            listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
            extra = {"mcp-session-id": session, "mcp-protocol-version": LATEST_HANDSHAKE_VERSION}
            return httpx.post(
                url, json=listing, headers={**headers, **extra}, timeout=30
            ).status_code

        deadline = time.monotonic() + 10
        while status(opened[0]) != 404 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert status(opened[0]) == 404  # the longest idle made room, as an idle timeout would
        assert status(opened[-1]) == 200

        async def body() -> None:
            async with Client(url, mode="legacy") as client:
                error, reply = await call(client, "memorize", **FACT, scope=PROJECT_A)
                assert not error, reply

        run(body)


def test_http_sessions_holding_only_an_event_stream_make_room(tmp_path: Path) -> None:
    # A GET stream left open kept its session from the idle timeout and from the cap's choice:
    # max_sessions of them locked every new handshake-era client out as long as they were held.
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    headers = {"Accept": "application/json, text/event-stream"}
    with http_server(
        tmp_path / "data", f"127.0.0.1:{port}", tmp_path, OCTOBRAIN_MCP_MAX_SESSIONS="3"
    ):

        async def body() -> None:
            sessions = [open_session(url, headers) for _ in range(3)]
            async with httpx.AsyncClient(timeout=30) as held, contextlib.AsyncExitStack() as open_:
                for session in sessions:
                    stream = {**session, "Accept": "text/event-stream"}
                    answer = await open_.enter_async_context(
                        held.stream("GET", url, headers=stream)
                    )
                    assert answer.status_code == 200
                async with Client(url, mode="legacy") as client:
                    error, reply = await call(client, "memorize", **FACT, scope=PROJECT_A)
                    assert not error, reply

        run(body)
