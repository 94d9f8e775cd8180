"""A knowledge call its MCP client cancels stops at the next batch of its embedding, writing
nothing: the real server process over stdio, the SDK's own client sending the cancel."""

from __future__ import annotations

import threading
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from octobrain.embed.base import EMBED_BATCH
from octobrain.embed.factory import get_embedder
from octobrain.errors import Stopped
from octobrain.knowledge.store import KnowledgeStore
from octobrain.server import handlers
from tests.server_support import PROJECT_A, call, hash_pool, octobrain_cmd, run, server_env


def _long_document(path: Path, sections: int = 400) -> Path:
    """About 3.6 MB of Markdown: some 4,000 chunks, seconds of embedding."""
    body = " ".join(
        f"Worker {n} restarts after the deploy and reports its health." for n in range(15)
    )
    parts = [f"## Section {s}\n\n" + "\n\n".join([body] * 10) for s in range(sections)]
    path.write_text("# Operations handbook\n\n" + "\n\n".join(parts) + "\n")
    return path


def test_a_cancelled_index_stops_and_writes_nothing(tmp_path: Path) -> None:
    # The call ran in a worker thread the SDK's cancel could not reach: the whole document was
    # embedded and committed for a client that no longer wanted it, every other knowledge
    # call of the server waiting behind it.
    project = tmp_path / "project"
    project.mkdir()
    big = _long_document(project / "handbook.md")
    data = tmp_path / "data"
    log = tmp_path / "server.log"
    cmd = octobrain_cmd("mcp", "-v")
    env = server_env(data, OCTOBRAIN_KNOWLEDGE_MCP_MAX_SOURCE_CHUNKS="10000")  # (4,000 chunks)
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=env, cwd=project)

    async def body() -> None:
        with log.open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                index = {"command": "search", "query": "worker health", "source": big.name}

                async def search() -> None:
                    await call(client, "knowledge", **index, scope=PROJECT_A)

                async with anyio.create_task_group() as group:
                    group.start_soon(search)
                    with anyio.fail_after(120):  # a guard: the embedding never started
                        while "embedding " not in log.read_text():
                            await anyio.sleep(0.05)
                    group.cancel_scope.cancel()  # the SDK sends notifications/cancelled
                note = {"command": "store", "key": "after", "content": "Cancelled the index."}
                with anyio.fail_after(120):  # (waits for the knowledge lock the index held)
                    error, reply = await call(client, "knowledge", **note, scope=PROJECT_A)
                assert not error, reply

    run(body)
    embedder = get_embedder("hash:64")
    store = KnowledgeStore(data / "db", embedder.model_id, embedder.dim)
    assert [row["uri"] for row in store.scan_sources()] == ["stored://after"]
    assert store.count_chunks() == 1  # the note's: no chunk of the document, none orphaned
    said = log.read_text()
    assert "chunks embedded, nothing written" in said, said[-2000:]


def test_a_cancelled_ingest_stops_embedding_between_batches(tmp_path: Path) -> None:
    # `ingest` embedded a conversation's turns in one go, outside the pool lock: a client that
    # cancelled a 500-turn call (seconds with the bundled model) kept the one embedding place
    # every other ingest waits for until all of it was done. The same stop as a knowledge call.
    pool = hash_pool(tmp_path / "db")
    turns = [{"speaker": "ann", "text": f"Deploy step {i} went fine."} for i in range(200)]
    arguments = {"conversation": "deploys", "turns": turns}
    plan = pool.call(PROJECT_A, None, partial(handlers.plan_ingest, arguments=arguments))
    stop, calls = threading.Event(), []
    embedder = plan.embedder

    class Cancelled:  # the client cancels while the first batch is being embedded
        def embed_documents(self, texts: list[str]) -> Any:
            calls.append(len(texts))
            stop.set()
            return embedder.embed_documents(texts)

    plan.embedder = Cancelled()  # type: ignore[assignment]
    with pytest.raises(Stopped, match=f"{EMBED_BATCH} of 200 turns embedded, nothing written"):
        pool.embed(partial(plan.embed, stop))
    assert calls == [EMBED_BATCH]
    assert pool.call(PROJECT_A, None, lambda brain: brain.recent(10)) == []
