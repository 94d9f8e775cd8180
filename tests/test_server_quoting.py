"""What an MCP client sent is quoted back as it wrote it, in JSON (`"x"`, `true`, `""`), never
as Python writes it (`'x'`, `True`): the real server over stdio, the SDK's own client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import stdio_client

from tests.server_support import run, stdio_params, text

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
    ("x\u202ey", {},  # (a bidirectional override would reverse the rest of the line)
     'name: unknown tool "x\\u202ey"; use one of forget, ingest, knowledge, memorize, remember'),
    ("knowledge", {"command": "delete", "key": "plan", "scope": UNLOCKED},
     'key: no stored note "plan" in this session'),
    ("knowledge", {"command": "read", "source": "stored://plan", "scope": UNLOCKED},
     'source: no stored note "plan" in this session'),
    ("knowledge", {"command": "search", "query": "deploys", "source": "stored://plan",
                   "scope": UNLOCKED},
     'source: no stored note "plan" in this session'),
    ("knowledge", {"command": "search", "query": "deploys", "source": "gopher://x/a",
                   "scope": UNLOCKED},
     'source: unsupported scheme "gopher": use a file path, file:// or http(s)://'),
    ("knowledge", {"command": "search", "query": "deploys", "source": "http:///a.md",
                   "scope": UNLOCKED},
     'source: URL "http:///a.md" has no host'),
    ("knowledge", {"command": "read", "source": "http://exa mple.com/", "scope": UNLOCKED},
     'source: URL "http://exa mple.com/" has no valid host: a host name holds letters, digits, '
     '"-", "." and "_" only (found " ")'),
    ("knowledge", {"command": "store", "key": "\u0301", "content": "Rotate the keys.",
                   "scope": UNLOCKED},  # (stored: a note whose key prints as nothing)
     "key: must hold a visible character, not only combining marks or fillers "
     "(found U+0301 COMBINING ACUTE ACCENT)"),
    ("forget", {"memory_id": "abcd1234", "confirm": True, "scope": UNLOCKED},
     'memory_id: no memory id starting with abcd1234 is visible from scope "a/b"'),
    # A number past every bound is quoted by its exponent, as sent: `1e308` read as an
    # integer was echoed as its 309 digits, and 10**400 as 100 of its 401.
    ("remember", {"query": "deploys", "scope": UNLOCKED, "limit": 1e308},
     "limit: must be an integer in [1, 50], got 1e+308"),
    ("remember", {"query": "deploys", "scope": UNLOCKED, "limit": -1.5e300},
     "limit: must be an integer in [1, 50], got -1.5e+300"),
    ("remember", {"query": "deploys", "scope": UNLOCKED, "limit": 10**400},
     "limit: must be an integer in [1, 50], got 1e+400"),
    ("memorize", {"title": "Deploys", "content": "Deploy on Tuesdays.", "scope": UNLOCKED,
                  "importance": 10**400},
     "importance: must be a number in [0, 1], got 1e+400"),
]  # fmt: skip


def test_refusals_quote_the_clients_values_as_json(tmp_path: Path) -> None:
    async def body() -> None:
        async with Client(stdio_client(stdio_params(tmp_path))) as client:
            for tool, arguments, said in REFUSED:
                result = await client.call_tool(tool, arguments)
                assert result.is_error and text(result) == said, (tool, text(result))

    run(body)


def test_a_note_key_is_one_key_however_its_accents_are_composed(tmp_path: Path) -> None:
    # "plán" with its accent composed (NFC) and as a + U+0301 (NFD, as macOS file names are):
    # two notes that print alike, and deleting the one spelling left the other.
    composed, decomposed = "plán", "pla\u0301n"
    note = {"command": "store", "content": "Release plan: cut from main on Tuesday."}

    async def body() -> None:
        async with Client(stdio_client(stdio_params(tmp_path))) as client:
            stored = await client.call_tool(
                "knowledge", {**note, "key": decomposed, "scope": "a/b"}
            )
            assert not stored.is_error, text(stored)
            again = await client.call_tool("knowledge", {**note, "key": composed, "scope": "a/b"})
            assert again.is_error and text(again) == (
                'key: "plán" already exists in this session; delete it first'
            )
            read = {"command": "read", "source": f"stored://{composed}", "scope": "a/b"}
            assert "cut from main" in text(await client.call_tool("knowledge", read))
            gone = {"command": "delete", "key": composed, "scope": "a/b"}
            assert not (await client.call_tool("knowledge", gone)).is_error
            left = {**read, "source": f"stored://{decomposed}"}
            assert text(await client.call_tool("knowledge", left)) == (
                'source: no stored note "plán" in this session'
            )

    run(body)
