"""A knowledge call its MCP client cancels stops at the next batch of its embedding, writing
nothing: the real server process over stdio, the SDK's own client sending the cancel."""

from __future__ import annotations

import json
import os
import threading
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from octobrain.embed.base import EMBED_BATCH
from octobrain.embed.factory import get_embedder
from octobrain.errors import Stopped
from octobrain.knowledge.store import KnowledgeStore
from octobrain.server import handlers, wire
from octobrain.server.app import serve_stdio
from tests.server_support import (
    PROJECT_A,
    call,
    hash_pool,
    initialize_message,
    octobrain_cmd,
    run,
    server_env,
    server_for,
)


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


class _HeldPool:
    """A pool whose calls wait until `release` is set, each noted in `events` as it ends."""

    default_session_id = "held"

    def __init__(self, events: list[str]) -> None:
        self.events = events
        self.entered = threading.Semaphore(0)
        self.release = threading.Event()

    def call(self, *args: Any, **kwargs: Any) -> str:
        self.entered.release()
        self.release.wait(60)
        self.events.append("work ended")
        return "briefing"


def _briefing_read(request_id: int, cancel: bool = True) -> list[dict[str, Any]]:
    """A `resources/read` of the briefing, then (`cancel`) its cancel."""
    read = {"jsonrpc": "2.0", "id": request_id, "method": "resources/read",
            "params": {"uri": "octobrain://brief"}}  # fmt: skip
    cancelled = {"requestId": request_id}
    return [read] + cancel * [
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancelled}
    ]


class _HeldSession:
    """An in-process stdio session of a server over `_HeldPool`, sent `messages` up front; it
    notes in `events` when the ping (id 99) is answered."""

    def __init__(self, tmp: Path, messages: list[dict[str, Any]]) -> None:
        self.events: list[str] = []
        self.pool = _HeldPool(self.events)
        self._server = server_for(self.pool, tmp, PROJECT_A)  # type: ignore[arg-type]
        read_end, self._write_end = os.pipe()
        self._reader = os.fdopen(read_end, "rb")
        opened = [initialize_message(), {"jsonrpc": "2.0", "method": "notifications/initialized"}]
        os.write(self._write_end, b"".join(json.dumps(m).encode() + b"\n" for m in opened))
        os.write(self._write_end, b"".join(json.dumps(m).encode() + b"\n" for m in messages))

    def start(self, group: anyio.abc.TaskGroup) -> None:
        self.pinged = anyio.Event()
        stdin = wire.CappedStdin(self._reader, on_end=lambda: None)
        group.start_soon(partial(serve_stdio, self._server, stdin=stdin, stdout=self))

    async def write(self, text: str) -> None:  # (the session's stdout)
        if json.loads(text).get("id") == 99:
            self.events.append("ping answered")
            self.pinged.set()

    async def flush(self) -> None:
        pass

    def end(self) -> None:
        """The client closes its input; once the session has ended, the server's end too."""
        os.close(self._write_end)

    def close(self) -> None:
        self._reader.close()


def test_a_cancelled_call_keeps_its_place_in_flight_until_its_work_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cancel freed its call's place at once, while the call's worker thread ran on (a thread
    # cannot be stopped): a client sending read, cancel, read, cancel… had as many briefings
    # going as threads would take (40), past the 32 a session may have in flight.
    monkeypatch.setattr(wire, "MAX_IN_FLIGHT", 2)
    ping = {"jsonrpc": "2.0", "id": 99, "method": "ping"}
    session = _HeldSession(tmp_path, [*_briefing_read(2), *_briefing_read(3), ping])

    async def body() -> None:
        async with anyio.create_task_group() as group:
            session.start(group)
            for _ in range(2):  # both briefings are at work, both cancelled
                await anyio.to_thread.run_sync(session.pool.entered.acquire)
            with anyio.move_on_after(2):  # (the ping was answered at once)
                await session.pinged.wait()
            session.pool.release.set()
            with anyio.fail_after(60):
                await session.pinged.wait()
            session.end()

    run(body)
    session.close()
    events = session.events
    assert events[0] == "work ended", events  # the ping waited for a place
    assert events.count("work ended") == 2 and "ping answered" in events


def test_briefings_being_read_take_a_memory_calls_threads_not_stdins(tmp_path: Path) -> None:
    # A briefing ran in anyio's shared threads, where stdin is read: 40 reads of it waiting on
    # the store took them all (and ran, cancelled or not), and the session read nothing more.
    reads = [m for i in range(10) for m in _briefing_read(10 + i, cancel=False)]
    session = _HeldSession(tmp_path, reads)
    entered = 0

    async def body() -> None:
        nonlocal entered
        async with anyio.create_task_group() as group:
            session.start(group)
            with anyio.move_on_after(2):  # (all ten at once, each in a thread of its own)
                while entered < 10:
                    taken = session.pool.entered.acquire
                    await anyio.to_thread.run_sync(taken, abandon_on_cancel=True)
                    entered += 1
            session.pool.release.set()
            session.end()

    run(body)
    session.close()
    assert entered == 4  # the memory calls' threads (app._THREADS)
