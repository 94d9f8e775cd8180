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
import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from octobrain.config import Config
from octobrain.embed.base import EMBED_BATCH
from octobrain.embed.factory import get_embedder
from octobrain.errors import NotStarted, Stopped
from octobrain.knowledge.store import KnowledgeStore
from octobrain.server import handlers, wire
from octobrain.server.app import OctobrainServer, _limiter, serve_stdio
from tests.server_support import (
    PROJECT_A,
    call,
    free_port,
    hash_pool,
    http_server,
    initialize_message,
    octobrain_cmd,
    run,
    server_env,
    server_for,
    workspace,
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
    config = Config()

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


@pytest.mark.parametrize(("read", "runs"), [(True, []), (False, ["ran"])])
def test_a_read_cancelled_while_it_waits_for_the_pool_lock_is_not_run(
    tmp_path: Path, read: bool, runs: list[str]
) -> None:
    # A `remember` or briefing waiting behind a long call ran once the lock was free, for a
    # client that had cancelled it or gone (over HTTP, hung up), recording accesses to the
    # memories nobody was shown. A write, once sent, still runs to its end.
    lock, ran = threading.Lock(), []

    class LockedPool:
        default_session_id = "locked"
        config = Config()

        def call(self, scope: str, workdir: Any, fn: Any, session_id: str, role: str) -> Any:
            with lock:
                return fn("brain")

    server = OctobrainServer(LockedPool(), workspace(tmp_path, PROJECT_A))  # type: ignore[arg-type]

    async def body() -> None:
        lock.acquire()  # a long call holds the pool
        async with anyio.create_task_group() as group:
            work = partial(server._in_pool, PROJECT_A, None, lambda brain: ran.append("ran"))
            group.start_soon(partial(work, "", "", read=read))
            while _limiter("memory").borrowed_tokens == 0:  # its thread waits for the lock
                await anyio.sleep(0)
            group.cancel_scope.cancel()  # the client cancels, or the guard: its client is gone
            with anyio.CancelScope(shield=True):
                for _ in range(5):  # (the call sees its cancel)
                    await anyio.sleep(0)
            lock.release()

    run(body)
    assert ran == runs


def test_an_index_whose_http_client_hung_up_stops_and_writes_nothing(tmp_path: Path) -> None:
    # A POST whose client closed the connection ended, but its call ran on to its end: the
    # whole document embedded and committed for no one, the knowledge lock held meanwhile.
    project = tmp_path / "project"
    project.mkdir()
    big = _long_document(project / "handbook.md")
    data, port = tmp_path / "data", free_port()
    env = {"OCTOBRAIN_KNOWLEDGE_ALLOW_PATHS": str(project),
           "OCTOBRAIN_KNOWLEDGE_MCP_MAX_SOURCE_CHUNKS": "10000"}  # fmt: skip
    url = f"http://127.0.0.1:{port}/mcp"
    headers = {"accept": "application/json, text/event-stream", "host": f"127.0.0.1:{port}"}
    with http_server(data, f"127.0.0.1:{port}", project, **env):
        opened = httpx.post(url, json=initialize_message(), headers=headers, timeout=30)
        headers["mcp-session-id"] = opened.headers["mcp-session-id"]
        ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        httpx.post(url, json=ready, headers=headers, timeout=30)
        search = {"command": "search", "query": "worker health", "source": str(big)}
        params = {"name": "knowledge", "arguments": {**search, "scope": PROJECT_A},
                  "_meta": {"progressToken": "p"}}  # fmt: skip
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}
        with (
            httpx.Client(timeout=120) as client,
            client.stream("POST", url, json=call, headers=headers) as answer,
        ):
            next(line for line in answer.iter_lines() if "notifications/progress" in line)
        # the client hung up mid-embedding; a note waits for the knowledge lock the index held
        note = {"command": "store", "key": "after", "content": "Hung up on the index."}
        params = {"name": "knowledge", "arguments": {**note, "scope": PROJECT_A}}
        stored = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params}
        said = httpx.post(url, json=stored, headers=headers, timeout=120).text
        assert '"isError":false' in said.replace(" ", ""), said
    embedder = get_embedder("hash:64")
    store = KnowledgeStore(data / "db", embedder.model_id, embedder.dim)
    assert [row["uri"] for row in store.scan_sources()] == ["stored://after"]
    assert store.count_chunks() == 1  # the note's: no chunk of the document


def test_a_knowledge_read_whose_client_went_while_it_waited_for_the_lock_is_not_run(
    tmp_path: Path,
) -> None:
    pool, gone = hash_pool(tmp_path / "db"), threading.Event()
    gone.set()  # its client cancelled it, or hung up, while it waited for the knowledge lock

    def command(**arguments: Any) -> Any:
        work = partial(handlers.knowledge, arguments=arguments)
        return pool.call_knowledge(PROJECT_A, None, "", work, stop=gone)

    for read in ({"command": "match", "pattern": "deploy"}, {"command": "search", "query": "x"}):
        with pytest.raises(NotStarted):
            command(**read)
