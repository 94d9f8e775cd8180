"""A message's encoding, on stdio and over HTTP: a UTF-8 byte order mark is read past (RFC 8259
8.1 lets a JSON reader ignore it; some Windows tools write one), and a message in UTF-16, UTF-32
or other bytes is refused to its call saying so, where the server said only "not a JSON-RPC
2.0 message" or quoted Python's codec error."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.server_support import free_port, http_server, initialize_message
from tests.server_transports_support import open_session, raw_stdio

NOT_UTF8 = "MCP messages are UTF-8 text (a UTF-8 byte order mark is allowed); nothing was done"


def _ping(request_id: int) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "ping"})


def test_stdio_reads_a_byte_order_mark_and_names_utf16(tmp_path: Path) -> None:
    with raw_stdio(tmp_path) as (send, answer):
        send("\ufeff" + json.dumps(initialize_message()))  # the first line, as Windows tools do
        assert answer()["result"]["serverInfo"]["name"] == "octobrain"
        send('{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        send("\ufeff" + _ping(2))
        assert answer() == {"jsonrpc": "2.0", "id": 2, "result": {}}
        # UTF-16 of ASCII text: the same bytes as this string's UTF-8 (a NUL after each).
        send(_ping(3).encode("utf-16-le").decode("ascii"))
        refused = answer()
        assert refused["id"] == 3 and refused["error"]["code"] == -32700, refused
        assert refused["error"]["message"] == f"message is UTF-16 or UTF-32 text; {NOT_UTF8}"
        send(_ping(4))
        assert answer()["id"] == 4  # the session goes on


def test_http_reads_a_byte_order_mark_and_names_other_encodings(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    accept = {"Accept": "application/json, text/event-stream"}
    with http_server(tmp_path / "data", f"127.0.0.1:{port}", tmp_path):
        session = {**open_session(url, accept), "Content-Type": "application/json"}
        read = httpx.post(url, content=b"\xef\xbb\xbf" + _ping(2).encode(), headers=session)
        assert read.status_code == 200 and '"id":2,"result":{}' in read.text, read.text
        for body in (_ping(3).encode("utf-16"), _ping(3).encode("utf-32")):
            refused = httpx.post(url, content=body, headers=session)
            assert refused.status_code == 400, refused.text
            said = refused.json()
            assert said["id"] == 3 and said["error"]["code"] == -32700
            assert said["error"]["message"] == f"message is UTF-16 or UTF-32 text; {NOT_UTF8}"
        latin = b'{"jsonrpc": "2.0", "id": 4, "method": "ping", "params": {"x": "caf\xe9"}}'
        refused = httpx.post(url, content=latin, headers=session)
        assert refused.status_code == 400 and refused.json()["id"] == 4, refused.text
        assert refused.json()["error"]["message"] == (
            f"message is not UTF-8: its byte 67 (0xe9) cannot be read as UTF-8; {NOT_UTF8}"
        )
