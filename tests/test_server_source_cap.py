"""How many sources one project's knowledge index holds (`knowledge.max_sources`): each source
is bounded, but a client naming `?v=1`, `?v=2`, … of one URL (each a source of its own) grew
the store without end. The real server over stdio, the SDK's own client, and the command line."""

from __future__ import annotations

import subprocess
from pathlib import Path

from mcp import Client
from mcp.client.stdio import stdio_client

from tests.knowledge.conftest import Server
from tests.server_support import (
    PROJECT_A,
    PROJECT_B,
    call,
    octobrain_cmd,
    run,
    server_env,
    stdio_params,
)

CAP = {
    "OCTOBRAIN_KNOWLEDGE_MAX_SOURCES": "2",
    "OCTOBRAIN_KNOWLEDGE_ALLOW_PRIVATE_HOSTS": "127.0.0.1",  # (the pages' web server)
    "OCTOBRAIN_KNOWLEDGE_OUTDATING_DAYS": "0",  # (a URL named again is fetched again)
}
MARKDOWN = {"Content-Type": "text/markdown"}
PAGE = b"# Deploys\n\nWorkers restart after the deploy and report their health."


def _cli(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        octobrain_cmd("knowledge", "--scope", PROJECT_A, *args),
        env=server_env(tmp / "data", OCTOBRAIN_SERVICE_ENABLED="0", **CAP),
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_project_holds_at_most_max_sources_and_an_indexed_one_is_indexed_again(
    tmp_path: Path,
) -> None:
    server = Server()
    for v in range(1, 4):
        server.routes[f"/doc.md?v={v}"] = (200, MARKDOWN, PAGE)
    url = server.url("/doc.md")
    replies: list[str] = []

    async def calls() -> None:
        async with Client(stdio_client(stdio_params(tmp_path, **CAP))) as client:
            for v, scope in ((1, PROJECT_A), (2, PROJECT_A), (3, PROJECT_A), (3, PROJECT_B)):
                arguments = {
                    "command": "search",
                    "query": "worker health",
                    "source": f"{url}?v={v}",
                }
                error, reply = await call(client, "knowledge", **arguments, scope=scope)
                replies.append(("error: " if error else "") + reply)
            # At the cap, an indexed source changed: indexed again, never refused.
            server.routes["/doc.md?v=1"] = (200, MARKDOWN, PAGE + b"\n\nThe monitor pages on call.")
            arguments = {"command": "search", "query": "monitor pages", "source": f"{url}?v=1"}
            error, reply = await call(client, "knowledge", **arguments, scope=PROJECT_A)
            replies.append(("error: " if error else "") + reply)

    try:
        run(calls)
    finally:
        server.close()
    first, second, third, other_project, again = replies
    assert "Workers restart" in first and "Workers restart" in second, (first, second)
    assert third.startswith(
        "error: source: this project's knowledge index already holds 2 sources, the most "
        f"knowledge.max_sources (2) allows, so {url}?v=3 was not indexed; delete sources"
    ), third
    assert f"octobrain knowledge --scope {PROJECT_A} delete-source SOURCE" in third, third
    assert server.hits.get("/doc.md?v=3") == 1  # refused before it was fetched (PROJECT_B's)
    assert "Workers restart" in other_project, other_project  # another project's own room
    assert "The monitor pages on call" in again, again

    # The command line: the same cap, then the way out the refusal names, run as it says.
    (tmp_path / "notes.md").write_text("# Notes\n\nThe release train leaves on Tuesdays.")
    refused = _cli(tmp_path, "index", "notes.md")
    assert refused.returncode == 2, refused.stderr
    assert "already holds 2 sources, the most knowledge.max_sources (2)" in refused.stderr
    assert refused.stdout == "", refused.stdout
    deleted = _cli(tmp_path, "delete-source", f"{url}?v=2")
    assert deleted.returncode == 0, deleted.stderr
    indexed = _cli(tmp_path, "index", "notes.md")
    assert indexed.returncode == 0 and "(1 chunk created" in indexed.stdout, indexed.stderr
    again_cli = _cli(tmp_path, "index", "--force", "notes.md")  # at the cap again, indexed
    assert again_cli.returncode == 0, again_cli.stderr
