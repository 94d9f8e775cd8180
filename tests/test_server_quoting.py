"""What an MCP client sent is quoted back as it wrote it, in JSON (`"x"`, `true`, `""`), never
as Python writes it (`'x'`, `True`): the real server over stdio, the SDK's own client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.server_support import octobrain_cmd, run, server_env, text

UNLOCKED = "a/b"  # (the server's directory is no repository: each call names its scope)
REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("remember", {"query": "deploys", "scope": "git@:x"},
     'scope: "git@:x" is neither a scope nor a git remote URL'),
    ("remember", {"query": "deploys", "scope": "acme billing"},
     'scope: may contain only letters, digits and . _ - ~ / (found " ")'),
    ("memorize", {"title": "t", "content": "c", "scope": UNLOCKED, "global": True},
     'global: true contradicts scope "a/b"'),
    ("memorize", {"title": "t", "content": "c", "scope": "", "global": False},
     'global: false contradicts scope "" (the global scope)'),
    ("nosuch", {},
     'name: unknown tool "nosuch"; use one of forget, ingest, knowledge, memorize, remember'),
    ("knowledge", {"command": "delete", "key": "plan", "scope": UNLOCKED},
     'key: no stored note "plan" in this session'),
    ("knowledge", {"command": "read", "source": "stored://plan", "scope": UNLOCKED},
     'source: no stored note "plan" in this session'),
    ("knowledge", {"command": "search", "query": "deploys", "source": "gopher://x/a",
                   "scope": UNLOCKED},
     'source: unsupported scheme "gopher": use a file path, file:// or http(s)://'),
    ("knowledge", {"command": "search", "query": "deploys", "source": "http:///a.md",
                   "scope": UNLOCKED},
     'source: URL "http:///a.md" has no host'),
]  # fmt: skip


def test_refusals_quote_the_clients_values_as_json(tmp_path: Path) -> None:
    cmd = octobrain_cmd("mcp")
    env = server_env(tmp_path / "data", OCTOBRAIN_SERVICE_ENABLED="0")
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=env, cwd=tmp_path)

    async def body() -> None:
        async with Client(stdio_client(params)) as client:
            for tool, arguments, said in REFUSED:
                result = await client.call_tool(tool, arguments)
                assert result.is_error and text(result) == said, (tool, text(result))

    run(body)
