"""Connections to `octobrain mcp --bind`: how many may be open at once."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import anyio
from mcp import Client

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
