"""An MCP knowledge call's progress over streamable HTTP, and a client that stops reading while
it is told: the real server in a subprocess or the resident service's session host, real
clients."""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, cast

import pytest
from mcp import Client

from octobrain.config import Config, EmbeddingConfig, McpConfig
from octobrain.knowledge import generation
from octobrain.server import BrainPool, hosted
from octobrain.server.hosted import host_session, prepare_session
from octobrain.server.progress import PROGRESS_TOKEN_BYTES
from tests.server_support import (
    PROJECT_A,
    free_port,
    hash_pool,
    http_server,
    initialize_message,
    run,
)
from tests.test_server_knowledge_cap import _document, assert_told_in_order


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # a handshake session; one per request
def test_an_http_client_asking_for_progress_is_told_the_chunks_embedded(
    tmp_path: Path, mode: str
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    doc = _document(project / "handbook.md", sections=150)
    port = free_port()
    told: list[tuple[float, float | None]] = []

    async def note(progress: float, total: float | None, message: str | None) -> None:
        told.append((progress, total))

    async def body() -> None:
        async with Client(f"http://127.0.0.1:{port}/mcp", mode=mode) as client:
            search = {"command": "search", "query": "worker health", "source": str(doc)}
            result = await client.call_tool(
                "knowledge", {**search, "scope": PROJECT_A}, progress_callback=note
            )
            assert not result.is_error, result
            told.append((-1.0, None))  # the answer's place among them

    # (an HTTP server reads local files only under knowledge.allow_paths)
    allowed = {"OCTOBRAIN_KNOWLEDGE_ALLOW_PATHS": str(project)}
    with http_server(tmp_path / "data", f"127.0.0.1:{port}", project, **allowed):
        run(body)
    assert_told_in_order(told, 150)


def _lines(sock: socket.socket, *messages: dict[str, Any]) -> None:
    sock.sendall(b"".join(json.dumps(m).encode() + b"\n" for m in messages))


def _answer(reader: IO[bytes], request_id: int) -> dict[str, Any]:
    """The answer to `request_id`, the lines before it (notifications) passed over."""
    while True:
        message = json.loads(reader.readline())
        if message.get("id") == request_id and "method" not in message:
            return cast(dict[str, Any], message)


def _search(request_id: int, source: str, progress: str | None = None) -> dict[str, Any]:
    """A `knowledge search` naming `source`, asking for progress against `progress` if given."""
    search = {"command": "search", "query": "worker health", "source": source}
    params: dict[str, Any] = {"name": "knowledge", "arguments": {**search, "scope": PROJECT_A}}
    if progress is not None:
        params["_meta"] = {"progressToken": progress}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


@contextmanager
def _hosted(pool: BrainPool, cwd: Path) -> Iterator[socket.socket]:
    """A session the resident service hosts, as `octobrain mcp` in `cwd` gets one, initialized:
    the client's end of its socket (its sending buffer small: a client not reading soon
    holds the session's writes)."""
    ours, theirs = socket.socketpair()
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    session = prepare_session(pool, str(cwd))
    threading.Thread(target=host_session, args=(session, theirs), daemon=True).start()
    ours.settimeout(60)  # (a guard: a session that never answers fails the test, not hangs it)
    try:
        _lines(ours, initialize_message())
        with ours.makefile("rb") as reader:
            _answer(reader, 1)
        _lines(ours, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        yield ours
    finally:
        ours.close()  # (its session ends: end of input)
        theirs.close()


@contextmanager
def _logged(name: str, text: str) -> Iterator[threading.Event]:
    """An event set once logger `name` logs a line (INFO or above) holding `text`."""
    seen = threading.Event()

    class Seen(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if text in record.getMessage():
                seen.set()

    logger, handler = logging.getLogger(name), Seen()
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield seen
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _listings(count: int) -> list[dict[str, Any]]:
    """`tools/list` requests, ids 2 on: answers of tens of kB each."""
    return [{"jsonrpc": "2.0", "id": i, "method": "tools/list"} for i in range(2, 2 + count)]


def test_a_client_that_stops_reading_while_told_progress_holds_no_other_sessions_call(
    tmp_path: Path,
) -> None:
    # Each progress notification was sent holding the knowledge lock, the worker thread
    # waiting until it was written: a client (of the resident service, which hosts every
    # `octobrain mcp` session on one store) that stopped reading its output held the lock for
    # good, and every other session's knowledge call, and the CLI's, waited forever.
    project = tmp_path / "project"
    project.mkdir()
    long, short = _document(project / "handbook.md", 150), _document(project / "short.md", 2)
    pool = hash_pool(tmp_path / "db")
    # (logged once its embedding is under way, the lock held)
    with (
        _logged(generation.__name__, long.as_uri()) as embedding,
        _hosted(pool, project) as stalled,
        _hosted(pool, project) as other,
    ):
        # Answers it never reads (tens of kB each) fill its socket before its search starts.
        _lines(stalled, *_listings(20), _search(22, long.name, progress="handbook"))
        assert embedding.wait(60)  # (its answers, and so its progress, unread from here)
        _lines(other, _search(2, short.name))
        with other.makefile("rb") as reader:
            answer = _answer(reader, 2)
        assert answer["result"]["isError"] is False, answer
        assert "Workers restart after the deploy" in answer["result"]["content"][0]["text"]


def test_a_hosted_client_that_reads_none_of_its_answers_has_its_session_ended(
    tmp_path: Path,
) -> None:
    # Its answers waited for it as long as it stayed connected: the session's places in
    # flight taken, so nothing more of its input read, and a thread of the service blocked
    # in each write, for good. How long, `mcp.unread_seconds`, is the user's setting (it was a
    # constant of 30 s).
    config = Config(embedding=EmbeddingConfig(model="hash:64"), mcp=McpConfig(unread_seconds=0.5))
    with (
        _logged(hosted.__name__, "left it unread for 0.5 s (mcp.unread_seconds)") as dropped,
        _hosted(BrainPool(config, uri=tmp_path / "db"), tmp_path) as stalled,
    ):
        _lines(stalled, *_listings(40))
        assert dropped.wait(60)
        while stalled.recv(1 << 16):  # what was sent, then the end: its session ended
            pass


def test_an_over_long_progress_token_is_refused_not_sent_back_in_each_notification(
    tmp_path: Path,
) -> None:
    # A 900 kB progressToken came back in every progress notification of the call (up to ~17:
    # 15 MB sent to the client for a request of 1 MB).
    doc = _document(tmp_path / "handbook.md", 150)
    with _hosted(hash_pool(tmp_path / "db"), tmp_path) as client:
        _lines(client, _search(2, doc.name, progress="t" * 900_000))
        _lines(client, _search(3, doc.name, progress="t" * PROGRESS_TOKEN_BYTES))
        with client.makefile("rb") as reader:
            lines = [reader.readline()]
            while len([m for m in map(json.loads, lines) if "id" in m]) < 2:
                lines.append(reader.readline())
    messages = [json.loads(line) for line in lines]
    answers = {m["id"]: m["result"] for m in messages if "id" in m}
    assert answers[2]["isError"] and answers[2]["content"][0]["text"] == (
        "_meta.progressToken: 900,000 bytes, over the 256 this server sends back in each "
        "progress notification; send a shorter token, or none for no progress"
    )
    told = [m["params"]["progressToken"] for m in messages if "id" not in m]
    assert told and set(told) == {"t" * PROGRESS_TOKEN_BYTES}, len(told)
    assert answers[3]["isError"] is False, answers[3]
    assert sum(map(len, lines)) < 100_000
