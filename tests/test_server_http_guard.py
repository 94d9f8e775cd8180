"""What the HTTP guard answers a request whose headers a hostile client chose: its Host and
Origin checks, and the refusal's size, in front of a stand-in MCP app."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from octobrain.server.http import Guard


async def _app(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"{}", "more_body": False})


def _get(headers: dict[str, str], *, loopback: bool = True) -> tuple[int, bytes]:
    """The status and body the guard answers a GET with these headers."""
    status, _headers, body = _ask("GET", list(headers.items()), loopback=loopback)
    return status, body


def _ask(
    method: str,
    headers: list[tuple[str, str]],
    *,
    loopback: bool = True,
    read: list[str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """The status, headers and body the guard answers a request (a header may repeat); each
    time the request's body is read, "read" is added to `read`."""
    guard = Guard(_app, token="", loopback=loopback, allowed_origins=())
    scope = {
        "type": "http",
        "method": method,
        "path": "/mcp",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers],
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> Any:
        if read is not None:
            read.append("read")
            return {"type": "http.request", "body": b"not json", "more_body": False}
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(guard(scope, receive, send))
    answered = {k.decode().lower(): v.decode() for k, v in sent[0].get("headers", [])}
    return sent[0]["status"], answered, b"".join(m.get("body", b"") for m in sent[1:])


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "127.0.0.1:8765", "localhost:80", "LocalHost", "[::1]", "[::1]:8765"]
)
def test_a_loopback_host_is_served(host: str) -> None:
    assert _get({"host": host})[0] == 200


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1:1@evil.com",  # was taken for 127.0.0.1: the part before the last colon
        "localhost:evil",
        "localhost:８０",  # a port of full-width digits
        "127.0.0.1:80:80",
        "evil.com#127.0.0.1:80",
        "[::1]evil",
        "evil.example",
        "",
    ],
)
def test_a_host_not_naming_a_loopback_host_exactly_is_refused(host: str) -> None:
    status, body = _get({"host": host})
    assert status == 421, body
    assert body == b"421: Host must be a loopback name"


def test_a_refused_origin_is_quoted_cut_in_the_answer_and_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The whole header came back and went to the log: up to the ~100 kB a request's headers
    # may hold, on every request a loopback client sent.
    origin = "http://evil.example/" + "x" * 90_000 + "/forged"
    with caplog.at_level("WARNING", logger="octobrain.server.http"):
        status, body = _get({"host": "127.0.0.1", "origin": origin})
    assert status == 403
    said = body.decode()
    assert said.startswith("403: Origin 'http://evil.example/xxx"), said[:200]
    assert "characters cut]" in said and said.endswith("forged' is not allowed"), said[-200:]
    assert len(said) < 300 and "\n" not in said
    logged = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(logged) == 1 and len(logged[0]) < 400, logged


@pytest.mark.parametrize("method", ["PUT", "PATCH", "OPTIONS", "TRACE"])
def test_a_method_the_server_does_not_serve_is_405_before_its_body_is_read(method: str) -> None:
    # A PUT or PATCH was read whole (up to 1 MiB, from the bodies' budget), then answered
    # 400 "not JSON"; the SDK itself answers other methods 405 with Allow.
    read: list[str] = []
    headers = [("host", "127.0.0.1"), ("content-length", "8")]
    status, answered, body = _ask(method, headers, read=read)
    assert (status, answered.get("allow")) == (405, "GET, POST, DELETE"), body
    assert f"{method} is not served at /mcp" in body.decode()
    assert read == []


def test_a_request_naming_two_sessions_is_refused() -> None:
    # The first header was used (by the guard and the SDK alike): a proxy or log reading the
    # last saw another session than the one the request acted on (a DELETE ended it).
    two = [("host", "127.0.0.1"), ("mcp-session-id", "aaaa"), ("mcp-session-id", "bbbb")]
    for method in ("GET", "DELETE"):
        status, _headers, body = _ask(method, two)
        assert status == 400, body
        assert b"mcp-session-id: the request names more than one session" in body
    same = [("host", "127.0.0.1"), ("mcp-session-id", "aaaa"), ("mcp-session-id", "aaaa")]
    assert _ask("GET", same)[0] == 200
