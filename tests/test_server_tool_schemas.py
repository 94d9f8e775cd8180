"""The MCP tools' schemas through the SDK's in-memory client: the snapshot, flat with full enums
and truthful annotations, bounds the server holds to, listed without loading model or store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from mcp import Client

from octobrain.server.schemas import LINK_TYPES, MEMORY_TYPES
from tests.server_support import PROJECT_A, call, hash_pool, run, server_for
from tests.server_tools_support import listing
from tests.server_tools_support import locked as locked  # the fixture, shared

SNAPSHOT = Path(__file__).parent / "server_tool_schemas.json"


def _walk(node: Any) -> list[Any]:
    out = [node]
    if isinstance(node, dict):
        for value in node.values():
            out += _walk(value)
    elif isinstance(node, list):
        for value in node:
            out += _walk(value)
    return out


def test_tool_schemas_match_the_snapshot(tmp_path: Path) -> None:
    pool = hash_pool(tmp_path / "db")
    current = {
        "locked": listing(server_for(pool, tmp_path, PROJECT_A)),
        "unlocked": listing(server_for(pool, tmp_path)),
    }
    if os.environ.get("OCTOBRAIN_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(json.dumps(current, indent=2, ensure_ascii=False) + "\n")
    assert current == json.loads(SNAPSHOT.read_text()), (
        "tool schemas changed; review, then rerun with OCTOBRAIN_UPDATE_SNAPSHOTS=1"
    )


def test_schemas_are_flat_with_full_enums_and_truthful_annotations(tmp_path: Path) -> None:
    for tools in (
        listing(server_for(hash_pool(tmp_path / "db"), tmp_path, PROJECT_A)),
        listing(server_for(hash_pool(tmp_path / "db"), tmp_path), mode="auto"),
    ):
        assert [t["name"] for t in tools] == [
            "memorize",
            "remember",
            "forget",
            "knowledge",
            "ingest",
        ]
        for tool in tools:
            nodes = _walk(tool["inputSchema"])
            keys = {k for n in nodes if isinstance(n, dict) for k in n}
            assert not keys & {"$ref", "$defs", "definitions", "$schema", "oneOf"}
            assert all(n.get("type") != "null" for n in nodes if isinstance(n, dict))
            assert all(not isinstance(n.get("type"), list) for n in nodes if isinstance(n, dict)), (
                "no type unions (nullable or otherwise)"
            )
        by_name = {t["name"]: t for t in tools}
        memorize = by_name["memorize"]["inputSchema"]["properties"]
        assert "goal" in memorize["memory_type"]["enum"]
        assert memorize["memory_type"]["enum"] == MEMORY_TYPES
        link_enum = memorize["related_to"]["items"]["properties"]["relationship_type"]["enum"]
        assert {"achieves", "closes", "supersedes"} <= set(link_enum) == set(LINK_TYPES)
        notes = {n: t["annotations"] for n, t in by_name.items()}
        assert notes["remember"]["readOnlyHint"] is True
        assert notes["forget"]["destructiveHint"] is True
        assert notes["forget"]["readOnlyHint"] is False
        assert (notes["memorize"]["readOnlyHint"], notes["memorize"]["destructiveHint"]) == (
            False,
            False,
        )
        assert by_name["forget"]["inputSchema"]["required"][0] == "confirm"
        for phrase in ("`remember` first", "user_confirmed", "supersedes", "'goal'", "closes"):
            assert phrase in by_name["memorize"]["description"]
        assert "old" in by_name["forget"]["description"]


def test_scope_parameter_only_when_unlocked_global_only_when_locked(tmp_path: Path) -> None:
    pool = hash_pool(tmp_path / "db")
    locked = {t["name"]: t["inputSchema"] for t in listing(server_for(pool, tmp_path, PROJECT_A))}
    unlocked = {t["name"]: t["inputSchema"] for t in listing(server_for(pool, tmp_path))}
    for name in locked:
        assert "scope" not in locked[name]["properties"]
        assert "scope" in unlocked[name]["properties"]
        assert "scope" in unlocked[name]["required"]
    assert "global" in locked["memorize"]["properties"]
    assert "global" not in unlocked["memorize"]["properties"]


def test_tools_list_loads_neither_model_nor_store(tmp_path: Path) -> None:
    code = f"""
import anyio, json, sys
from mcp import Client
from tests.server_support import hash_pool, server_for
HEAVY = ("lancedb", "fastembed", "onnxruntime")
server = server_for(hash_pool({str(tmp_path / "db")!r}), {str(tmp_path)!r}, "local/x/y")
seen = {{}}
async def body():
    async with Client(server) as client:
        await client.list_tools()
        seen["after_list"] = [m for m in HEAVY if m in sys.modules]
        await client.call_tool("remember", {{"query": "anything at all"}})
        seen["after_call"] = [m for m in HEAVY if m in sys.modules]
anyio.run(body)
print(json.dumps(seen))
"""
    root = Path(__file__).parent.parent
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True
    )
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["after_list"] == []
    assert "lancedb" in seen["after_call"]


def test_byte_limits_are_stated_and_character_bounds_refuse_no_valid_string(
    locked: Any, tmp_path: Path
) -> None:
    tools = {t["name"]: t["inputSchema"]["properties"] for t in listing(locked)}
    title = tools["memorize"]["title"]
    assert "5–200 bytes of UTF-8" in title["description"]
    assert (title["minLength"], title["maxLength"]) == (2, 200)  # ⌈5/4⌉ characters
    assert tools["memorize"]["related_files"]["items"]["maxLength"] == 500
    assert tools["forget"]["tags"]["items"]["maxLength"] == 50
    # The server's other string bounds were missing from the schema: a client checking its
    # arguments against it sent a 600-byte file filter, a 5,000-byte source, a 300-byte key.
    assert tools["remember"]["related_files"]["items"]["maxLength"] == 500
    knowledge = tools["knowledge"]
    assert (knowledge["source"]["maxLength"], knowledge["key"]["maxLength"]) == (4096, 200)
    assert "2–500 bytes" in tools["remember"]["query"]["description"]

    async def body() -> None:
        async with Client(locked) as client:
            error, reply = await call(
                client, "memorize", title="日本", content="東京のデータセンター"
            )
            assert not error, reply  # 2 characters but 6 bytes: valid, and the schema agrees
            error, reply = await call(client, "memorize", title="日", content="x" * 20)
            assert error and reply.startswith("title: must be 5–200 bytes"), reply

    run(body)


def test_the_schemas_refuse_the_empty_bounds_and_source_the_server_refuses(tmp_path: Path) -> None:
    # `created_after: ""` and a knowledge `source: ""` are tool errors, not "no bound" / "every
    # source": a client that checks its arguments against the published schema learns it
    # before it calls, and one that leaves the field out is still valid.
    from jsonschema import Draft202012Validator

    tools = {
        t["name"]: t["inputSchema"]
        for t in listing(server_for(hash_pool(tmp_path / "db"), tmp_path, PROJECT_A))
    }

    def valid(tool: str, **arguments: Any) -> bool:
        return Draft202012Validator(tools[tool]).is_valid(arguments)

    assert valid("remember", query="rate limits")
    assert valid("remember", query="rate limits", created_after="2026-05-01")
    assert not valid("remember", query="rate limits", created_after="")
    assert not valid("remember", query="rate limits", created_before="")
    assert valid("knowledge", command="search", query="token bucket")
    assert not valid("knowledge", command="search", query="token bucket", source="")
