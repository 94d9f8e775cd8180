"""Helpers for the MCP server tests: servers on temp stores, clients, subprocesses."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientSession
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from octobrain.config import Config, EmbeddingConfig
from octobrain.server import BrainPool, ScopeLock, Workspace, build_server

PROJECT_A = "github.com/acme/api"
PROJECT_B = "github.com/acme/web"


def initialize_message(capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    """The raw handshake-era `initialize` request a client sends first (id 1)."""
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": LATEST_HANDSHAKE_VERSION,
            "capabilities": capabilities or {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }


def hash_pool(db: Path) -> BrainPool:
    """A pool on a temp store with the fast deterministic hash embedder."""
    return BrainPool(Config(embedding=EmbeddingConfig(model="hash:64")), uri=db)


def briefed_pool(db: Path) -> BrainPool:
    """`hash_pool` whose `PROJECT_A` holds one decision ("Use ruff"), for its briefing."""
    pool = hash_pool(db)
    pool.call(
        PROJECT_A,
        None,
        lambda b: b.memorize(
            "Use ruff", "Lint and format with ruff; no black.", memory_type="decision"
        ),
    )
    return pool


def workspace(tmp: Path, locked_to: str | None = None) -> Workspace:
    """A workspace whose cwd is (or is not) a git repository of `locked_to`."""
    lock = ScopeLock(locked_to, "server working directory", workdir=tmp) if locked_to else None
    return Workspace(tmp, lock, [])


def server_for(pool: BrainPool, tmp: Path, locked_to: str | None = None) -> Any:
    return build_server(pool, workspace(tmp, locked_to))


def run(fn: Callable[[], Awaitable[None]]) -> None:
    anyio.run(fn)


def text(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


def advertise_session(monkeypatch: pytest.MonkeyPatch, session: dict[str, Any]) -> None:
    """Make every client in this test send `experimental.session` (the SDK has no option)."""
    original = ClientSession._build_capabilities

    def build(self: ClientSession, version: str) -> Any:
        caps = original(self, version)
        return caps.model_copy(update={"experimental": {"session": session}})

    monkeypatch.setattr(ClientSession, "_build_capabilities", build)


async def call(client: Client, tool: str, **arguments: Any) -> tuple[bool, str]:
    """(is_error, text) of one tool call."""
    result = await client.call_tool(tool, arguments)
    return result.is_error, text(result)


def memory_id(reply: str) -> str:
    assert reply.startswith("Memory stored: "), reply
    return reply.split("\n", 1)[0].removeprefix("Memory stored: ").strip()


# ---- subprocesses ---------------------------------------------------------------------------


def outside_env() -> dict[str, str]:
    """This process's environment without its OCTOBRAIN_* settings, except the resident-service
    switch tests/conftest.py sets: a subprocess must not leave a warm service behind that answers
    the next command from memory (a damaged or full store would then look healthy)."""
    keep = {"OCTOBRAIN_SERVICE_ENABLED"}
    return {k: v for k, v in os.environ.items() if not k.startswith("OCTOBRAIN_") or k in keep}


def server_env(data_dir: Path, model: str = "hash:64", **extra: str) -> dict[str, str]:
    env = outside_env()
    env.update(OCTOBRAIN_DATA_DIR=str(data_dir), OCTOBRAIN_EMBEDDING_MODEL=model, **extra)
    return env


def octobrain_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "octobrain", *args]


def refused_start(tmp: Path, *args: str, **env: str) -> str:
    """The stderr of `octobrain mcp ARGS` (run in `tmp`, data under `tmp/data`), asserting it
    refused to start with exit 2. A server that started runs until killed: the call fails at
    its timeout instead."""
    refused = subprocess.run(
        octobrain_cmd("mcp", *args),
        env=server_env(tmp / "data", **env),
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2, refused.stderr
    return refused.stderr


def stdio_params(tmp: Path, **env: str) -> StdioServerParameters:
    """`octobrain mcp` over stdio in `tmp` (data under `tmp/data`, served in-process) for the
    SDK's `stdio_client`."""
    cmd = octobrain_cmd("mcp")
    env = server_env(tmp / "data", OCTOBRAIN_SERVICE_ENABLED="0", **env)
    return StdioServerParameters(command=cmd[0], args=cmd[1:], env=env, cwd=tmp)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def http_server(
    data_dir: Path, bind: str, cwd: Path, *, open_files: int | None = None, **env: str
) -> Iterator[subprocess.Popen[bytes]]:
    """`octobrain mcp --bind` in a subprocess, up and accepting connections (`open_files`:
    the descriptors it may open, its soft `RLIMIT_NOFILE`)."""
    port = int(bind.rsplit(":", 1)[1])

    def limited() -> None:
        import resource

        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, hard))

    proc = subprocess.Popen(
        octobrain_cmd("mcp", "--bind", bind),
        env=server_env(data_dir, **env),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=None if open_files is None else limited,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"server exited: {proc.stderr.read().decode()}")  # type: ignore[union-attr]
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
