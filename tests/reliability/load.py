"""Real processes on one store at once: CLI writers, MCP stdio servers and an HTTP server.

Shared by the fast CI test (`test_concurrency.py`) and the soak (`benches/soak.py`). Every
worker keeps a ledger of what the store acknowledged (ids written, ids deleted, links made,
tags added); `verify` then checks the store against the union of the ledgers.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.memory.brain import Brain
from tests.server_support import free_port, http_server, memory_id, octobrain_cmd, server_env

SCOPE = "github.com/acme/api"
OTHER = "github.com/acme/web"
TOOL_TIMEOUT_S = 120.0


@dataclass
class Ledger:
    """What the store acknowledged to every worker, and what went wrong."""

    written: dict[str, str] = field(default_factory=dict)  # id -> unique marker word
    deleted: set[str] = field(default_factory=set)
    links: list[tuple[str, str]] = field(default_factory=list)
    tags: set[str] = field(default_factory=set)  # files acknowledged on the shared memory
    seen_others: int = 0  # reads that found another process's write
    errors: list[str] = field(default_factory=list)
    ops: int = 0
    latencies: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Plan:
    """How much work each kind of worker does."""

    cli_workers: int = 2
    cli_ops: int = 3
    stdio_workers: int = 1
    http_workers: int = 2
    mcp_ops: int = 8


def _fact(worker: str, i: int) -> tuple[str, str, str]:
    marker = f"zq{worker}n{i}"  # one word, unique across the run
    return marker, f"Note {marker} from {worker}", f"Finding {marker}: {worker} wrote item {i}."


def _brain(data_dir: Path) -> Brain:
    return Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=data_dir / "db")


async def _cli(data_dir: Path, cwd: Path, *args: str) -> dict[str, Any]:
    done = await anyio.run_process(
        octobrain_cmd("memory", "--scope", SCOPE, *args, "--format", "json"),
        env=server_env(data_dir),
        cwd=cwd,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"cli {args[0]} exit {done.returncode}: {done.stderr.decode()[-400:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


async def cli_worker(
    name: str, data_dir: Path, cwd: Path, shared: str, ops: int, ledger: Ledger
) -> None:
    """memorize, tag the shared memory, forget every second own write — each a new process."""
    mine: list[str] = []
    for i in range(ops):
        try:
            marker, title, content = _fact(name, i)
            mid = (await _cli(data_dir, cwd, "memorize", "-t", title, "-c", content))["id"]
            ledger.written[mid] = marker
            mine.append(mid)
            tag = f"{name}-{i}"
            await _cli(data_dir, cwd, "update", shared, "--add-files", tag)
            ledger.tags.add(tag)
            if i % 2 == 1:
                victim = mine.pop(0)
                await _cli(data_dir, cwd, "forget", victim, "--yes")
                ledger.deleted.add(victim)
            ledger.ops += 3 if i % 2 == 1 else 2
        except Exception as exc:
            ledger.errors.append(f"{name}: {exc}")


async def _call(client: Client, ledger: Ledger, tool: str, **args: Any) -> str:
    start = time.perf_counter()
    with anyio.fail_after(TOOL_TIMEOUT_S):
        result = await client.call_tool(tool, {**args, "scope": SCOPE})
    ledger.latencies.append(time.perf_counter() - start)
    ledger.ops += 1
    reply = "\n".join(block.text for block in result.content)
    if result.is_error:
        raise RuntimeError(f"{tool} failed: {reply[:300]}")
    return reply


async def mcp_worker(name: str, client: Client, ops: int, ledger: Ledger) -> None:
    """memorize (linked to its previous write), remember it, forget every third write."""
    mine: list[str] = []
    for i in range(ops):
        try:
            marker, title, content = _fact(name, i)
            links = [{"target_id": mine[-1], "relationship_type": "extends"}] if mine else []
            reply = await _call(
                client, ledger, "memorize", title=title, content=content, related_to=links
            )
            mid = memory_id(reply)
            ledger.written[mid] = marker
            if links:
                ledger.links.append((mid, mine[-1]))
            mine.append(mid)
            found = await _call(client, ledger, "remember", query=marker, min_relevance=0)
            if mid not in found:
                ledger.errors.append(f"{name}: own write {mid} not found by remember")
            if i % 3 == 2:
                victim = mine.pop(0)
                await _call(client, ledger, "forget", memory_id=victim, confirm=True)
                ledger.deleted.add(victim)
        except Exception as exc:
            ledger.errors.append(f"{name}: {exc}")


async def see_others(name: str, client: Client, ledger: Ledger) -> None:
    """After the writes: this long-lived server finds every other worker's surviving writes."""
    for mid, marker in list(ledger.written.items()):
        if mid in ledger.deleted or marker.startswith(f"zq{name}n"):
            continue
        found = await _call(client, ledger, "remember", query=marker, min_relevance=0)
        if mid in found:
            ledger.seen_others += 1
        else:
            ledger.errors.append(f"{name}: another process's write {mid} ({marker}) not seen")


def stdio_params(data_dir: Path, cwd: Path) -> StdioServerParameters:
    cmd = octobrain_cmd("mcp")
    return StdioServerParameters(command=cmd[0], args=cmd[1:], env=server_env(data_dir), cwd=cwd)


def run_mixed(data_dir: Path, cwd: Path, plan: Plan) -> Ledger:
    """Every kind of worker on one store at once, then each server reads the others' writes."""
    ledger = Ledger()
    shared, _ = _brain(data_dir).memorize("Shared memory", "Every CLI worker tags this one.")
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for c in range(plan.cli_workers):
                tg.start_soon(cli_worker, f"cli{c}", data_dir, cwd, shared.id, plan.cli_ops, ledger)
            for s in range(plan.stdio_workers):
                tg.start_soon(_stdio_session, f"io{s}", data_dir, cwd, plan.mcp_ops, ledger)
            for h in range(plan.http_workers):
                tg.start_soon(_http_session, f"ht{h}", url, plan.mcp_ops, ledger)
        async with Client(stdio_params(data_dir, cwd)) as reader:
            await see_others("io0", reader, ledger)
        async with Client(url) as reader:
            await see_others("ht0", reader, ledger)

    with http_server(data_dir, f"127.0.0.1:{port}", cwd):
        anyio.run(main)
    return ledger


async def _stdio_session(name: str, data_dir: Path, cwd: Path, ops: int, ledger: Ledger) -> None:
    try:
        async with Client(stdio_params(data_dir, cwd)) as client:
            await mcp_worker(name, client, ops, ledger)
    except Exception as exc:
        ledger.errors.append(f"{name}: session failed: {exc!r}")


async def _http_session(name: str, url: str, ops: int, ledger: Ledger) -> None:
    try:
        async with Client(url) as client:
            await mcp_worker(name, client, ops, ledger)
    except Exception as exc:
        ledger.errors.append(f"{name}: session failed: {exc!r}")


def verify(data_dir: Path, ledger: Ledger, shared_title: str = "Shared memory") -> list[str]:
    """Problems found in the store against the ledger (an empty list: nothing lost)."""
    brain = _brain(data_dir)
    rows = brain.store.scan("true", columns=["id", "title", "related_files", "scope"])
    ids = [r["id"] for r in rows]
    by_id = {r["id"]: r for r in rows}
    problems = []
    if len(ids) != len(set(ids)):
        problems.append("duplicate ids in the store")
    for mid, marker in ledger.written.items():
        copies = sum(marker in str(r["title"]).split() for r in rows)
        if mid in ledger.deleted:
            if mid in by_id or copies:
                problems.append(f"deleted {mid} came back")
        elif mid not in by_id:
            problems.append(f"acknowledged write {mid} lost")
        elif copies != 1:
            problems.append(f"write {marker} stored {copies} times")
    edges = brain.store.all_relationships()
    for edge in edges:
        if edge.source_id not in by_id or edge.target_id not in by_id:
            problems.append(f"edge {edge.id} points at a missing memory")
    edge_pairs = {(e.source_id, e.target_id) for e in edges}
    for src, tgt in ledger.links:
        if src not in ledger.deleted and tgt not in ledger.deleted and (src, tgt) not in edge_pairs:
            problems.append(f"acknowledged link {src} -> {tgt} lost")
    shared = [r for r in rows if r["title"] == shared_title]
    if len(shared) == 1:
        lost = ledger.tags - set(shared[0]["related_files"] or [])
        if lost:
            problems.append(f"lost tag updates on the shared memory: {sorted(lost)}")
    return problems


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (nearest rank) of `values`."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def http_load(
    data_dir: Path, cwd: Path, clients: int, requests: int, budget_s: float
) -> dict[str, Any]:
    """`clients` concurrent HTTP MCP sessions, `requests` tool calls each (2 remember : 1
    memorize), stopped early at `budget_s`. Returns calls/s, p50/p95 latency and errors."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    ledger = Ledger()

    async def one(c: int) -> None:
        async with Client(url) as client:
            for i in range(requests):
                if time.monotonic() > deadline:
                    return
                try:
                    if i % 3 == 0:
                        _, title, content = _fact(f"ld{c}", i)
                        await _call(client, ledger, "memorize", title=title, content=content)
                    else:
                        await _call(client, ledger, "remember", query=f"finding item {i}")
                except Exception as exc:
                    ledger.errors.append(f"client {c}: {exc!r}")

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for c in range(clients):
                tg.start_soon(one, c)

    with http_server(data_dir, f"127.0.0.1:{port}", cwd):
        deadline = time.monotonic() + budget_s
        start = time.perf_counter()
        anyio.run(main)
        elapsed = time.perf_counter() - start
    lat = ledger.latencies or [0.0]
    return {
        "clients": clients,
        "calls": ledger.ops,
        "errors": len(ledger.errors),
        "error_samples": ledger.errors[:3],
        "seconds": round(elapsed, 2),
        "calls_per_s": round(ledger.ops / elapsed, 1) if elapsed else 0.0,
        "p50_ms": round(percentile(lat, 0.5) * 1000, 1),
        "p95_ms": round(percentile(lat, 0.95) * 1000, 1),
    }


__all__ = ["OTHER", "SCOPE", "Ledger", "Plan", "http_load", "run_mixed", "verify"]
