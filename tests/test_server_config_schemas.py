"""The tool schemas state the defaults and bounds of the config the server runs with: what an
argument left out becomes, and the largest `limit` the server takes. The real server over stdio,
the SDK's own client."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from mcp import Client
from mcp.client.stdio import stdio_client

from octobrain.config import Config, EmbeddingConfig, MemoryConfig, SearchConfig
from octobrain.server.hosted import prepare_session
from octobrain.server.pool import BrainPool
from tests.server_support import PROJECT_A, call, outside_env, run, stdio_params

SETTINGS = """\
[memory]
default_importance = 0.7

[search]
default_limit = 8
max_results = 10
"""
NOTE = {"title": "Deploy window", "content": "Deploys go out on Tuesdays after the standup."}


def _listed(tools: Any) -> dict[str, dict[str, Any]]:
    return {t.name: t.model_dump(by_alias=True, exclude_none=True) for t in tools.tools}


def _assert_configured(tools: dict[str, dict[str, Any]]) -> None:
    memorize, remember = tools["memorize"], tools["remember"]
    importance = memorize["inputSchema"]["properties"]["importance"]
    assert importance["default"] == 0.7, importance
    assert "default 0.7 (memory.default_importance)" in memorize["description"]
    assert "0.5 normal useful knowledge (default)" not in memorize["description"]
    limit = remember["inputSchema"]["properties"]["limit"]
    assert (limit["default"], limit["maximum"]) == (8, 10), limit


def test_tools_list_states_the_configured_defaults_and_the_server_keeps_them(
    tmp_path: Path,
) -> None:
    # tools/list said importance 0.5 and limit 5, at most 50, whatever the config said: an
    # agent was told 0.5 when 0.7 applied, and a limit of 30 it was then refused.
    config = tmp_path / "config.toml"
    config.write_text(SETTINGS)
    params = stdio_params(tmp_path, OCTOBRAIN_CONFIG_PATH=str(config))

    async def body() -> None:
        async with Client(stdio_client(params)) as client:
            tools = _listed(await client.list_tools())
            _assert_configured(tools)
            schema = Draft202012Validator(tools["remember"]["inputSchema"])
            for limit in (10, 11):  # what the schema allows is what the server takes
                arguments = {"query": "deploy window", "limit": limit, "scope": PROJECT_A}
                error, reply = await call(client, "remember", **arguments)
                assert error is not schema.is_valid(arguments), (limit, reply)
            assert reply == "limit: must be an integer in [1, 10], got 11", reply
            error, reply = await call(client, "memorize", **NOTE, scope=PROJECT_A)
            assert not error and "Importance: 0.70 |" in reply, reply

    run(body)


def test_a_hosted_session_lists_its_services_config(tmp_path: Path) -> None:
    # The resident service hosts each `octobrain mcp` session on its own pool (one service per
    # config file): a session lists that pool's settings.
    config = Config(
        embedding=EmbeddingConfig(model="hash:64"),
        memory=MemoryConfig(default_importance=0.7),
        search=SearchConfig(default_limit=8, max_results=10),
    )
    octo = prepare_session(BrainPool(config, uri=tmp_path / "db"), str(tmp_path))

    async def body() -> None:
        async with Client(octo.server) as client:
            _assert_configured(_listed(await client.list_tools()))

    run(body)


def test_importing_the_tool_schemas_loads_no_array_library() -> None:
    # Before: a limit imported from `memory.query` loaded numpy and pyarrow with it (~220 ms),
    # though the module says its import is cheap.
    probe = (
        "import sys, octobrain.server.schemas\n"
        "print('HEAVY', [m for m in ('numpy', 'pyarrow', 'lancedb') if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], env=outside_env(), capture_output=True, text=True
    )
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr
