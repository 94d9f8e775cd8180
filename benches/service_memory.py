"""The resident service's memory through `octobrain bench cold`'s warm commands.

Builds bench cold's store (or copies a built one), starts the service on it as bench cold does,
runs each warm command `--runs` times and then the hosted `octobrain mcp` sessions, and prints
the service's RSS and anonymous heap (`/proc/PID/smaps_rollup`) after loading and after each
command. Run it on two commits, alternated, to compare them:

    python benches/service_memory.py --memories 100000 [--store DIR] [--output FILE]

`--store DIR` keeps the built store in DIR (built there if missing, copied from it otherwise),
so each run starts from the same store without embedding it again. `--document FILE` then
has one more hosted session index FILE through the `knowledge` tool (a `search` naming it),
and one more answer a `remember`, the service's memory printed after each.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from child_env import child_env
from octobrain.bench import cold
from octobrain.bench.scale import make_queries
from octobrain.store import seen

FIELDS = ("Rss", "Anonymous", "Private_Clean", "Shared_Clean")


def _memory(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as rollup:
        for line in rollup:
            name, value = line.split()[:2]
            if name.rstrip(":") in FIELDS:
                out[name.rstrip(":")] = int(value) // 1024
    return out


def run(
    memories: int, runs: int, store: Path | None, model: str, document: Path | None = None
) -> list[dict[str, Any]]:
    with seen.scratch("octobrain-svcmem-") as tmp:  # (no mark of its store left behind)
        root, data = Path(tmp), Path(tmp) / "data"
        run_dir = Path(tempfile.mkdtemp(prefix="ob-", dir="/tmp"))  # AF_UNIX paths are short
        if store is not None and not store.exists():
            cold.build_store(store, memories, model, print)
        if store is None:
            cold.build_store(data, memories, model, print)
        else:
            shutil.copytree(store, data, symlinks=True)
        env = child_env(
            data,
            model,
            service=True,
            OCTOBRAIN_CONSOLIDATION_SLEEP_ENABLED="false",
            XDG_RUNTIME_DIR=str(run_dir),
        )
        points: list[dict[str, Any]] = []

        def note(step: str, **extra: Any) -> None:
            status = cold._status(env)
            point = {"after": step, **_memory(int(status["pid"])), **extra}
            points.append(point)
            print(json.dumps(point), flush=True)

        try:
            start = [*cold._octobrain(), "service", "start", "--wait", "600"]
            subprocess.run(start, env=env, cwd=root, check=True, capture_output=True)
            note("loading")
            for command in cold.COMMANDS:
                timed = cold._time_commands(env, runs, root, lambda _m: None, [command])
                stats = timed[command]
                note(command, p50_ms=round(stats["p50_ms"]), p90_ms=round(stats["p90_ms"]))
            for _ in range(runs):
                cold._mcp_once(env, root, make_queries(1)[0])
            note("mcp")
            if document is not None:
                shutil.copy(document, root / document.name)
                arguments = {"command": "search", "query": "results", "source": document.name}
                cold._mcp_once(env, root, "", {"name": "knowledge", "arguments": arguments})
                note(f"knowledge index of {document.name}")
                cold._mcp_once(env, root, make_queries(1)[0])
                note("mcp after it")
        finally:
            stop = [*cold._octobrain(), "service", "stop"]
            subprocess.run(stop, env=env, capture_output=True)
            shutil.rmtree(run_dir, ignore_errors=True)
    return points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--store", type=Path, help="keep (or reuse) the built store here")
    parser.add_argument("--output", type=Path, help="write the points as JSON here")
    parser.add_argument("--document", type=Path, help="then index this file over MCP")
    args = parser.parse_args()
    points = run(args.memories, args.runs, args.store, args.model, args.document)
    if args.output is not None:
        args.output.write_text(json.dumps(points, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
