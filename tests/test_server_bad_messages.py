"""Messages the SDK cannot read or refuses: each answered to its client (naming the field), and
the session goes on."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.server_support import (
    PROJECT_A,
    advertise_session,
    call,
    initialize_message,
    memory_id,
    run,
)
from tests.server_transports_support import FACT, raw_stdio, stdio_params


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


def test_a_number_past_a_floats_range_is_a_field_error_not_an_internal_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # JSON integers have no bound: 10**400 as an importance, a link's strength or a
    # min_relevance was `internal error (OverflowError: int too large to convert to float)`.
    advertise_session(monkeypatch, {"scope": PROJECT_A})
    huge = 10**400

    async def body() -> None:
        async with Client(stdio_params(tmp_path / "data", tmp_path)) as client:
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
        async with Client(stdio_params(tmp_path / "data", tmp_path)) as client:
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


@pytest.mark.parametrize(
    ("head", "ident"),
    [
        (b'{"jsonrpc": "2.0", "id": 7, "method": "x"', 7),
        (b'{"id": "call-1", "method": "x"', "call-1"),
        (b'{"id": ' + b"9" * 64 + b"}", int("9" * 64)),
        (b'{"id": ' + b"9" * 5000 + b', "method": "x"', None),  # (its first 64 digits were it)
        (b'{"id": "' + b"a" * 300 + b'", "method": "x"', None),
        (b'{"method": "x", "id": truest}', None),
    ],
)
def test_a_refused_message_is_answered_to_its_own_id_or_to_null(
    head: bytes, ident: str | int | None
) -> None:
    # A message refused before it is read (too large, too deep, an integer too long) is
    # answered to the id among its first members, so its client can match the refusal; an id
    # that is not whole there (cut to its first digits) would answer a call it never made.
    from octobrain.server.wire import leading_id

    assert leading_id(head + b', "params": {}}') == ident


@pytest.mark.parametrize("seed", range(6))
def test_a_message_s_depth_is_counted_the_same_however_many_brackets_it_holds(seed: int) -> None:
    # Past a few thousand brackets the depth is summed another way (not a step per bracket on
    # the event loop); both ways must give the depth the refusal names.
    import random

    from octobrain.server.wire import _depth

    rng = random.Random(seed)
    size = rng.choice([10, 4096, 4097, 50_000])
    text = "".join(rng.choice('[]{}[[{{,:1"') for _ in range(size))
    depth, deepest = 0, 0
    for char in text:
        depth += {"[": 1, "{": 1, "]": -1, "}": -1}.get(char, 0)
        deepest = max(deepest, depth)
    assert _depth(text.encode()) == deepest
