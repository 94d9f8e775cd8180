"""Startup latency of `octobrain mcp` over stdio, measured from process start.

Spawns the server with a fresh data dir, speaks raw JSON-RPC over its pipes, and reports the
median of N runs for: process start → `tools/list` response, and process start → the first
`remember` result (which loads the model and opens LanceDB). A few memories are stored by a
first server process beforehand, so the measured `remember` searches a real, non-empty store.
The resident service is off here (`OCTOBRAIN_SERVICE_ENABLED=0`): this is the in-process
server every session falls back to; `octobrain bench cold` times the hosted one too.

    python benches/mcp_startup.py [--runs 5] [--model minilm]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mcp_types.version import LATEST_HANDSHAKE_VERSION

from child_env import child_env

FACTS = [
    ("Release process", "Releases are cut from main by tagging vX.Y.Z; CI publishes wheels."),
    ("Database choice", "Postgres 16 is the primary database; Redis only caches sessions."),
    ("Rate limiting", "The API uses a token bucket per key: 100 requests per minute."),
]


def _request(i: int, method: str, params: dict[str, Any] | None = None) -> bytes:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": i, "method": method}
    if params is not None:
        msg["params"] = params
    return json.dumps(msg).encode() + b"\n"


def _initialize() -> bytes:
    return _request(
        0,
        "initialize",
        {
            "protocolVersion": LATEST_HANDSHAKE_VERSION,
            "capabilities": {"experimental": {"session": {"scope": "github.com/acme/bench"}}},
            "clientInfo": {"name": "bench", "version": "0"},
        },
    )


class Session:
    """One server process driven over raw stdio."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.start = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "octobrain", "mcp"],
            env=env,
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.ask(_initialize())
        self.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

    def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line)
        self.proc.stdin.flush()

    def ask(self, line: bytes) -> dict[str, Any]:
        self.send(line)
        assert self.proc.stdout is not None
        reply: dict[str, Any] = json.loads(self.proc.stdout.readline())
        if "error" in reply or reply.get("result", {}).get("isError"):
            raise RuntimeError(f"server error: {reply}")
        return reply

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def call(i: int, name: str, arguments: dict[str, Any]) -> bytes:
    return _request(i, "tools/call", {"name": name, "arguments": arguments})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--model", default="minilm", help="embedding model (default: bundled)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        env = child_env(Path(tmp), args.model)  # (no service left behind by the benchmark)
        seed = Session(env, Path(tmp))
        for i, (title, content) in enumerate(FACTS, 1):
            seed.ask(call(i, "memorize", {"title": title, "content": content}))
        seed.close()

        to_list, to_remember = [], []
        for _ in range(args.runs):
            session = Session(env, Path(tmp))
            session.ask(_request(1, "tools/list"))
            to_list.append(session.elapsed())
            reply = session.ask(call(2, "remember", {"query": "how do we publish a release"}))
            to_remember.append(session.elapsed())
            assert "Release process" in reply["result"]["content"][0]["text"]
            session.close()

    print(f"octobrain mcp (stdio, model {args.model}, {args.runs} runs, medians):")
    print(f"  process start -> tools/list response:    {statistics.median(to_list):.2f} s")
    print(f"  process start -> first remember result:  {statistics.median(to_remember):.2f} s")


if __name__ == "__main__":
    main()
