"""An untrusted MCP client's calls: SSRF spellings, caps on one call's work, and malformed
protocol input (local files: `test_untrusted.py`)."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client

from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.errors import InvalidInput
from octobrain.knowledge import Knowledge
from octobrain.knowledge.fetch import FetchError, resolve_checked
from octobrain.models import NOTE_BYTES
from octobrain.server import build_server
from octobrain.server.schemas import KNOWLEDGE
from tests.reliability.untrusted_client import knowledge_replies, pool_for
from tests.server_support import (
    PROJECT_A,
    call,
    free_port,
    http_server,
    initialize_message,
    octobrain_cmd,
    run,
    server_env,
    workspace,
)

# ---- SSRF: an IPv4 inside an IPv6 address is checked as that IPv4 ---------------------------

EMBEDDED_LOOPBACK = [
    "64:ff9b::7f00:1",  # NAT64
    "64:ff9b:1::7f00:1",  # local-use NAT64
    "2002:7f00:1::1",  # 6to4
    "::7f00:1",  # IPv4-compatible
    "::ffff:7f00:1",  # IPv4-mapped
    "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo, client 127.0.0.1
    "64:ff9b::a9fe:a9fe",  # NAT64 to the cloud metadata address
]


def _answering(monkeypatch: pytest.MonkeyPatch, address: str) -> None:
    def fake(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, port, 0, 0))]

    monkeypatch.setattr(socket, "getaddrinfo", fake)


@pytest.mark.parametrize("address", EMBEDDED_LOOPBACK)
def test_an_ipv4_embedded_in_ipv6_is_checked_as_that_ipv4(
    monkeypatch: pytest.MonkeyPatch, address: str
) -> None:
    _answering(monkeypatch, address)
    with pytest.raises(FetchError, match=r"^source: refusing docs\.example\.com"):
        resolve_checked("docs.example.com", 443, ())


@pytest.mark.parametrize("address", ["64:ff9b::808:808", "2002:808:808::1", "::ffff:8.8.8.8"])
def test_ipv6_forms_of_a_public_ipv4_still_pass(
    monkeypatch: pytest.MonkeyPatch, address: str
) -> None:
    _answering(monkeypatch, address)
    chosen = resolve_checked("docs.example.com", 443, ())
    assert ipaddress.ip_address(chosen) == ipaddress.ip_address(address)


# `xn--` (an A-label with nothing after it) parses, and failed as the host was read: an
# `internal error (IDNAError …)`, the traceback in the log.
@pytest.mark.parametrize("url", ["http://0177.0.0.1/", "http://xn--/"])
def test_a_url_httpx_cannot_parse_is_one_line(tmp_path: Path, url: str) -> None:
    server = build_server(pool_for(tmp_path / "db"), workspace(tmp_path, PROJECT_A))
    [(error, reply)] = knowledge_replies(server, [{"command": "read", "source": url}])
    assert (
        error
        and reply.startswith(f"source: {url.rstrip('/')}: not a valid URL")
        and "\n" not in reply
    ), reply


# ---- one call's work is bounded, and never holds up the others -------------------------------


def test_a_note_is_capped_and_the_schema_states_the_cap(tmp_path: Path) -> None:
    knowledge = Knowledge(
        PROJECT_A, config=Config(), embedder=get_embedder("hash:64"), uri=tmp_path, session_id="s"
    )
    with pytest.raises(InvalidInput, match=rf"^content: must be at most {NOTE_BYTES} bytes"):
        knowledge.store("big", "word " * (NOTE_BYTES // 5 + 1))
    content = KNOWLEDGE.input_schema(locked=True)["properties"]["content"]
    assert content["maxLength"] == NOTE_BYTES and str(NOTE_BYTES) in content["description"]


@contextmanager
def stalling_http() -> Iterator[tuple[int, threading.Event]]:
    """A local HTTP server that accepts and then says nothing until released."""
    release = threading.Event()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def serve() -> None:
        with contextlib.suppress(OSError):
            conn, _ = listener.accept()
            release.wait(60)
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield listener.getsockname()[1], release
    finally:
        release.set()
        listener.close()


def test_remember_answers_while_a_knowledge_call_is_still_running(tmp_path: Path) -> None:
    pool = pool_for(tmp_path / "db", allow_private_hosts=("127.0.0.1",))
    server = build_server(pool, workspace(tmp_path, PROJECT_A))
    order: list[str] = []
    with stalling_http() as (port, release):

        async def body() -> None:
            async with Client(server, mode="legacy") as client:
                await call(client, "memorize", title="Deploy day", content="We deploy on Tuesdays.")

                async def slow() -> None:
                    source = f"http://127.0.0.1:{port}/doc"
                    await call(client, "knowledge", command="read", source=source)
                    order.append("knowledge")

                async with anyio.create_task_group() as tg:
                    tg.start_soon(slow)
                    await anyio.sleep(0.5)  # the knowledge call is waiting on the server
                    with anyio.fail_after(30):
                        error, reply = await call(client, "remember", query="deploy day")
                    order.append("remember")
                    assert not error and "Tuesdays" in reply
                    release.set()

        run(body)
    assert order == ["remember", "knowledge"]


def _stdio_server(tmp_path: Path, **env: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        octobrain_cmd("mcp"),
        env=server_env(tmp_path / "data", **env),
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _finish(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError, ValueError):
                stream.close()


def _send(proc: subprocess.Popen[bytes], raw: bytes) -> None:
    assert proc.stdin is not None
    proc.stdin.write(raw + b"\n")
    proc.stdin.flush()


def _answer(proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    assert proc.stdout is not None
    answer: dict[str, Any] = json.loads(proc.stdout.readline())
    return answer


INITIALIZE = initialize_message()


def test_the_stdio_server_exits_soon_after_stdin_closes_mid_call(tmp_path: Path) -> None:
    with stalling_http() as (port, _release):
        proc = _stdio_server(tmp_path, OCTOBRAIN_KNOWLEDGE_ALLOW_PRIVATE_HOSTS="127.0.0.1")
        try:
            _send(proc, json.dumps(INITIALIZE).encode())
            assert _answer(proc)["id"] == 1
            _send(proc, b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
            arguments = {"command": "read", "source": f"http://127.0.0.1:{port}/", "scope": ""}
            request = {"name": "knowledge", "arguments": arguments}
            _send(proc, json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                    "params": request}).encode())  # fmt: skip
            time.sleep(1.0)  # the call now waits on the HTTP server (fetch timeout 30 s)
            assert proc.stdin is not None
            start = time.monotonic()
            proc.stdin.close()
            proc.wait(timeout=20)
            assert time.monotonic() - start < 5, "the server outlived its client"
        finally:
            _finish(proc)


# ---- malformed protocol input: the same caps on stdio and HTTP, answered --------------------


def test_stdio_answers_oversized_and_overdeep_messages_and_keeps_serving(tmp_path: Path) -> None:
    proc = _stdio_server(tmp_path)
    try:
        _send(proc, json.dumps(INITIALIZE).encode())
        assert _answer(proc)["id"] == 1
        _send(proc, b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        deep = b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"x": '
        _send(proc, deep + b"[" * 100_000 + b"]" * 100_000 + b"}}")
        refused = _answer(proc)
        assert refused["id"] == 2 and refused["error"]["code"] == -32600
        assert "nested 100002 deep" in refused["error"]["message"]
        _send(proc, b'{"pad": "' + b"x" * (2 << 20) + b'"}')
        refused = _answer(proc)
        assert (
            refused["id"] is None  # no id among its first members
            and refused["error"]["code"] == -32600
            and "over 1,048,576 bytes" in refused["error"]["message"]
        )
        _send(proc, b"{not json")
        assert _answer(proc)["error"]["code"] == -32700
        _send(proc, b'{"jsonrpc": "2.0", "id": 3, "method": "tools/list"}')
        listed = _answer(proc)
        tools = {tool["name"] for tool in listed["result"]["tools"]}
        assert listed["id"] == 3 and tools == {
            "memorize",
            "remember",
            "forget",
            "knowledge",
            "ingest",
        }
    finally:
        _finish(proc)


def test_http_answers_an_overdeep_body_with_a_json_rpc_error(tmp_path: Path) -> None:
    port = free_port()
    headers = {"Accept": "application/json, text/event-stream"}
    with (
        http_server(tmp_path / "data", f"127.0.0.1:{port}", tmp_path),
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http,
    ):
        deep = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"x": '
        r = http.post("/mcp", content=deep + b"[" * 5000 + b"]" * 5000 + b"}}", headers=headers)
        assert r.status_code == 400 and r.json()["error"]["code"] == -32600
        assert r.json()["id"] == 1  # to its call, as stdio answers it (was id null)
        r = http.post("/mcp", content=b'{"pad": "' + b"x" * (2 << 20) + b'"}', headers=headers)
        assert r.status_code == 413 and "over 1048576 bytes" in r.json()["error"]["message"]
        # A batch, or another jsonrpc version: the SDK's validator dump (four errors, the input
        # echoed, documentation links) where stdio answers one line.
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        for body, answered_id in [([ping, ping], None), ({**ping, "jsonrpc": "1.0"}, 2)]:
            r = http.post("/mcp", json=body, headers=headers)
            error = r.json()["error"]
            assert r.status_code == 400 and error["code"] == -32600, r.text
            assert r.json()["id"] == answered_id, r.text
            assert "not a JSON-RPC 2.0 message" in error["message"]
            assert "pydantic" not in r.text and "\n" not in error["message"]


def test_a_deeply_nested_config_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    done = subprocess.run(
        octobrain_cmd("config", "show"),
        env={**server_env(tmp_path / "data"), "OCTOBRAIN_CONFIG_PATH": str(path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr[-500:]
    assert "nested too deeply" in done.stderr
