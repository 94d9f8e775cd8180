"""Real transports: `octobrain mcp` over stdio and over streamable HTTP, in subprocesses."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from tests.server_support import (
    PROJECT_A,
    advertise_session,
    call,
    free_port,
    http_server,
    initialize_message,
    memory_id,
    octobrain_cmd,
    refused_start,
    run,
    server_env,
)
from tests.test_scope import make_repo

TOKEN = "s3cret-token-0123456789"
FACT = {
    "title": "Release process",
    "content": "Releases are cut from main by tagging vX.Y.Z; CI publishes the wheels.",
}


def _stdio(data_dir: Path, cwd: Path, model: str = "hash:64") -> StdioServerParameters:
    cmd = octobrain_cmd("mcp")
    return StdioServerParameters(
        command=cmd[0], args=cmd[1:], env=server_env(data_dir, model), cwd=cwd
    )


def test_stdio_stdout_is_only_json_rpc(tmp_path: Path) -> None:
    messages = [
        initialize_message({"experimental": {"session": {"scope": PROJECT_A}}}),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "memorize", "arguments": FACT},
        },
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "remember", "arguments": {"query": "how are releases cut"}},
        },
        {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/call",
            "params": {"name": "memorize", "arguments": {"title": "x"}},
        },
    ]
    proc = subprocess.Popen(
        octobrain_cmd("mcp"),
        env=server_env(tmp_path / "data"),
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    responses = {}
    for message in messages:
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()
        if "id" in message:  # one request at a time, so every reply line is read in order
            line = proc.stdout.readline()
            parsed = json.loads(line)  # every stdout line parses as JSON-RPC
            assert parsed["jsonrpc"] == "2.0" and parsed["id"] == message["id"], line
            responses[parsed["id"]] = parsed
    proc.stdin.close()  # EOF: the server exits
    assert proc.wait(timeout=30) == 0
    rest = proc.stdout.read()
    proc.stdout.close()
    assert proc.stderr is not None
    proc.stderr.close()
    for line in rest.decode().splitlines():
        assert json.loads(line)["jsonrpc"] == "2.0", line

    assert responses[1]["result"]["serverInfo"]["name"] == "octobrain"
    assert [t["name"] for t in responses[2]["result"]["tools"]] == [
        "memorize",
        "remember",
        "forget",
        "knowledge",
        "ingest",
    ]
    assert responses[3]["result"]["isError"] is False
    assert "Release process" in responses[4]["result"]["content"][0]["text"]
    assert responses[5]["result"]["isError"] is True
    assert responses[5]["result"]["content"][0]["text"].startswith("content: required")


def test_memories_persist_across_two_stdio_server_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    advertise_session(monkeypatch, {"scope": PROJECT_A})

    async def body() -> None:
        async with Client(_stdio(tmp_path / "data", tmp_path)) as client:
            error, reply = await call(client, "memorize", **FACT)
            assert not error, reply
            stored = memory_id(reply)
        async with Client(_stdio(tmp_path / "data", tmp_path)) as client:
            error, reply = await call(client, "remember", query=["release tagging", "wheels"])
            assert not error and stored in reply

    run(body)


def test_a_damaged_store_is_named_by_the_briefing_as_by_the_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The briefing (resource and prompt) said only "Internal server error" where a tool call
    # names the damaged table and `octobrain doctor`.
    advertise_session(monkeypatch, {"scope": PROJECT_A})

    async def body() -> None:
        async with Client(_stdio(tmp_path / "data", tmp_path)) as client:
            error, reply = await call(client, "memorize", **FACT)
            assert not error, reply
        for data in (tmp_path / "data" / "db" / "memories.lance" / "data").glob("*.lance"):
            data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
        async with Client(_stdio(tmp_path / "data", tmp_path)) as client:
            error, reply = await call(client, "remember", query=["release tagging"])
            assert error and "octobrain doctor" in reply, reply
            # The table and its file, as `memorize` names them ("a table cannot be read
            # (… failed to fill whole buffer)" named neither).
            assert "table 'memories'" in reply and "not the" in reply, reply
            for read in (
                lambda: client.read_resource("octobrain://brief"),
                lambda: client.get_prompt("brief"),
            ):
                with pytest.raises(MCPError) as failed:
                    await read()
                assert "octobrain doctor" in str(failed.value), failed.value

    run(body)


def test_a_malformed_session_capability_is_invalid_params_for_the_briefing_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The briefing read the capability outside its error handling: JSON-RPC error code 0
    # ("role: must be a string" as a server failure) where every tool names the field.
    advertise_session(monkeypatch, {"scope": PROJECT_A, "role": 5})
    rule = "experimental.session.role: must be a string"

    async def body() -> None:
        async with Client(_stdio(tmp_path / "data", tmp_path)) as client:
            error, reply = await call(client, "remember", query="release tagging")
            assert error and reply.startswith(rule), reply
            for read in (
                lambda: client.read_resource("octobrain://brief"),
                lambda: client.get_prompt("brief"),
            ):
                with pytest.raises(MCPError) as refused:
                    await read()
                assert refused.value.error.code == types.INVALID_PARAMS, refused.value.error
                assert str(refused.value).startswith(rule), refused.value

    run(body)


def test_a_call_too_large_as_json_is_answered_to_its_client_not_left_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 500 turns of quotes: within ingest's 1,000 kB of text, twice the 1 MiB cap once JSON
    # escapes them. It was refused with id null, which the client never matched to its call.
    advertise_session(monkeypatch, {"scope": PROJECT_A})
    turns = [{"speaker": "Ann", "text": '"' * 1990} for _ in range(500)]

    async def body() -> None:
        async with Client(_stdio(tmp_path / "data", tmp_path)) as client:
            with anyio.fail_after(60), pytest.raises(MCPError) as refused:
                await client.call_tool("ingest", {"conversation": "quotes", "turns": turns})
            assert "over 1,048,576 bytes as JSON" in str(refused.value)
            error, reply = await call(client, "memorize", **FACT)  # the session goes on
            assert not error, reply

    run(body)


@pytest.mark.slow
def test_stdio_with_the_real_default_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    advertise_session(monkeypatch, {"scope": PROJECT_A})

    async def body() -> None:
        async with Client(_stdio(tmp_path / "data", tmp_path, model="minilm")) as client:
            await call(client, "memorize", **FACT)
            await call(
                client,
                "memorize",
                title="Database choice",
                content="Postgres 16 is the primary database; Redis only caches sessions.",
            )
            error, reply = await call(client, "remember", query="how do we publish a new version")
            first_result = reply.split("\n\n")[1]
            assert not error and "Release process" in first_result, reply

    run(body)


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


def test_a_client_that_never_reads_its_answers_is_not_read_past_the_in_flight_cap() -> None:
    # Each request read becomes a task holding its answer until the client reads it: one that
    # writes without reading would make the server (or the shared service) hold them all.
    import io

    import anyio

    from octobrain.server.counted import CountedWrites
    from octobrain.server.wire import MAX_IN_FLIGHT, CappedStdin

    requests = b"".join(
        b'{"jsonrpc":"2.0","id":%d,"method":"tools/list"}\n' % i for i in range(100)
    )
    notes = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n' * 3
    stdin = CappedStdin(io.BytesIO(notes + requests), on_end=lambda: None)

    class Sent:
        async def send(self, item: object) -> None:
            pass

    class Answer:  # what the server sends back: an id, no method
        def __init__(self, request_id: int) -> None:
            self.message = type("Response", (), {"id": request_id})()

    read: list[str] = []

    async def consume() -> None:  # as the SDK's reader does
        async for line in stdin:
            read.append(line)

    async def body() -> tuple[int, int]:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(consume)
            await anyio.sleep(1.0)
            before = len(read)
            writes = CountedWrites(Sent(), stdin)
            for i in range(5):
                await writes.send(Answer(i))
            await anyio.sleep(1.0)
            tasks.cancel_scope.cancel()
        return before, len(read)

    before, after = anyio.run(body)
    assert (before, after) == (3 + MAX_IN_FLIGHT, 3 + MAX_IN_FLIGHT + 5)  # notes need no answer


def _read_through(data: bytes) -> tuple[list[str], list[dict[str, Any]]]:
    """The lines stdio input `data` passes on to the SDK, and the error answers it refuses."""
    import io

    import anyio

    from octobrain.server.wire import CappedStdin

    stdin = CappedStdin(io.BytesIO(data), on_end=lambda: None)
    refused: list[dict[str, Any]] = []

    async def refuse(answer: dict[str, Any]) -> None:
        refused.append(answer)

    stdin.refuse = refuse

    async def body() -> list[str]:
        return [line async for line in stdin]

    return anyio.run(body), refused


def test_a_request_reusing_the_id_of_one_in_flight_is_refused() -> None:
    # Passed on, the second took the first's place: a cancel of that id reached neither (the
    # first ran on, its answer still sent), and the in-flight cap counted the two as one.
    lines = [
        b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
        b'{"jsonrpc":"2.0","id":"1","method":"ping"}',  # the same id to the SDK
        b'{"jsonrpc":"2.0","id":2,"method":"ping"}',
    ]
    passed, refused = _read_through(b"\n".join(lines) + b"\n")
    assert [json.loads(line)["id"] for line in passed] == [1, 2]
    assert [(a["id"], a["error"]["code"]) for a in refused] == [("1", -32600)]
    assert "still being answered" in refused[0]["error"]["message"]


def test_a_stdio_message_of_exactly_the_cap_is_read() -> None:
    # The cap is on the message: its line ending was counted too, so a message of exactly
    # 1 MiB was refused over stdio "over 1,048,576 bytes" (HTTP read it).
    from octobrain.server.wire import MAX_MESSAGE_BYTES

    def ping(request_id: int, size: int) -> bytes:
        start = b'{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"_meta":{"pad":"' % request_id
        end = b'"}}}'
        return start + b"x" * (size - len(start) - len(end)) + end

    data = (
        ping(1, MAX_MESSAGE_BYTES)
        + b"\n"
        + ping(2, MAX_MESSAGE_BYTES)
        + b"\r\n"
        + ping(3, MAX_MESSAGE_BYTES + 1)
        + b"\n"
    )
    passed, refused = _read_through(data)
    assert [json.loads(line)["id"] for line in passed] == [1, 2]
    assert [(a["id"], a["error"]["code"]) for a in refused] == [(3, -32600)]


@contextlib.contextmanager
def raw_stdio(tmp_path: Path) -> Iterator[tuple[Callable[[str], None], Callable[[], Any]]]:
    """An in-process `octobrain mcp` over stdio driven line by line: (send a line, read the
    next answer). Lines read from the pipe wait here for their turn, not in a buffered reader
    that `select` cannot see; the server is killed at the end."""
    import select

    proc = subprocess.Popen(
        octobrain_cmd("mcp"),
        cwd=tmp_path,
        env=server_env(tmp_path / "data", OCTOBRAIN_SERVICE_ENABLED="0"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout
    pending = bytearray()  # read from the pipe, not yet a whole line

    def send(line: str) -> None:
        stdin.write(line.encode() + b"\n")
        stdin.flush()

    def answer() -> Any:
        while b"\n" not in pending:
            ready, _, _ = select.select([stdout], [], [], 60)
            assert ready, "no answer within 60 s"
            chunk = os.read(stdout.fileno(), 1 << 16)
            assert chunk, "the server closed its stdout"
            pending.extend(chunk)
        line, _, rest = bytes(pending).partition(b"\n")
        pending[:] = rest
        return json.loads(line)

    try:
        yield send, answer
    finally:
        proc.kill()
        proc.communicate()


def test_messages_the_sdk_cannot_read_are_answered_and_never_stall_the_session(
    tmp_path: Path,
) -> None:
    # The SDK drops, without an answer, a message it cannot read (a lone surrogate, another
    # jsonrpc version) and takes one with an object id for a notification: each used to hold
    # a place among the requests in flight for good, and 32 of them silenced the session.
    from octobrain.server.wire import MAX_IN_FLIGHT

    with raw_stdio(tmp_path) as (send, answer):
        send(
            '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":'
            '"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}'
        )
        assert "result" in answer()
        send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
        call = '"method":"tools/call","params":{"name":"knowledge","arguments":{"command":"read"'
        bad = [
            '{"jsonrpc":"2.0","id":%d,' + call + ',"source":"\\udcff.md"}}}',
            '{"jsonrpc":"1.0","id":%d,"method":"ping"}',
            '{"jsonrpc":"2.0","id":{"n":%d},"method":"ping"}',
        ]
        for i in range(MAX_IN_FLIGHT + 8):
            send(bad[i % 3] % (i + 1))
        send('{"jsonrpc":"2.0","id":"last","method":"ping"}')
        answers = [answer() for _ in range(MAX_IN_FLIGHT + 9)]
    assert answers[-1] == {"jsonrpc": "2.0", "id": "last", "result": {}}
    refused = answers[:-1]
    assert all(a["error"]["code"] == -32600 for a in refused)
    expected = [i + 1 if i % 3 < 2 else None for i in range(MAX_IN_FLIGHT + 8)]
    assert [a["id"] for a in refused] == expected


def test_a_second_initialize_is_refused_and_the_first_scope_lock_holds(tmp_path: Path) -> None:
    # Before: the SDK took it, and its capability moved the session to the scope it named.
    def initialize(scope: str, request_id: int) -> str:
        caps = {"experimental": {"session": {"scope": scope}}}
        message = initialize_message(caps) | {"id": request_id}
        return json.dumps(message)

    with raw_stdio(tmp_path) as (send, answer):
        send(initialize("github.com/acme/api", 1))
        assert "result" in answer()
        send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
        send(initialize("evil/other", 2))
        refused = answer()
        assert refused["id"] == 2 and refused["error"]["code"] == -32600
        assert refused["error"]["message"].startswith("initialize: this connection is init")
        memo = {"title": "Lock check", "content": "Stored where the first initialize said."}
        params = {"name": "memorize", "arguments": memo}
        send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params}))
        stored = answer()["result"]["content"][0]["text"]
    assert "github.com/acme/api" in stored and "evil" not in stored


def test_a_request_before_initialize_is_told_to_initialize_first(tmp_path: Path) -> None:
    # Before: -32602 "Invalid request parameters", data "": nothing said what was wrong.
    with raw_stdio(tmp_path) as (send, answer):
        send('{"jsonrpc":"2.0","id":1,"method":"tools/list"}')
        refused = answer()
        assert refused["id"] == 1 and refused["error"]["code"] == -32602
        assert (
            "tools/list: this connection is not initialized yet; send `initialize`"
            in (refused["error"]["message"])
        )
        send(json.dumps(initialize_message() | {"id": 2}))
        assert "result" in answer()
        send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
        send('{"jsonrpc":"2.0","id":3,"method":"tools/list"}')
        assert "tools" in answer()["result"]


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


def _open_session(url: str, headers: dict[str, str]) -> dict[str, str]:
    """A handshake-era session opened over raw HTTP: the headers its requests carry."""
    version = {"mcp-protocol-version": LATEST_HANDSHAKE_VERSION}
    answer = httpx.post(url, json=initialize_message(), headers={**headers, **version}, timeout=30)
    assert answer.status_code == 200, answer.text
    session = {**headers, **version, "mcp-session-id": answer.headers["mcp-session-id"]}
    done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert httpx.post(url, json=done, headers=session, timeout=30).status_code == 202
    return session


def test_http_requests_past_the_in_flight_caps_are_refused_not_queued(tmp_path: Path) -> None:
    # Every waiting call held its parsed arguments: one client with 120 ingests of 500 turns at
    # once took the server to 1 GB and kept another client's memorize waiting over a minute.
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    headers = {"Accept": "application/json, text/event-stream"}
    turns = [{"speaker": "Ann", "text": f"Turn {i}: " + "words said " * 150} for i in range(500)]

    def ingest(request_id: int, name: str) -> dict[str, Any]:
        arguments = {"conversation": name, "turns": turns, "scope": PROJECT_A}
        params = {"name": "ingest", "arguments": arguments}
        return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}

    with http_server(  # one request per session (an eighth of 8)
        tmp_path / "data", f"127.0.0.1:{port}", tmp_path, OCTOBRAIN_MCP_MAX_IN_FLIGHT="8"
    ):
        busy, other = _open_session(url, headers), _open_session(url, headers)

        async def body() -> None:
            async with httpx.AsyncClient(timeout=120) as client:
                first = asyncio.ensure_future(client.post(url, json=ingest(7, "a"), headers=busy))
                await asyncio.sleep(0.3)  # the first is being answered (an ingest takes seconds)
                refused = await client.post(url, json=ingest(8, "b"), headers=busy)
                assert refused.status_code == 429, refused.text
                assert refused.headers["retry-after"] == "1"
                assert refused.json()["id"] == 8 and "send more as answers" in refused.text
                listing = {"jsonrpc": "2.0", "id": 9, "method": "tools/list"}
                served = await client.post(url, json=listing, headers=other)
                assert served.status_code == 200 and not first.done(), served.text
                assert (await first).status_code == 200
                again = await client.post(url, json=ingest(10, "b"), headers=busy)
                assert again.status_code == 200 and '"isError":false' in again.text, again.text

        asyncio.run(body())


def test_http_a_request_reusing_the_id_of_one_in_flight_is_refused(tmp_path: Path) -> None:
    # The SDK matched answers to the id: the first call's answer never came, its stream held
    # open with keep-alives, and no longer counted against the session's cap.
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    headers = {"Accept": "application/json, text/event-stream"}
    turns = [{"speaker": "Ann", "text": f"Turn {i}: " + "words said " * 150} for i in range(500)]
    arguments = {"conversation": "a", "turns": turns, "scope": PROJECT_A}
    slow = {"jsonrpc": "2.0", "id": 7, "method": "tools/call"}
    slow["params"] = {"name": "ingest", "arguments": arguments}

    with http_server(tmp_path / "data", f"127.0.0.1:{port}", tmp_path):
        session = _open_session(url, headers)

        async def body() -> None:
            async with httpx.AsyncClient(timeout=120) as client:
                first = asyncio.ensure_future(client.post(url, json=slow, headers=session))
                await asyncio.sleep(0.3)  # being answered (an ingest takes seconds)
                ping = {"jsonrpc": "2.0", "id": 7, "method": "ping"}
                refused = await client.post(url, json=ping, headers=session)
                assert refused.status_code == 400, refused.text
                assert refused.json()["id"] == 7 and refused.json()["error"]["code"] == -32600
                answered = await first
                assert answered.status_code == 200 and '"isError":false' in answered.text
                again = await client.post(url, json=ping, headers=session)  # free once answered
                assert again.status_code == 200, again.text

        asyncio.run(body())


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
            sessions = [_open_session(url, headers) for _ in range(3)]
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


def test_http_takes_a_clients_answers_and_cancels_when_its_calls_fill_the_session_cap(
    tmp_path: Path,
) -> None:
    # The per-session cap counted every POST, so the client's answer to the server's
    # `roots/list` (asked by the calls holding the places) got 429: each call waited out the
    # 5 s roots timeout, was refused "scope: required", and the session stayed unlocked by its
    # roots for good. A `notifications/cancelled` at the cap got 429 too.
    repo = make_repo(tmp_path / "web", "https://github.com/Acme/Web.git")

    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=repo.as_uri())])  # type: ignore[arg-type]

    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with http_server(  # one request per session (an eighth of 8)
        tmp_path / "data", f"127.0.0.1:{port}", tmp_path, OCTOBRAIN_MCP_MAX_IN_FLIGHT="8"
    ):

        async def body() -> None:
            async with Client(url, mode="legacy", list_roots_callback=roots) as client:
                for _ in range(2):  # the lock holds for the session's later calls
                    error, reply = await call(client, "memorize", **FACT)
                    assert not error and "Scope: github.com/acme/web" in reply, reply

        run(body)
        session = _open_session(url, {"Accept": "application/json, text/event-stream"})
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
        listing = {"jsonrpc": "2.0", "id": 8, "method": "tools/list"}

        async def at_the_cap() -> None:
            async with httpx.AsyncClient(timeout=60) as client:
                said = "words " * 300
                turns = [{"speaker": "Ann", "text": f"Turn {i}: {said}"} for i in range(500)]
                arguments = {"conversation": "long", "turns": turns, "scope": PROJECT_A}
                ingest = {
                    "jsonrpc": "2.0",
                    "id": 7,
                    "method": "tools/call",
                    "params": {"name": "ingest", "arguments": arguments},
                }
                first = asyncio.ensure_future(client.post(url, json=ingest, headers=session))
                await asyncio.sleep(0.3)  # the ingest is being answered (it takes seconds)
                refused = await client.post(url, json=listing, headers=session)
                assert refused.status_code == 429, refused.text  # a request still waits its turn
                taken = await client.post(url, json=cancel, headers=session)
                assert taken.status_code == 202, taken.text
                await first

        asyncio.run(at_the_cap())


def test_http_a_call_sent_on_the_answer_to_the_last_is_not_refused() -> None:
    # The SDK answers a call in an event stream that it closes a moment after the answer: the
    # call's place was freed only then, so a client that sent its next call on reading the
    # answer was refused 429 in between (the test above failed so under load). Here the
    # stream stays open until the next call has been answered.
    from octobrain.server.http import Guard

    done = asyncio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        message = json.loads((await receive())["body"])
        answer = {"jsonrpc": "2.0", "id": message["id"], "result": {}}
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        event = b"event: message\r\ndata: " + json.dumps(answer).encode() + b"\r\n\r\n"
        await send({"type": "http.response.body", "body": event, "more_body": True})
        if message["id"] == 1:
            await done.wait()
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    guard = Guard(app, token="", loopback=True, allowed_origins=(), max_in_flight=8)

    async def post(request_id: int, sent: list[dict[str, Any]]) -> None:
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/list"}).encode()
        headers = [(b"host", b"127.0.0.1"), (b"mcp-session-id", b"s1"),
                   (b"content-length", str(len(body)).encode())]  # fmt: skip
        scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers}
        messages = iter([{"type": "http.request", "body": body, "more_body": False}])

        async def receive() -> Any:
            return next(messages, {"type": "http.disconnect"})

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await guard(scope, receive, send)

    async def body() -> None:
        first: list[dict[str, Any]] = []
        second: list[dict[str, Any]] = []
        pending = asyncio.ensure_future(post(1, first))
        while not any(b'"id": 1' in m.get("body", b"") for m in first):
            await asyncio.sleep(0.01)
        await post(2, second)  # sent on the first call's answer, its stream still open
        done.set()
        await pending
        assert second[0]["status"] == 200, second
        assert guard._in_flight == 0

    asyncio.run(body())


def test_stdio_calls_the_client_cancelled_free_their_places_among_those_in_flight(
    tmp_path: Path,
) -> None:
    # The SDK never answers a request its client cancelled, and a place among the 32 in
    # flight was freed only by an answer: after 31 cancels the session read one request at a
    # time, so a call waiting on anything (here the client's roots) held up every other call,
    # and a cancel sent meanwhile was not even read.
    repo = make_repo(tmp_path / "web", "https://github.com/Acme/Web.git")
    asked = anyio.Event()
    release = anyio.Event()

    async def roots(context: Any) -> types.ListRootsResult:
        asked.set()
        await release.wait()
        return types.ListRootsResult(roots=[types.Root(uri=repo.as_uri())])  # type: ignore[arg-type]

    async def body() -> None:
        nonlocal asked
        params = _stdio(tmp_path / "data", tmp_path)
        async with Client(params, mode="legacy", list_roots_callback=roots) as client:
            with anyio.fail_after(60):
                for _ in range(32):  # each call waits on the roots, then is cancelled
                    asked = anyio.Event()
                    async with anyio.create_task_group() as tasks:
                        tasks.start_soon(client.call_tool, "remember", {"query": "release"})
                        await asked.wait()
                        tasks.cancel_scope.cancel()
                asked = anyio.Event()
                waiting: list[tuple[bool, str]] = []

                async def remember() -> None:
                    waiting.append(await call(client, "remember", query="release"))
                    asked.set()  # (when it was answered without asking)

                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(remember)
                    await asked.wait()  # this call waits on the roots...
                    await client.list_prompts()  # ...and another is answered meanwhile
                    answered_first = not waiting
                    release.set()
                assert answered_first
                error, reply = waiting[0]
                assert not error and "github.com/acme/web" in reply, reply

    run(body)


def test_a_number_past_a_floats_range_is_a_field_error_not_an_internal_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # JSON integers have no bound: 10**400 as an importance, a link's strength or a
    # min_relevance was `internal error (OverflowError: int too large to convert to float)`.
    advertise_session(monkeypatch, {"scope": PROJECT_A})
    huge = 10**400

    async def body() -> None:
        async with Client(_stdio(tmp_path / "data", tmp_path)) as client:
            error, reply = await call(client, "memorize", **FACT)
            assert not error, reply
            stored = memory_id(reply)
            for tool, arguments, field in (
                ("memorize", {**FACT, "importance": huge}, "importance"),
                ("memorize", {**FACT, "importance": -huge}, "importance"),
                (
                    "memorize",
                    {**FACT, "related_to": [{"target_id": stored, "strength": huge}]},
                    "related_to[0].strength",
                ),
                ("remember", {"query": "release", "min_relevance": huge}, "min_relevance"),
            ):
                error, reply = await call(client, tool, **arguments)
                assert error and reply.startswith(f"{field}: must be a number in [0, 1]"), reply
            error, reply = await call(client, "memorize", **FACT, importance=1)
            assert not error and "Importance: 1.00" in reply, reply

    run(body)


def test_a_call_holding_an_integer_too_long_to_read_is_answered_to_its_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Valid JSON, but Python reads at most 4,300 digits: the line was refused as "not JSON"
    # with id null, which the client never matched to its call, and it waited for good.
    advertise_session(monkeypatch, {"scope": PROJECT_A})

    async def body() -> None:
        async with Client(_stdio(tmp_path / "data", tmp_path)) as client:
            with anyio.fail_after(60), pytest.raises(MCPError) as refused:
                await client.call_tool("memorize", {**FACT, "importance": 10**5000})
            assert "an integer of 5,001 digits, over 4,300" in str(refused.value)
            error, reply = await call(client, "memorize", **FACT)  # the session goes on
            assert not error, reply

    run(body)


def test_params_the_sdk_refuses_are_answered_naming_the_field(tmp_path: Path) -> None:
    # The SDK answered these "Invalid request parameters", naming nothing: a prompt argument
    # sent as a number (MCP's are strings) could not be told from a wrong prompt name.
    calls = [
        ("prompts/get", {"name": "brief", "arguments": {"max_tokens": 500}}),
        ("tools/call", {"name": "remember", "arguments": ["deploy freeze"]}),
        ("tools/call", {"name": ["remember"], "arguments": {}}),
        ("tools/call", {"arguments": {}}),
    ]
    answers: dict[object, dict[str, Any]] = {}
    with raw_stdio(tmp_path) as (send, answer):
        send(json.dumps(initialize_message()))
        send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
        for i, (method, params) in enumerate(calls, 2):
            send(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}))
        send('{"jsonrpc":"2.0","id":"last","method":"ping"}')
        while "last" not in answers:
            got = answer()
            answers[got["id"]] = got
    assert answers["last"]["result"] == {}  # the session went on
    assert [answers[i]["error"] for i in range(2, 6)] == [
        {"code": -32602, "message": "params.arguments.max_tokens: Input should be a valid string"},
        {"code": -32602, "message": "params.arguments: Input should be a valid dictionary"},
        {"code": -32602, "message": "params.name: Input should be a valid string"},
        {"code": -32602, "message": "params.name: Field required"},
    ]


def test_only_a_request_s_own_params_are_answered_as_the_client_s_mistake() -> None:
    # A model the server itself built wrongly (a bug) was answered -32602 "params.…", as if
    # the client had sent it.
    import mcp_types
    from mcp.shared.exceptions import MCPError
    from pydantic import ValidationError

    from octobrain.server.wire import INVALID_PARAMS, named_params

    async def server_bug(_ctx: Any) -> Any:
        return mcp_types.TextContent.model_validate({"type": "text", "text": 7})

    async def client_params(_ctx: Any) -> Any:
        return mcp_types.CallToolRequestParams.model_validate({"name": "x", "arguments": ["x"]})

    with pytest.raises(ValidationError):
        asyncio.run(named_params(None, server_bug))
    with pytest.raises(MCPError) as refused:
        asyncio.run(named_params(None, client_params))
    assert refused.value.error.code == INVALID_PARAMS
    assert refused.value.error.message == "params.arguments: Input should be a valid dictionary"
