"""`octobrain bench cold`: what a new process costs, measured as a user runs the commands.

One store of `n` synthetic memories (those of `bench scale`, embedded with the chosen model) in
a fresh data dir; then each command is run as a whole `octobrain` process `runs` times, timed
from spawn to exit: `memory remember`, `memory memorize`, and the three Claude Code hooks
(`session-start`, `pre-compact` and `session-end` on a small transcript). Twice: with the
resident service warm (started once beforehand, as after the first command of a session), and
with it disabled (`OCTOBRAIN_SERVICE_ENABLED=0`: every process imports, loads and opens alone);
and as the first command after the service went away (it runs in-process and starts one, as
the first hook after `service.idle_seconds` does).
Only 256 distinct vectors are embedded (see `build_store`). `octobrain mcp` is spawned `runs`
times each way and timed to its `tools/list` answer and to its first `remember` answer: with
the service warm it relays its session to the service, disabled it serves in-process.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from octobrain.bench.scale import make_memories, make_queries
from octobrain.bench.scale_serve import SCOPE
from octobrain.store import seen

__all__ = ["cold_table", "run_cold", "target_ms"]

_NOTES = itertools.count()  # the numbers of the notes `memorize` stores, one each

COMMANDS = ("remember", "memorize", "session-start", "pre-compact", "session-end")
TARGETS_MS = {
    "remember": 250.0,
    "memorize": 300.0,
    "session-start": 300.0,
    "pre-compact": 300.0,
    "session-end": 300.0,
    "mcp tools/list": 150.0,
    "mcp first remember": 400.0,
}
REMEMBER_100K_MS = 400.0  # the issue's `remember` target at 100k memories; the rest are set at 10k


def target_ms(command: str, memories: int) -> float:
    """The target a command's p50 is held to at a store of `memories`."""
    if command == "remember" and memories >= 100_000:
        return REMEMBER_100K_MS
    return TARGETS_MS[command]


_TRANSCRIPT = [
    {"type": "user", "message": {"role": "user", "content": "The login test fails on CI."}},
    {
        "type": "assistant",
        "message": {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "The root cause was a stale session cookie; fixed."},
                {"type": "tool_use", "name": "Edit", "input": {"file_path": "/w/app/login.py"}},
                {
                    "type": "text",
                    "text": "We decided to use short-lived tokens instead of cookies.",
                },
            ],
        },
    },
]


def _octobrain() -> list[str]:
    """The console script beside this interpreter (what a user runs), else `python -m`."""
    exe = shutil.which("octobrain", path=sysconfig.get_path("scripts"))
    return [exe] if exe else [sys.executable, "-m", "octobrain"]


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100.0 * len(ordered) + 0.5) - 1))]


def _stats(values: Sequence[float]) -> dict[str, float]:
    return {"p50_ms": _pct(values, 50), "p90_ms": _pct(values, 90), "runs": len(values)}


def build_store(
    data: Path, n: int, model: str, progress: Callable[[str], None], distinct: int = 256
) -> None:
    """`n` memories of `bench scale` in `data`/db with vectors of `model`.

    Only the first `distinct` memories are embedded; the rest reuse their vectors in turn. What
    a process costs does not depend on which vectors a store holds, and embedding 100k
    documents with a real model would take the benchmark hours on a small machine.
    """
    from octobrain.config import Config
    from octobrain.embed.factory import get_embedder
    from octobrain.memory.brain import Brain

    embedder = get_embedder(model, batch_size=64)
    memories = make_memories(n)
    progress(f"store: embedding {min(n, distinct)} distinct memories with {model}")
    vectors = embedder.embed_documents([m.searchable_text() for m in memories[:distinct]])
    brain = Brain(SCOPE, config=Config(), embedder=embedder, uri=data / "db")
    for i in range(0, n, 1024):
        batch = memories[i : i + 1024]
        rows = [j % len(vectors) for j in range(i, i + len(batch))]
        brain.store.add(batch, vectors[rows])
        progress(f"store: {min(n, i + 1024):,}/{n:,}")
    brain.store.compact()


def _argv(command: str, i: int, transcript: Path, cwd: Path) -> tuple[list[str], bytes]:
    if command == "remember":
        return ["memory", "--scope", SCOPE, "remember", make_queries(i + 1)[i]], b""
    if command == "memorize":
        # (a new memory each time: the same one again is answered as already stored)
        n = next(_NOTES)
        title = f"Cold start note {n}"
        content = f"Measured whole-process latency, run {n}, for the cold start benchmark."
        return ["memory", "--scope", SCOPE, "memorize", "-t", title, "-c", content], b""
    event = {"session-start": "SessionStart", "pre-compact": "PreCompact"}.get(
        command, "SessionEnd"
    )
    hook = {
        "hook_event_name": event,
        "session_id": f"bench-cold-{command}-{i}",
        "cwd": str(cwd),
        "transcript_path": str(transcript),
    }
    return ["hook", command, "--scope", SCOPE], json.dumps(hook).encode()


def _time_commands(
    env: dict[str, str],
    runs: int,
    cwd: Path,
    progress: Callable[[str], None],
    commands: Sequence[str] = COMMANDS,
    *,
    first: bool = False,
) -> dict[str, dict[str, float]]:
    """p50/p90 of each command; with `first`, each run is the first command after the service
    went away (stopped before it; the service it starts is waited for and stopped after)."""
    transcript = cwd / "transcript.jsonl"
    transcript.write_text("\n".join(json.dumps(e) for e in _TRANSCRIPT) + "\n", encoding="utf-8")
    out = {}
    for command in commands:
        times = []
        for i in range(runs):
            args, stdin = _argv(command, i, transcript, cwd)
            if first:
                _stop_service(env)
            start = time.perf_counter()
            done = subprocess.run(
                [*_octobrain(), *args], input=stdin, env=env, cwd=cwd, capture_output=True
            )
            times.append((time.perf_counter() - start) * 1000.0)
            if first:
                _wait_loaded(env)
            ok = done.returncode == 0 and (
                b"hookSpecificOutput" in done.stdout
                if command == "session-start"
                else b"digest stored" in done.stderr or command in ("remember", "memorize")
            )
            if not ok:
                raise RuntimeError(f"{command} failed: {done.stderr.decode(errors='replace')}")
        out[command] = _stats(times)
        progress(f"{command}: p50 {out[command]['p50_ms']:.0f} ms")
    return out


def _rpc(i: int, method: str, params: dict[str, Any] | None = None) -> bytes:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": i, "method": method}
    if params is not None:
        msg["params"] = params
    return json.dumps(msg).encode() + b"\n"


def _mcp_once(
    env: dict[str, str], cwd: Path, query: str, call: dict[str, Any] | None = None
) -> tuple[float, float]:
    """Spawn → tools/list answer, and spawn → first remember answer (or `call`'s), in ms."""
    from mcp_types.version import LATEST_HANDSHAKE_VERSION

    start = time.perf_counter()
    proc = subprocess.Popen(
        [*_octobrain(), "mcp"],
        env=env,
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    caps = {"experimental": {"session": {"scope": SCOPE}}}
    init = {"protocolVersion": LATEST_HANDSHAKE_VERSION, "capabilities": caps}
    init["clientInfo"] = {"name": "bench-cold", "version": "0"}

    def ask(line: bytes) -> dict[str, Any]:
        proc.stdin.write(line)  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        reply: dict[str, Any] = json.loads(proc.stdout.readline())  # type: ignore[union-attr]
        if "error" in reply or reply.get("result", {}).get("isError"):
            raise RuntimeError(f"octobrain mcp answered an error: {reply}")
        return reply

    try:
        ask(_rpc(0, "initialize", init))
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        ask(_rpc(1, "tools/list"))
        listed = time.perf_counter()
        ask(_rpc(2, "tools/call", call or {"name": "remember", "arguments": {"query": query}}))
        answered = time.perf_counter()
    finally:
        proc.stdin.close()
        proc.wait(timeout=120)
    return (listed - start) * 1000.0, (answered - start) * 1000.0


def run_cold(
    n: int,
    *,
    runs: int = 7,
    model: str = "minilm",
    progress: Callable[[str], None] = lambda _msg: None,
    commands: Sequence[str] = (*COMMANDS, "mcp"),
) -> dict[str, Any]:
    """Build a store of `n` memories and time each of `commands` (`COMMANDS` and "mcp") both
    ways (module docstring)."""
    timed = [c for c in COMMANDS if c in commands]
    mcp_runs = range(runs if "mcp" in commands else 0)
    from octobrain.embed.factory import get_embedder

    with seen.scratch("octobrain-cold-") as tmp:
        root = Path(tmp)
        data, run_dir = root / "data", Path(tempfile.mkdtemp(prefix="ob-", dir="/tmp"))
        build_store(data, n, model, progress)
        base = {k: v for k, v in os.environ.items() if not k.startswith("OCTOBRAIN_")}
        base.update(
            OCTOBRAIN_DATA_DIR=str(data),
            OCTOBRAIN_EMBEDDING_MODEL=model,
            OCTOBRAIN_CONSOLIDATION_SLEEP_ENABLED="false",  # no sleep pass mid-measurement
            XDG_RUNTIME_DIR=str(run_dir),
        )
        warm_env = {**base, "OCTOBRAIN_SERVICE_ENABLED": "1"}
        cold_env = {**base, "OCTOBRAIN_SERVICE_ENABLED": "0"}
        try:
            progress("service: starting")
            subprocess.run(
                [*_octobrain(), "service", "start", "--wait", "600"],
                env=warm_env,
                cwd=root,
                check=True,
                capture_output=True,
            )
            progress("with the service")
            service = _time_commands(warm_env, runs, root, progress, timed)
            progress("octobrain mcp, hosted by the service")
            hosted = [_mcp_once(warm_env, root, make_queries(1)[0]) for _ in mcp_runs]
            status = _status(warm_env)
            progress("first command, no service running (it starts one)")
            first = _time_commands(warm_env, runs, root, progress, timed, first=True)
        finally:
            _stop_service(warm_env)
        progress("in-process (service disabled)")
        in_process = _time_commands(cold_env, runs, root, progress, timed)
        progress("octobrain mcp")
        spawns = [_mcp_once(cold_env, root, make_queries(1)[0]) for _ in mcp_runs]
        shutil.rmtree(run_dir, ignore_errors=True)
    return {
        "memories": n,
        "model": get_embedder(model).model_id,
        "runs": runs,
        "machine": f"{os.uname().machine}, {os.cpu_count()} CPUs",
        "service": service,
        "in_process": in_process,
        "first": first,
        "service_rss_mb": status.get("rss_mb"),
        "mcp": {
            "tools/list": _stats([a for a, _ in hosted]),
            "first remember": _stats([b for _, b in hosted]),
        }
        if hosted
        else {},
        "mcp_in_process": {
            "tools/list": _stats([a for a, _ in spawns]),
            "first remember": _stats([b for _, b in spawns]),
        }
        if spawns
        else {},
        "targets_ms": TARGETS_MS,
    }


def _stop_service(env: dict[str, str]) -> None:
    subprocess.run([*_octobrain(), "service", "stop"], env=env, capture_output=True)
    deadline = time.monotonic() + 60.0
    while _status(env).get("pid") is not None and time.monotonic() < deadline:
        time.sleep(0.1)


def _wait_loaded(env: dict[str, str]) -> None:
    """Until the service the command started has loaded (so the next run starts from none)."""
    deadline = time.monotonic() + 120.0
    while not _status(env).get("loaded") and time.monotonic() < deadline:
        time.sleep(0.1)


def _status(env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [*_octobrain(), "service", "status", "--format", "json"], env=env, capture_output=True
    )
    try:
        status: dict[str, Any] = json.loads(done.stdout)
    except ValueError:
        return {}
    return status


def cold_table(reports: Sequence[dict[str, Any]]) -> str:
    """The README table: p50 / p90 per command, with the service and without, and the target."""
    first = reports[0]
    lines = [
        f"Whole `octobrain` processes, spawn to exit, {first['runs']} runs each, model "
        f"`{first['model']}` (256 distinct stored vectors, reused), {first['machine']}; "
        "p50 / p90.",
        "",
        "| command | memories | service warm | first command, no service (starts one) "
        "| service disabled (in-process) | target | met |",
        "|---|---|---|---|---|---|---|",
    ]

    def ms(row: dict[str, float] | None) -> str:
        return "–" if row is None else f"{row['p50_ms']:.0f} / {row['p90_ms']:.0f} ms"

    for r in reports:
        for command in [c for c in COMMANDS if c in r["service"]]:
            warm, target = r["service"][command], target_ms(command, r["memories"])
            lines.append(
                f"| `{command}` | {r['memories']:,} | {ms(warm)} | "
                f"{ms(r.get('first', {}).get(command))} | {ms(r['in_process'][command])} | "
                f"≤ {target:.0f} ms | {'yes' if warm['p50_ms'] <= target else 'no'} |"
            )
        for name, warm in r["mcp"].items():
            cold, target = r["mcp_in_process"][name], target_ms(f"mcp {name}", r["memories"])
            lines.append(
                f"| `mcp` spawn → {name} | {r['memories']:,} | {ms(warm)} | – | {ms(cold)} | "
                f"≤ {target:.0f} ms | {'yes' if warm['p50_ms'] <= target else 'no'} |"
            )
    rss = ", ".join(f"{r['service_rss_mb']:.0f} MiB at {r['memories']:,}" for r in reports)
    lines += ["", f"Resident service RSS after the runs: {rss}."]
    return "\n".join(lines)
