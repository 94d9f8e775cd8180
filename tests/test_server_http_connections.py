"""Connections to `octobrain mcp --bind`: how many may be open at once, and how long an answer
its client does not read is held."""

from __future__ import annotations

import logging
import os
import socket
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
import uvicorn
from mcp import Client

from octobrain.server.connections import deadline_protocol
from tests.server_support import PROJECT_A, call, free_port, http_server, run

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
    config = uvicorn.Config(app, log_level="warning", lifespan="off", http=deadline_protocol(0.5))
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
        assert len(said) == 1 and "its client left it unread for 0.5 s" in said[0], said
    finally:
        reader.close()
        server.should_exit = True
        serving.join(30)
