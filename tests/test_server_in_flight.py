"""Requests in flight over stdio and HTTP: a session holds at most its cap, an id in flight is not
reused, a cancelled call frees its place, a client's answers are taken."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
from mcp import Client

from tests.server_support import (
    PROJECT_A,
    call,
    free_port,
    http_server,
    run,
)
from tests.server_transports_support import FACT, open_session, stdio_params
from tests.test_scope import make_repo


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
        busy, other = open_session(url, headers), open_session(url, headers)

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


def test_http_requests_in_no_session_hold_at_most_half_the_places(tmp_path: Path) -> None:
    # A 2026-07-28 client names no session, so no session's share held it back: one client's
    # slow calls took every place, and a client with a session got 503 until they ended.
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    headers = {"Accept": "application/json, text/event-stream"}
    modern = {**headers, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
              "mcp-name": "ingest"}  # fmt: skip
    envelope = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    turns = [{"speaker": "Ann", "text": f"Turn {i}: " + "words said " * 150} for i in range(500)]

    def ingest(request_id: int) -> dict[str, Any]:
        arguments = {"conversation": f"c{request_id}", "turns": turns, "scope": PROJECT_A}
        params = {"name": "ingest", "arguments": arguments, "_meta": envelope}
        return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}

    with http_server(  # 4 places for requests in no session, one per session (of 8)
        tmp_path / "data", f"127.0.0.1:{port}", tmp_path, OCTOBRAIN_MCP_MAX_IN_FLIGHT="8"
    ):
        session = open_session(url, headers)

        async def body() -> None:
            async with httpx.AsyncClient(timeout=120) as client:
                flood = [
                    asyncio.ensure_future(client.post(url, json=ingest(i), headers=modern))
                    for i in range(8)
                ]
                await asyncio.sleep(0.5)  # the first four are being answered (seconds each)
                listing = {"jsonrpc": "2.0", "id": 9, "method": "tools/list"}
                served = await client.post(url, json=listing, headers=session)
                assert served.status_code == 200, served.text
                assert sum(not call.done() for call in flood) == 4
                # The SDK serves a 2026-07-28 request in no session, whatever id it names: a
                # made-up one on each is no way past the pool.
                named = {**modern, "mcp-session-id": "made-up"}
                past = await client.post(url, json=ingest(10), headers=named)
                assert past.status_code == 503 and past.json()["id"] == 10, past.text
                answers = await asyncio.gather(*flood)
                assert sorted(a.status_code for a in answers) == [200] * 4 + [503] * 4
                refused = next(a for a in answers if a.status_code == 503)
                assert refused.headers["retry-after"] == "1"
                assert "requests that name no MCP session" in refused.text, refused.text
                again = await client.post(url, json=ingest(11), headers=modern)
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
        session = open_session(url, headers)

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
        session = open_session(url, {"Accept": "application/json, text/event-stream"})
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
        assert guard.in_flight.total == 0

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
        params = stdio_params(tmp_path / "data", tmp_path)
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
                    await client.list_resources()  # ...and another is answered meanwhile
                    answered_first = not waiting
                    release.set()
                assert answered_first
                error, reply = waiting[0]
                assert not error and "github.com/acme/web" in reply, reply

    run(body)
