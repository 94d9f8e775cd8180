"""What `octobrain memory forget id1 … idN --yes` costs on a store of `--size` memories: each
run forgets `--ids` of them (full ids, then 8-digit prefixes) from a fresh copy of the store,
as a new process would at the command line; and, in this process, what resolving them costs
(`Brain.forget_targets`: the ids' rows read, prefixes resolved) on the store already open.

    python benches/forget_many.py --size 10000 --ids 50 --runs 3
    PYTHONPATH=<another checkout>/python python benches/forget_many.py   # that code's

The store is made in a temporary directory by `memory import` of synthetic memories with the
`hash:64` embedder; the times are the whole command's, wall clock, medians of `--runs`.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from child_env import child_env

SCOPE = "github.com/acme/api"


def _export(path: Path, size: int) -> list[str]:
    """A JSONL export of `size` memories in `SCOPE`; their ids."""
    rng, ids = random.Random(7), []
    now = "2026-01-05T09:00:00Z"
    header = {"kind": "header", "format": "octobrain-export", "version": 1}
    header |= {"embedding_model": "hash:64", "dim": 64, "scope": SCOPE, "count": size}
    with path.open("w") as out:
        out.write(json.dumps(header) + "\n")
        for i in range(size):
            ids.append(str(uuid.UUID(int=rng.getrandbits(128), version=4)))
            memory = {
                "kind": "memory",
                "id": ids[-1],
                "title": f"Fact number {i}",
                "content": f"Durable fact number {i} about the API and its port {i % 97}.",
                "memory_type": "code",
                "scope": SCOPE,
                "tags": [],
                "related_files": [],
                "importance": 0.5,
                "source": "user_confirmed",
                "state": "working",
                "created_at": now,
                "updated_at": now,
                "last_accessed": now,
            }
            out.write(json.dumps(memory) + "\n")
    return ids


def _octobrain(data: Path, *args: str) -> None:
    command = [sys.executable, "-m", "octobrain", "memory", "--scope", SCOPE, *args]
    env = child_env(data, "hash:64")  # (not the user's store, config or resident service)
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args[:2])} failed: {done.stderr.strip()}")


def _in_process(base: Path, ids: list[str], args: argparse.Namespace) -> None:
    from octobrain.config import Config
    from octobrain.embed.factory import get_embedder
    from octobrain.memory.brain import Brain

    brain = Brain(SCOPE, config=Config(), embedder=get_embedder("hash:64"), uri=base / "db")
    brain.forget_targets(ids[:1])  # the store opened
    for label, given in (("full ids", lambda i: i), ("8-digit prefixes", lambda i: i[:8])):
        times = []
        for run in range(args.runs):
            chosen = [given(i) for i in random.Random(run).sample(ids, args.ids)]
            start = time.perf_counter()
            brain.forget_targets(chosen)
            times.append(time.perf_counter() - start)
        shown = ", ".join(f"{t * 1000:.0f}" for t in times)
        median = statistics.median(times) * 1000
        print(f"resolve {args.ids} {label} in-process: median {median:.0f} ms ({shown})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--ids", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        base = Path(root) / "base"
        ids = _export(Path(root) / "export.jsonl", args.size)
        _octobrain(base, "import", f"{root}/export.jsonl")
        chosen = random.Random(8).sample(ids, args.ids)
        _in_process(base, ids, args)
        for label, given in (("full ids", chosen), ("8-digit prefixes", [i[:8] for i in chosen])):
            times = []
            for run in range(args.runs):
                data = Path(root) / f"run{run}"
                shutil.rmtree(data, ignore_errors=True)
                shutil.copytree(base, data)
                start = time.perf_counter()
                _octobrain(data, "forget", *given, "--yes")
                times.append(time.perf_counter() - start)
            shown = ", ".join(f"{t:.2f}" for t in times)
            print(
                f"forget {args.ids} {label} of {args.size:,}: "
                f"median {statistics.median(times):.2f} s ({shown})"
            )


if __name__ == "__main__":
    main()
