"""An untrusted MCP client's session, for the tests of what it may reach: a store, a project
beside a link out of it, a client's roots, and its `knowledge` calls' replies."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import Client

from octobrain.config import Config, EmbeddingConfig, KnowledgeConfig
from octobrain.server import BrainPool
from tests.server_support import call, run

OUTSIDE = Path("/etc/passwd")


def pool_for(db: Path, **knowledge: Any) -> BrainPool:
    config = Config(
        embedding=EmbeddingConfig(model="hash:64"), knowledge=KnowledgeConfig(**knowledge)
    )
    """A pool of sessions over the store at `db`, with the fast test embedder."""
    return BrainPool(config, uri=db)


def client_roots(*uris: str) -> Callable[[Any], Awaitable[types.ListRootsResult]]:
    """A client's `roots/list` answer naming `uris`, as its callback."""

    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=u) for u in uris])  # type: ignore[arg-type]

    return roots


def project_with_notes(tmp: Path) -> Path:
    """`tmp/project` holding `notes.md` and `link.md`, a link to `OUTSIDE`."""
    project = tmp / "project"
    project.mkdir()
    (project / "notes.md").write_text("# Notes\n\nThe deploy key rotates every quarter.\n")
    (project / "link.md").symlink_to(OUTSIDE)
    return project


def knowledge_replies(server: Any, calls: list[dict[str, Any]], **client: Any) -> list[Any]:
    """The (error, text) replies of `server` to one client session's `knowledge` calls, each
    with its arguments; `client`: the client's options (`list_roots_callback`)."""
    replies: list[Any] = []

    async def body() -> None:
        async with Client(server, mode="legacy", **client) as c:
            for arguments in calls:
                replies.append(await call(c, "knowledge", **arguments))

    run(body)
    return replies
