"""Connections to `octobrain mcp --bind`: how many may be open at once, and how long an answer
its client does not read is held."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import socket
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
import uvicorn
from mcp import Client

from octobrain.server.connections import deadline_protocol
from tests.server_support import (
    PROJECT_A,
    call,
    free_port,
    http_server,
    initialize_message,
    run,
)
from tests.server_transports_support import open_session

FACT = {"title": "Release process", "content": "Releases are cut from main by tagging vX.Y.Z."}


def _half_sent(port: int) -> socket.socket:
    """A connection that starts a request's headers and never ends them."""
    conn = socket.create_connection(("127.0.0.1", port), timeout=20)
    conn.sendall(f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode())
    return conn


def test_connections_that_send_no_request_cannot_take_every_descriptor(tmp_path: Path) -> None:
    # 19,000 half-sent requests from one local process took the server to 19,016 of its
    # 20,000 descriptors: past its limit no client could connect (each waited in the listen
    # queue until the request deadline, 30 s, closed the others) and the store could not
    # open its files. Here the server may open 1,024, so at most 640 connections are open.
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    flood: list[socket.socket] = []
    with http_server(tmp_path / "data", f"127.0.0.1:{port}", tmp_path, open_files=1024) as proc:
        try:
            for _ in range(1200):
                flood.append(_half_sent(port))

            async def body() -> None:
                with anyio.fail_after(15):  # (the request deadline is 30 s)
                    async with Client(url, mode="legacy") as client:
                        error, reply = await call(client, "memorize", **FACT, scope=PROJECT_A)
                        assert not error, reply
                        error, reply = await call(
                            client, "remember", query="how are releases cut", scope=PROJECT_A
                        )
                        assert not error and "Release process" in reply, reply

            run(body)
            held = len(os.listdir(f"/proc/{proc.pid}/fd"))
            assert held < 1024 - 128, held  # descriptors left for the store and the model
        finally:
            for conn in flood:
                conn.close()
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    said = [line for line in err.decode().splitlines() if "closed to make room" in line]
    assert len(said) == 1 and "at most 640 are open at once" in said[0], said


def test_an_answer_its_client_does_not_read_is_dropped_and_its_connection_closed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # uvicorn waits for a client that reads nothing as long as it stays connected: the
    # answer's task, its unsent bytes and the connection were held, and a connection being
    # answered is never closed to make room, so clients reading none of their answers
    # held every connection the server may open.
    ended = threading.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:  # a long answer, 32 MB
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for _ in range(32):
            await send({"type": "http.response.body", "body": b"x" * (1 << 20), "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        ended.set()

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    # (a request's own deadline, `mcp.request_seconds`, is another setting: 30 s here)
    http = deadline_protocol(30.0, unread=0.5)
    config = uvicorn.Config(app, log_level="warning", lifespan="off", http=http)
    server = uvicorn.Server(config)
    serving = threading.Thread(target=server.run, kwargs={"sockets": [listener]})
    serving.start()
    reader = socket.socket()
    reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        with caplog.at_level(logging.WARNING, "octobrain.server.connections"):
            reader.connect(("127.0.0.1", port))
            reader.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
            assert ended.wait(60)  # the answer's task ended: the client read none of it
        said = [r.getMessage() for r in caplog.records if "was dropped" in r.getMessage()]
        assert len(said) == 1 and "left it unread for 0.5 s (mcp.unread_seconds)" in said[0], said
    finally:
        reader.close()
        server.should_exit = True
        serving.join(30)


def test_the_server_drops_an_unread_answer_after_its_own_setting(tmp_path: Path) -> None:
    # `mcp.unread_seconds` (0.5 here) apart from `mcp.request_seconds` (30): the unread answer
    # was held for the request's deadline, the one setting for both.
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    accept = {"Accept": "application/json, text/event-stream"}
    env = {"OCTOBRAIN_MCP_UNREAD_SECONDS": "0.5"}
    with (
        http_server(tmp_path / "data", f"127.0.0.1:{port}", tmp_path, **env) as proc,
        socket.socket() as reader,
    ):
        headers = {**open_session(url, accept), "Content-Type": "application/json"}
        body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        request = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{head}"
        request += f"Content-Length: {len(body)}\r\n\r\n{body}"
        reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        reader.connect(("127.0.0.1", port))
        reader.settimeout(20)
        with contextlib.suppress(OSError):  # (closed once an answer is dropped)
            for _ in range(400):  # pipelined, and none of the answers read
                reader.sendall(request.encode())
        assert proc.stderr is not None
        logged = b""
        while b"unread for" not in logged:
            assert select.select([proc.stderr], [], [], 20)[0], logged
            logged += os.read(proc.stderr.fileno(), 1 << 16)
        assert b"its client left it unread for 0.5 s (mcp.unread_seconds)" in logged, logged


def _answer_to_headers(port: int, filler: int, piece: int) -> bytes:
    """The server's answer to an `initialize` POST whose headers hold one header of `filler`
    bytes, sent `piece` bytes at a time."""
    body = json.dumps(initialize_message()).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Filler: {'a' * filler}\r\n"
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    request = head.encode() + body
    answer = b""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as conn:
        with contextlib.suppress(OSError):  # (closed once the refusal is sent)
            for at in range(0, len(request), piece):
                conn.sendall(request[at : at + piece])
        with contextlib.suppress(OSError):
            while chunk := conn.recv(1 << 16):
                answer += chunk
    return answer


def test_headers_past_16_kib_get_431_naming_the_rule_however_they_arrive(tmp_path: Path) -> None:
    # h11 measures a request's headers only while they are incomplete: 60 KB of them sent in
    # one write were taken whole, and 20 KB sent 1 KB at a time got `400 Invalid HTTP request
    # received.`, which names neither the headers nor the rule.
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with http_server(tmp_path / "data", f"127.0.0.1:{port}", tmp_path):
        for filler, piece in ((60_000, 1 << 20), (20_000, 1 << 20), (20_000, 1000)):
            answer = _answer_to_headers(port, filler, piece)
            status, _, said = answer.partition(b"\r\n\r\n")
            assert status.startswith(b"HTTP/1.1 431 "), (filler, piece, answer[:300])
            assert said == b"431: the request line and headers are at most 16384 bytes", said
        for piece in (1 << 20, 1000):  # under the cap, either way it arrives
            assert _answer_to_headers(port, 15_000, piece).startswith(b"HTTP/1.1 200 ")

        async def body() -> None:
            async with Client(url, mode="legacy") as client:
                error, reply = await call(client, "memorize", **FACT, scope=PROJECT_A)
                assert not error, reply

        run(body)


def test_a_request_framing_its_body_twice_is_refused_and_its_connection_closed(
    tmp_path: Path,
) -> None:
    # Content-Length and Transfer-Encoding both: h11 read the chunks and kept the connection,
    # so the request after it was answered too, where a proxy in front reading the length
    # would take the rest of the body for a request of its own (smuggling).
    port = free_port()
    body = json.dumps(initialize_message()).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\n"
    ).encode()
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    twice = head + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked
    plain = head + b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    with (
        http_server(tmp_path / "data", f"127.0.0.1:{port}", tmp_path),
        socket.create_connection(("127.0.0.1", port), timeout=20) as conn,
    ):
        conn.sendall(twice + plain)
        answer = b""
        with contextlib.suppress(OSError):
            while chunk := conn.recv(1 << 16):
                answer += chunk
    status, _, said = answer.partition(b"\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 400 "), answer[:300]
    assert said == (
        b"400: the request sends both Content-Length and Transfer-Encoding; send one"
    ), said
    assert answer.count(b"HTTP/1.1 ") == 1  # closed: the request after it is not read


def test_a_flood_of_malformed_requests_is_not_logged_line_by_line(tmp_path: Path) -> None:
    # uvicorn warned once per malformed request (`Invalid HTTP request received.`), twice per
    # websocket upgrade asked, with nothing bounding the lines: 2,000 of them filled the 64 kB
    # pipe the server's launcher reads stderr from (here: unread until the end), and the
    # server, blocked writing the next line, answered nobody.
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    upgrade = f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: Upgrade\r\n"
    upgrade += "Upgrade: websocket\r\n\r\n"
    with http_server(tmp_path / "data", f"127.0.0.1:{port}", tmp_path) as proc:
        for sent, request in enumerate([b"GARBAGE\r\n\r\n"] * 1500 + [upgrade.encode()] * 500):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
                conn.sendall(request)
                try:
                    conn.recv(1 << 16)
                except TimeoutError:
                    raise AssertionError(f"no answer after {sent} malformed requests") from None
                except OSError:
                    pass

        async def body() -> None:
            with anyio.fail_after(20):
                async with Client(url, mode="legacy") as client:
                    error, reply = await call(client, "memorize", **FACT, scope=PROJECT_A)
                    assert not error, reply

        run(body)
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    said = err.decode().splitlines()
    assert len(said) < 100, len(said)
    logged = said.count("WARNING:  Invalid HTTP request received.")
    assert 0 < logged <= 20 * 2, logged  # at most 20 in 10 s
    quiet = "over 20 warnings of malformed requests in 10 s: more are counted, not logged"
    assert any(quiet in line for line in said), said
