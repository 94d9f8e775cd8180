"""What the tests of the real transports share: a stdio server's parameters, a raw stdio
connection to write lines to, and an HTTP session opened by hand."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
from mcp import StdioServerParameters
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from tests.server_support import (
    initialize_message,
    octobrain_cmd,
    server_env,
)

FACT = {
    "title": "Release process",
    "content": "Releases are cut from main by tagging vX.Y.Z; CI publishes the wheels.",
}


def stdio_params(data_dir: Path, cwd: Path, model: str = "hash:64") -> StdioServerParameters:
    cmd = octobrain_cmd("mcp")
    return StdioServerParameters(
        command=cmd[0], args=cmd[1:], env=server_env(data_dir, model), cwd=cwd
    )


@contextlib.contextmanager
def raw_stdio(tmp_path: Path) -> Iterator[tuple[Callable[[str], None], Callable[[], Any]]]:
    """An in-process `octobrain mcp` over stdio driven line by line: (send a line, read the
    next answer). Lines read from the pipe wait here for their turn, not in a buffered reader
    that `select` cannot see; the server is killed at the end."""
    import select

    proc = subprocess.Popen(
        octobrain_cmd("mcp"),
        cwd=tmp_path,
        env=server_env(tmp_path / "data", OCTOBRAIN_SERVICE_ENABLED="0"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout
    pending = bytearray()  # read from the pipe, not yet a whole line

    def send(line: str) -> None:
        stdin.write(line.encode() + b"\n")
        stdin.flush()

    def answer() -> Any:
        while b"\n" not in pending:
            ready, _, _ = select.select([stdout], [], [], 60)
            assert ready, "no answer within 60 s"
            chunk = os.read(stdout.fileno(), 1 << 16)
            assert chunk, "the server closed its stdout"
            pending.extend(chunk)
        line, _, rest = bytes(pending).partition(b"\n")
        pending[:] = rest
        return json.loads(line)

    try:
        yield send, answer
    finally:
        proc.kill()
        proc.communicate()


def open_session(url: str, headers: dict[str, str]) -> dict[str, str]:
    """A handshake-era session opened over raw HTTP: the headers its requests carry."""
    version = {"mcp-protocol-version": LATEST_HANDSHAKE_VERSION}
    answer = httpx.post(url, json=initialize_message(), headers={**headers, **version}, timeout=30)
    assert answer.status_code == 200, answer.text
    session = {**headers, **version, "mcp-session-id": answer.headers["mcp-session-id"]}
    done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert httpx.post(url, json=done, headers=session, timeout=30).status_code == 202
    return session
