"""What one MCP knowledge call may embed: at most `knowledge.mcp_max_source_chunks` chunks of a
source (the rest is indexed at the command line), and its client told the progress of what it
does embed. The real server over stdio, the SDK's own client."""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.knowledge.conftest import Server
from tests.server_support import PROJECT_A, call, octobrain_cmd, run, server_env

EMBEDDED = "chunks (the first of"  # the server's log line as it starts embedding a source
PRIVATE = {"OCTOBRAIN_KNOWLEDGE_ALLOW_PRIVATE_HOSTS": "127.0.0.1"}  # (the pages' web server)
MARKDOWN = {"Content-Type": "text/markdown"}


def _document(path: Path, sections: int) -> Path:
    """Markdown of `sections` sections, each about one chunk."""
    body = "Workers restart after the deploy and report their health to the monitor. " * 12
    path.write_text("".join(f"## Part {i}\n\n{body}\n\n" for i in range(sections)))
    return path


def _server(data: Path, project: Path, **env: str) -> StdioServerParameters:
    cmd = octobrain_cmd("mcp", "-v")  # (-v: the log says when a source is embedded)
    return StdioServerParameters(
        command=cmd[0], args=cmd[1:], env=server_env(data, **env), cwd=project
    )


@pytest.fixture(params=["file", "url"])
def sources(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    """(how a call names it, its URI) of a source of 8 chunks, and how it names one of 2: project
    files, or pages of a real web server on 127.0.0.1 (`knowledge.allow_private_hosts`)."""
    project = tmp_path / "project"
    project.mkdir()
    long, short = _document(project / "handbook.md", 8), _document(project / "short.md", 2)
    if request.param == "file":
        yield long.name, long.as_uri(), short.name
        return
    server = Server()
    try:
        for doc in (long, short):
            server.routes[f"/{doc.name}"] = (200, MARKDOWN, doc.read_bytes())
        yield server.url("/handbook.md"), server.url("/handbook.md"), server.url("/short.md")
    finally:
        server.close()


def test_an_mcp_call_embeds_at_most_its_cap_and_the_cli_indexes_the_rest(
    tmp_path: Path, sources: tuple[str, str, str]
) -> None:
    # One MCP search naming a project file or a URL embedded every chunk of it (up to
    # knowledge.max_source_chunks, 10,000: 9 minutes of CPU with the bundled model), holding
    # the server's knowledge lock: every other client's knowledge call waited.
    project = tmp_path / "project"
    source, uri, short = sources
    data, log = tmp_path / "data", tmp_path / "server.log"
    cap = {"OCTOBRAIN_KNOWLEDGE_MCP_MAX_SOURCE_CHUNKS": "3", **PRIVATE}
    params = _server(data, project, **cap)
    search = {"command": "search", "query": "worker health", "source": source}
    note = {"command": "store", "key": "long", "content": (project / "handbook.md").read_text()}

    replies: list[str] = []

    async def refused() -> None:
        with log.open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                brief = {**note, "content": "Restart the worker."}
                for arguments in (search, note, brief, {**search, "source": short}):
                    error, reply = await call(client, "knowledge", **arguments, scope=PROJECT_A)
                    replies.append(("error: " if error else "") + reply)

    run(refused)
    reply, long_note, short_note, under = replies
    assert reply.startswith(f"error: source: {uri} makes more than 3 chunks, the "), reply
    assert "knowledge.mcp_max_source_chunks" in reply and "nothing was indexed" in reply
    assert long_note.startswith("error: content: stored://long makes more than 3 chunks"), long_note
    assert "nothing was stored" in long_note and not short_note.startswith("error"), short_note
    assert not under.startswith("error") and "Workers restart after the deploy" in under, under
    assert f"{EMBEDDED} {uri}" not in log.read_text()  # refused before any embedding
    # The way out the refusal names, run as it says: the command line's cap is 10,000.
    command = re.search(r"`(octobrain knowledge [^`]+)`", reply)
    assert command is not None, reply
    argv = shlex.split(command.group(1))
    assert argv[:4] == ["octobrain", "knowledge", "--scope", PROJECT_A], argv
    indexed = subprocess.run(
        octobrain_cmd(*argv[1:]),
        env=server_env(data, **PRIVATE),
        cwd=tmp_path,  # (anywhere: the command names the file and the scope)
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert indexed.returncode == 0 and "(8 chunks created" in indexed.stdout, indexed.stderr

    async def again() -> None:
        with log.open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                error, hits = await call(client, "knowledge", **search, scope=PROJECT_A)
                assert not error and "Workers restart after the deploy" in hits, hits

    run(again)
    assert EMBEDDED not in log.read_text()  # the source as the command line indexed it


def test_an_mcp_client_asking_for_progress_is_told_the_chunks_embedded(tmp_path: Path) -> None:
    # A search naming a long source answered only at the end: a client that sent a
    # progressToken heard nothing for the whole embedding (minutes with the bundled model).
    project = tmp_path / "project"
    project.mkdir()
    doc = _document(project / "handbook.md", sections=150)
    told: list[tuple[float, float | None]] = []

    async def note(progress: float, total: float | None, message: str | None) -> None:
        told.append((progress, total))

    async def body() -> None:
        async with Client(stdio_client(_server(tmp_path / "data", project))) as client:
            search = {"command": "search", "query": "worker health", "source": doc.name}
            result = await client.call_tool(
                "knowledge", {**search, "scope": PROJECT_A}, progress_callback=note
            )
            assert not result.is_error, result
            assert told, "no progress before the answer"
            told.append((-1.0, None))  # the answer's place among them
            again = await client.call_tool(
                "knowledge", {**search, "scope": PROJECT_A}, progress_callback=note
            )
            assert not again.is_error, again  # (indexed already: nothing embedded, no progress)

    run(body)
    assert_told_in_order(told, 150)


def assert_told_in_order(told: list[tuple[float, float | None]], chunks: int) -> None:
    """`told` holds progress reports then the answer's place, (-1, None): at least two, all
    before the answer, against one total of at least `chunks`, rising to it."""
    assert told[-1] == (-1.0, None), told
    done = [p for p, _ in told[:-1]]
    total = told[0][1]
    assert total is not None and total >= chunks and {t for _, t in told[:-1]} == {total}, told
    assert len(done) >= 2 and done == sorted(set(done)) and done[-1] == total, told
