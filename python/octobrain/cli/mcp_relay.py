"""`octobrain mcp` through the resident service: the client asks with `mcp` (and its cwd); once
the service answers `{"mcp": true}` the socket carries the raw protocol bytes both ways and the
service's SDK server parses them (`octobrain.server.hosted`). The client falls back before
relaying its first byte. Standard library only."""

from __future__ import annotations

import contextlib
import os
import select
import socket
import sys
import time

from octobrain.cli.service_client import PROTOCOL, build_id, connect, spawn
from octobrain.cli.service_run import Fallback, handed_over
from octobrain.cli.service_settings import Settings

EXIT_GRACE_S = 0.8  # as the stdio server's (octobrain.server.wire), without importing it


def run_mcp(settings: Settings) -> int:
    """Relay this process's stdio to an MCP session the service hosts; its exit code. Raises
    `Fallback` when the service does not take the session (nothing was relayed yet)."""
    channel = connect(settings)
    if channel is None:
        spawn(settings)
        raise Fallback
    try:
        channel.send({"op": "mcp", "protocol": PROTOCOL, "build": build_id(), "cwd": os.getcwd()})
        handed_over(channel, settings, lambda: spawn(settings, successor=True))
        if channel.recv(settings.wait_seconds) != {"mcp": True}:
            raise Fallback
    except (OSError, ValueError) as exc:
        channel.sock.close()
        raise Fallback from exc
    except Fallback:
        channel.sock.close()
        raise
    return _relay(channel.sock, channel.pending())


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _relay(sock: socket.socket, first: bytes) -> int:
    """Copy stdin to the socket and the socket to stdout until the session ends. After stdin
    closes, the service gets `EXIT_GRACE_S` to answer what is running, as the stdio server."""
    import threading

    input_done = threading.Event()  # the pump has stopped, for whatever reason
    # The client closed stdin: set before the service is told, so the end of the session the
    # service then sends is never taken for the service ending it.
    stdin_ended = threading.Event()
    # The socket stays blocking: the pump's sends wait for the service to take in a burst. (A
    # timeout on the socket, for the receiving loop below, made the file non-blocking for the
    # pump too, so a send the service was slow to drain failed and ended the session.)
    sock.settimeout(None)

    def pump() -> None:
        try:
            try:
                fd = sys.stdin.fileno() if sys.stdin is not None else -1
            except (OSError, ValueError):
                fd = -1
            while True:
                try:
                    chunk = os.read(fd, 1 << 16) if fd >= 0 else b""
                except OSError:
                    chunk = b""  # stdin unreadable: as closed
                if not chunk:
                    stdin_ended.set()
                    break
                sock.sendall(chunk)
        except OSError:
            pass  # the service gone: the session ends
        finally:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_WR)
            input_done.set()

    threading.Thread(target=pump, daemon=True).start()
    out = sys.stdout.fileno()
    try:
        if first:
            _write_all(out, first)
        deadline: float | None = None
        while True:
            readable, _, _ = select.select([sock], [], [], 0.1)
            if not readable:
                if input_done.is_set():
                    deadline = deadline or time.monotonic() + EXIT_GRACE_S
                    if time.monotonic() > deadline:
                        return 0
                continue
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            _write_all(out, chunk)
    except OSError:
        pass  # the client closed our stdout, or the service vanished
    finally:
        sock.close()
    if stdin_ended.is_set():
        return 0
    sys.stderr.write("error: service: the octobrain service ended this MCP session\n")
    return 1
