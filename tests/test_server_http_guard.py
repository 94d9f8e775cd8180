"""What the HTTP guard answers a request whose headers a hostile client chose: its Host and
Origin checks, and the refusal's size, in front of a stand-in MCP app."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from octobrain.server.abandoned import SCOPE_KEY, Work, held_until_done
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


@pytest.mark.parametrize(
    "origin", ["http://127.0.0.1", "https://localhost:8765", "http://[::1]:80/", "HTTP://LocalHost"]
)
def test_a_loopback_origin_is_served(origin: str) -> None:
    assert _get({"host": "127.0.0.1", "origin": origin})[0] == 200


@pytest.mark.parametrize(
    "origin",
    [
        "http://evil.com\\@127.0.0.1",  # a browser's host is evil.com; urlsplit took 127.0.0.1
        "http://evil.com@127.0.0.1",  # browsers never send userinfo in an Origin
        "http://127.0.0.1/path",
        "http://127.0.0.1:80:80",
        "ftp://127.0.0.1",
        "127.0.0.1",
        "null",
    ],
)
def test_an_origin_not_naming_a_loopback_origin_exactly_is_refused(origin: str) -> None:
    assert _get({"host": "127.0.0.1", "origin": origin})[0] == 403


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
    assert said.startswith('403: Origin "http://evil.example/xxx'), said[:200]
    assert "characters cut]" in said and said.endswith('forged" is not allowed'), said[-200:]
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


@pytest.mark.parametrize(
    "headers",
    [
        [("origin", "http://127.0.0.1"), ("origin", "http://evil.example")],
        [("origin", "http://localhost"), ("origin", "http://127.0.0.1")],
        [("host", "127.0.0.1"), ("host", "evil.example")],
    ],
)
def test_a_request_sending_origin_or_host_twice_is_refused(headers: list[tuple[str, str]]) -> None:
    # The guard checked the first: `Origin: http://127.0.0.1` then `Origin: http://evil.example`
    # was served (200), while whatever reads the last header took the request as the evil one.
    name = headers[0][0]
    sent = headers if name == "host" else [("host", "127.0.0.1"), *headers]
    status, _headers, body = _ask("GET", sent)
    assert status == 400, body
    assert body == f"400: {name}: the request sends more than one; send the header once".encode()


def _hung_up_guard(
    release: asyncio.Event, ran: list[int], *, writing: bool
) -> tuple[list[asyncio.Future[Any]], list[int], Any]:
    """A guard in front of a stand-in SDK whose calls wait for `release` (`writing`: unless
    cancelled, as a write in its worker thread does) and whose clients hang up while they
    run; the handlers' futures, the hang-ups, and `post(request_id)` → status (0: none)."""
    handlers: list[asyncio.Future[Any]] = []
    hung_up: list[int] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:  # the SDK, its client gone
        started = asyncio.Event()

        async def handler(ctx: Any) -> dict[str, Any]:
            started.set()
            with anyio.CancelScope(shield=writing):
                await release.wait()
                ran.append(1)
            return {}

        ctx = SimpleNamespace(request=SimpleNamespace(scope=scope))
        handlers.append(asyncio.ensure_future(held_until_done(ctx, handler)))
        await started.wait()
        hung_up.append(1)  # the POST ends unanswered, its call running

    guard = Guard(app, token="", loopback=True, allowed_origins=(), max_in_flight=8)

    async def post(request_id: int) -> int:
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call"}).encode()
        headers = [(b"host", b"127.0.0.1"), (b"mcp-session-id", b"s1"),
                   (b"content-length", str(len(body)).encode())]  # fmt: skip
        scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers}
        messages = iter([{"type": "http.request", "body": body, "more_body": False}])
        sent: list[dict[str, Any]] = []

        async def receive() -> Any:
            return next(messages, {"type": "http.disconnect"})

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await guard(scope, receive, send)
        return int(sent[0]["status"]) if sent else 0

    return handlers, hung_up, post


def test_a_call_whose_client_went_away_keeps_its_place_until_its_work_ends() -> None:
    # The place was freed when the POST ended, and a POST whose client hangs up ends at once
    # while the SDK runs its call on: posting a call and hanging up, again and again, had
    # every one queued and run (40 briefings for 40 hang-ups), none counted. A write under
    # way is finished.
    release, ran = asyncio.Event(), []
    handlers, hung_up, post = _hung_up_guard(release, ran, writing=True)

    async def body() -> None:
        first = asyncio.ensure_future(post(1))  # one place a session (an eighth of 8)
        while not hung_up:
            await asyncio.sleep(0)
        for _ in range(3):  # the guard past the POST's end (it was freed there)
            await asyncio.sleep(0)
        assert await post(2) == 429  # the first call's work still holds the place
        release.set()
        await first
        await post(3)
        await asyncio.gather(*handlers)
        assert ran == [1, 1]

    asyncio.run(body())


def test_a_call_whose_client_went_away_is_cancelled_where_it_waits() -> None:
    # Its work ran to its end for no one, holding its place meanwhile: a read waiting for the
    # store's lock, then read it. It is cancelled as a client's cancel would, its place free.
    release, ran = asyncio.Event(), []
    handlers, hung_up, post = _hung_up_guard(release, ran, writing=False)

    async def body() -> None:
        first = asyncio.ensure_future(post(1))
        while not hung_up:
            await asyncio.sleep(0)
        await first
        with pytest.raises(MCPError, match="the client closed the connection; the call was stop"):
            await handlers[0]
        assert await post(2) == 0  # its place is free: taken, not refused 429
        release.set()
        await asyncio.gather(*handlers[1:], return_exceptions=True)
        assert ran == []  # neither ran: the second's client went too

    asyncio.run(body())


def test_a_call_whose_client_went_away_before_it_started_is_not_run() -> None:
    work = Work()
    scope = {SCOPE_KEY: work}
    ctx = SimpleNamespace(request=SimpleNamespace(scope=scope))
    ran: list[int] = []

    async def handler(ctx: Any) -> dict[str, Any]:
        ran.append(1)
        return {}

    async def body() -> None:
        await work.done()  # its POST ended: the client closed the connection
        with pytest.raises(MCPError, match="closed the connection first; nothing was done"):
            await held_until_done(ctx, handler)

    asyncio.run(body())
    assert ran == []
