"""`octobrain mcp` over stdio in a subprocess: stdout carries only JSON-RPC, memories persist
across servers, the briefing names damage and bad capabilities, a session is initialized once."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.server_support import (
    PROJECT_A,
    advertise_session,
    call,
    initialize_message,
    memory_id,
    octobrain_cmd,
    run,
    server_env,
)
from tests.server_transports_support import FACT, raw_stdio, stdio_params


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
        async with Client(stdio_params(tmp_path / "data", tmp_path)) as client:
            error, reply = await call(client, "memorize", **FACT)
            assert not error, reply
            stored = memory_id(reply)
        async with Client(stdio_params(tmp_path / "data", tmp_path)) as client:
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
        async with Client(stdio_params(tmp_path / "data", tmp_path)) as client:
            error, reply = await call(client, "memorize", **FACT)
            assert not error, reply
        for data in (tmp_path / "data" / "db" / "memories.lance" / "data").glob("*.lance"):
            data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
        async with Client(stdio_params(tmp_path / "data", tmp_path)) as client:
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
        async with Client(stdio_params(tmp_path / "data", tmp_path)) as client:
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
        async with Client(stdio_params(tmp_path / "data", tmp_path)) as client:
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
        async with Client(stdio_params(tmp_path / "data", tmp_path, model="minilm")) as client:
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
