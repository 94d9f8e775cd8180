"""Do other clients wait while one client ingests a long conversation?

    .venv/bin/python benches/ingest_alongside.py [--model hash:384] [--turns 500] [--json F]

Starts `octobrain mcp --bind` (the in-process HTTP server, where every client shares one pool)
on a temp store, then over two real MCP clients: one sends an `ingest` at its caps (500 turns,
just under 1 MB of text), the other calls `remember` without pause until the ingest has
answered. Prints the ingest's wall time, the `remember` latencies before it (p50) and during it
(count, p50, max). Default model: the bundled one, whose embedding is what takes the time.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.server_support import free_port, http_server  # noqa: E402

SCOPE = "bench/ingest-alongside"
# fmt: off
WORDS = ["deploy", "rollback", "queue", "billing", "invoice", "cache", "retry", "timeout",
         "window", "release", "migration", "schema", "index", "replica", "shard", "latency",
         "budget", "incident", "review", "pager", "alert", "dashboard", "token", "session"]
# fmt: on


def turns(n: int, size: int, rng: random.Random) -> list[dict[str, str]]:
    """`n` turns of about `size` bytes of plain words, two speakers alternating."""
    out = []
    for i in range(n):
        words: list[str] = []
        while sum(len(w) + 1 for w in words) < size - 12:
            words.append(rng.choice(WORDS))
        out.append({"speaker": "user" if i % 2 == 0 else "assistant", "text": " ".join(words)})
    return out


async def remember(client: Client) -> float:
    t0 = time.perf_counter()
    result = await client.call_tool("remember", {"query": "when do deploys go out", "scope": SCOPE})
    assert not result.is_error, result
    return (time.perf_counter() - t0) * 1000


async def measure(url: str, conversation: list[dict[str, str]]) -> dict[str, Any]:
    async with Client(url) as other, Client(url) as ingesting:
        stored = await other.call_tool(
            "memorize",
            {"title": "Deploy day", "content": "Deploys go out on Tuesdays.", "scope": SCOPE},
        )
        assert not stored.is_error, stored
        before = [await remember(other) for _ in range(20)]
        during: list[float] = []
        took: list[float] = []

        async def ingest() -> None:
            t0 = time.perf_counter()
            args = {"conversation": "long", "turns": conversation, "scope": SCOPE}
            result = await ingesting.call_tool("ingest", args)
            assert not result.is_error, result
            took.append(time.perf_counter() - t0)

        async with anyio.create_task_group() as tg:
            tg.start_soon(ingest)
            await anyio.sleep(0.2)  # the ingest is under way
            while not took:
                during.append(await remember(other))
    return {
        "ingest_seconds": round(took[0], 2),
        "remember_before_p50_ms": round(statistics.median(before), 1),
        "remember_during": len(during),
        # (none when the ingest answered within its head start: a short one, a fast model)
        "remember_during_p50_ms": round(statistics.median(during), 1) if during else None,
        "remember_during_max_ms": round(max(during), 1) if during else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="fastembed:sentence-transformers/all-minilm-l6-v2")
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--bytes", type=int, default=1990, help="text per turn")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    conversation = turns(args.turns, args.bytes, random.Random(7))
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        with http_server(Path(tmp) / "data", f"127.0.0.1:{port}", Path(tmp), model=args.model):
            result = anyio.run(measure, f"http://127.0.0.1:{port}/mcp", conversation)
    result.update(model=args.model, turns=args.turns, bytes_per_turn=args.bytes)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
