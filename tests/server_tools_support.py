"""What the MCP tool tests share: a server locked to one project and its tool listing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.server_support import PROJECT_A, hash_pool, run, server_for


@pytest.fixture
def locked(tmp_path: Path) -> Any:
    """A server whose working directory locks every session to PROJECT_A."""
    return server_for(hash_pool(tmp_path / "db"), tmp_path, PROJECT_A)


def listing(server: Any, mode: str = "legacy") -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []

    async def body() -> None:
        async with Client(server, mode=mode) as client:
            result = await client.list_tools()
            tools.extend(t.model_dump(by_alias=True, exclude_none=True) for t in result.tools)

    run(body)
    return tools
