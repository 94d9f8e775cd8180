"""MCP sessions hosted by the resident service: `octobrain mcp` (stdio) relays its raw stdin and
stdout bytes over the service's Unix socket, and the SDK's server parses and answers them here.

Each connection is one session with its own event loop (in its own thread), the SDK server built
for the client's working directory (its scope lock, its project list, where local files may be
read) and the caps of the stdio server; the Brains are the service's, shared with the CLI
commands it runs. A client closing its stdin ends its session only: a call still running gets
`EXIT_GRACE_S`, then the session is cancelled and the connection closed. A client that leaves
a line of output unread for `mcp.unread_seconds` has it dropped and its session ended: it held the
session's places, and a thread of the service, for as long as it stayed connected.
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import uuid
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from octobrain.server.app import OctobrainServer, serve_stdio
from octobrain.server.scoping import Workspace
from octobrain.server.wire import EXIT_GRACE_S, CappedStdin

if TYPE_CHECKING:
    from octobrain.server.pool import BrainPool

log = logging.getLogger(__name__)


class _SocketOut:
    """The session's stdout: each protocol line sent whole to the relaying client, or, when
    the client reads none of it for `unread` seconds, dropped and the session ended."""

    def __init__(self, sock: socket.socket, unread: float) -> None:
        self._sock = sock
        self._unread = unread
        self._dropped = False

    async def write(self, text: str) -> None:
        if not self._dropped:
            await anyio.to_thread.run_sync(self._send, text.encode("utf-8"))

    def _send(self, data: bytes) -> None:
        # Without waiting in `send` (the socket blocks, for the session's reads): each wait
        # for room is bounded, and a line cut there cannot be finished, so the session ends.
        ready = select.poll()
        ready.register(self._sock, select.POLLOUT)
        view = memoryview(data)
        while view:
            if not ready.poll(self._unread * 1000):
                log.warning(
                    "an answer was dropped and its MCP session ended: its client left it unread "
                    "for %g s (mcp.unread_seconds)",
                    self._unread,
                )
                self._dropped = True
                self._sock.shutdown(socket.SHUT_RDWR)  # (its reads end: the session ends)
                return
            with contextlib.suppress(BlockingIOError):
                view = view[self._sock.send(view, socket.MSG_DONTWAIT) :]

    async def flush(self) -> None:
        """Nothing buffered: `write` sends."""


def prepare_session(pool: BrainPool, cwd: str) -> OctobrainServer:
    """The server a client in `cwd` gets, exactly as `octobrain mcp` started there would build
    it (raises OSError when `cwd` cannot be read: the client then serves itself)."""
    return OctobrainServer(pool, Workspace.scan(cwd), default_session_id=uuid.uuid4().hex)


def host_session(octo: OctobrainServer, sock: socket.socket) -> None:
    """Serve one relayed session on `sock` until the client's input ends (blocking)."""
    sock.settimeout(None)
    reader = sock.makefile("rb")

    async def main() -> None:
        with anyio.CancelScope() as scope:

            def end() -> None:  # the client closed its stdin: finish, but not forever
                scope.deadline = anyio.current_time() + EXIT_GRACE_S

            stdin = CappedStdin(reader, on_end=end)
            unread = octo.pool.config.mcp.unread_seconds
            await serve_stdio(octo.server, stdin=stdin, stdout=_SocketOut(sock, unread))

    try:
        anyio.run(main)
    except Exception:  # the client went away mid-answer; the service carries on
        log.info("MCP session ended with an error", exc_info=True)
    finally:
        reader.close()
