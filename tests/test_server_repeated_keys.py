"""A message naming one key twice in an object, on stdio and over HTTP: refused to its call.

JSON leaves a repeated key to the reader. The server (and the SDK) kept the last, so a call
that a client, proxy or approval prompt keeping the first read as `remember`, or as a forget
preview (`confirm: false`), deleted the memory."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.server_support import PROJECT_A, free_port, http_server, initialize_message
from tests.server_transports_support import open_session, raw_stdio

REFUSED = "twice in one object (JSON leaves which one counts to the reader)"


def _call(request_id: int, params: str) -> str:
    return f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "tools/call", "params": {params}}}'


def test_a_repeated_key_over_stdio_is_refused_to_its_call_and_deletes_nothing(
    tmp_path: Path,
) -> None:
    with raw_stdio(tmp_path) as (send, answer):
        send(json.dumps(initialize_message({"experimental": {"session": {"scope": PROJECT_A}}})))
        assert answer()["id"] == 1
        send('{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        fact = {"title": "Use ruff for linting", "content": "Lint and format with ruff."}
        send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                         "params": {"name": "memorize", "arguments": fact}}))  # fmt: skip
        stored = answer()["result"]["content"][0]["text"]
        memory = stored.split("\n", 1)[0].removeprefix("Memory stored: ")
        forget = f'"arguments": {{"memory_id": "{memory}", "confirm": true}}'
        # Before: forget ran (the last "name"), then the preview read as a delete.
        send(_call(3, f'{{"name": "remember", "name": "forget", {forget}}}'))
        refused = answer()
        assert refused["id"] == 3 and refused["error"]["code"] == -32600, refused
        assert f'the key "name" {REFUSED}' in refused["error"]["message"]
        preview = f'{{"memory_id": "{memory}", "confirm": false, "confirm": true}}'
        send(_call(4, f'{{"name": "forget", "arguments": {preview}}}'))
        assert f'the key "confirm" {REFUSED}' in answer()["error"]["message"]
        send(_call(5, '{"name": "remember", "arguments": {"query": "ruff linting"}}'))
        assert memory in answer()["result"]["content"][0]["text"]  # still there


def test_a_repeated_key_over_http_is_refused_to_its_call(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    accept = {"Accept": "application/json, text/event-stream"}
    with http_server(tmp_path / "data", f"127.0.0.1:{port}", tmp_path):
        session = {**open_session(url, accept), "Content-Type": "application/json"}
        body = _call(2, '{"name": "remember", "arguments": {"query": "ab", "query": "ruff"}}')
        refused = httpx.post(url, content=body, headers=session, timeout=60)
        assert refused.status_code == 400, refused.text
        assert (
            refused.json()["id"] == 2
            and f'the key "query" {REFUSED}' in refused.json()["error"]["message"]
        )
        ping = httpx.post(url, json={"jsonrpc": "2.0", "id": 3, "method": "ping"}, headers=session)
        assert ping.status_code == 200 and '"id":3' in ping.text  # the session goes on
