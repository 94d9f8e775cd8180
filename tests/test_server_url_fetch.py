"""A URL fetched for one MCP client over HTTP, seen from the others, against real servers."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
import anyio.to_thread
from mcp import Client

from tests.server_support import PROJECT_A, call, free_port, http_server, run


@contextmanager
def held_page() -> Iterator[tuple[str, threading.Event, threading.Event]]:
    """A local web server whose one page is asked for (`asked` set) and then held, its
    answer not sent until `release` is set: a server as slow as it likes."""
    asked, release = threading.Event(), threading.Event()

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.set()
            release.wait(120)
            body = b"# Runbook\n\nRestart the ingest workers after each deploy.\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/markdown")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/runbook.md", asked, release
    finally:
        release.set()
        server.shutdown()
        server.server_close()


def test_a_slow_url_does_not_hold_other_clients_knowledge_calls(tmp_path: Path) -> None:
    # The fetch ran under the knowledge lock: while one client's URL took its time (up to
    # fetch_timeout_secs, again and again), every other client's knowledge call waited,
    # even a read of its own session note.
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    env = {
        "OCTOBRAIN_KNOWLEDGE_ALLOW_PRIVATE_HOSTS": "127.0.0.1",
        "OCTOBRAIN_KNOWLEDGE_FETCH_TIMEOUT_SECS": "120",
    }
    note = {"command": "store", "key": "plan", "content": "Rotate the staging keys on Friday."}
    with (
        held_page() as (page, asked, release),
        http_server(tmp_path / "data", f"127.0.0.1:{port}", tmp_path, **env),
    ):

        async def body() -> None:
            async with Client(url, mode="legacy") as slow, Client(url, mode="legacy") as other:
                error, reply = await call(other, "knowledge", **note, scope=PROJECT_A)
                assert not error, reply
                answers: list[tuple[bool, str]] = []

                async def read_the_page() -> None:
                    read = {"command": "read", "source": page}
                    answers.append(await call(slow, "knowledge", **read, scope=PROJECT_A))

                async with anyio.create_task_group() as group:
                    group.start_soon(read_the_page)
                    assert await anyio.to_thread.run_sync(asked.wait, 60)
                    with anyio.move_on_after(60):  # a guard: the fetch is held for good
                        answers.append(
                            await call(
                                other,
                                "knowledge",
                                command="read",
                                source="stored://plan",
                                scope=PROJECT_A,
                            )
                        )
                    release.set()  # only now does the page answer
                error, reply = answers[0]
                assert not error and "Rotate the staging keys on Friday." in reply, answers
                error, reply = answers[1]
                assert not error and "Restart the ingest workers" in reply, reply
                search = {"command": "search", "query": "ingest workers", "source": page}
                error, reply = await call(other, "knowledge", **search, scope=PROJECT_A)
                assert not error and "Restart the ingest workers" in reply, reply

        run(body)
