"""How `bench scale` serves a store it wrote: two new processes open it as a user's would
(see `bench.scale`'s module doc), each reporting what it paid and held."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from octobrain.config import Config
from octobrain.embed.factory import get_embedder

SCOPE = "bench/scale"
STORE_MODEL = "hash:384"


def dir_mb(path: Path) -> float:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += (Path(root) / name).stat().st_size
            except OSError:
                continue
    return total / 1e6


def pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else 0.0


def own_peak_rss_mb() -> float:
    """Peak RSS of this process since it started its program, in MiB.

    `getrusage`'s maxrss also counts what a forked child shared with its parent before `exec`,
    so a serving process started by a benchmark holding a 2 GiB mirror reported 2 GiB itself;
    Linux's VmHWM belongs to the new program's own memory. Elsewhere, maxrss it is."""
    try:
        for line in Path("/proc/self/status").read_text(encoding="utf-8").splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    from octobrain.bench.beir import peak_rss_mb

    return peak_rss_mb()


def serve_child(argv: Sequence[str]) -> None:
    """A new process serving the store: what a restarted MCP server pays and holds."""
    from octobrain.config import SearchConfig
    from octobrain.kernels.hybrid import exact_top
    from octobrain.memory.brain import Brain
    from octobrain.memory.query import Filters
    from octobrain.store.lancedb_import import import_lancedb
    from octobrain.store.sql import Sight

    uri, queries_file, out_file, mode = argv[:4]
    ann_min_rows = argv[4] if len(argv) > 4 else ""
    queries = json.loads(Path(queries_file).read_text(encoding="utf-8"))
    config = Config()
    if ann_min_rows:
        config = Config(search=SearchConfig(ann_min_rows=int(ann_min_rows)))
    embedder = get_embedder(STORE_MODEL)
    embedder.embed_query("warm up")
    start = time.perf_counter()
    # Imported before the clock: its cost does not grow with the store.
    import_lancedb()

    result: dict[str, Any] = {"import_lancedb_ms": (time.perf_counter() - start) * 1000.0}
    start = time.perf_counter()
    brain = Brain(SCOPE, config=config, embedder=embedder, uri=uri)
    brain.remember(queries[0], record_access=False)
    result["cold_start_ms"] = (time.perf_counter() - start) * 1000.0
    corpus = brain.retriever.corpus
    result["from_snapshot"] = corpus.opened_snapshot
    if mode == "first":
        # Its peak RSS covers the snapshot write too (which goes on after the answer).
        corpus.wait_for_snapshot()
        result["snapshot_written_ms"] = (time.perf_counter() - start) * 1000.0
    if mode == "serve":
        timings = []
        for q in queries[1:]:
            start = time.perf_counter()
            brain.remember(q, record_access=False)
            timings.append((time.perf_counter() - start) * 1000.0)
        result["served_remember_p50_ms"] = pct(timings, 50)
        result["served_remember_p95_ms"] = pct(timings, 95)
    result["rss_mb"] = own_peak_rss_mb()
    retriever = brain.retriever
    if mode == "serve" and retriever._use_ann():
        # After the RSS figure: the exact scan below maps every vector page.
        allowed = corpus.allowed(Sight(SCOPE))
        where = Filters().where(Sight(SCOPE))
        want = brain.config.search.candidates
        recalls = []
        for q in queries[: min(len(queries), 100)]:
            qvec = embedder.embed_query([q])[0]
            approx = retriever._ann(qvec, where, want, allowed)[:10]
            exact = exact_top(corpus.vectors.cosines(qvec), allowed, 10)
            recalls.append(len(set(approx) & set(exact)) / max(1, len(exact)))
        result["ann_recall_at_10"] = float(np.mean(recalls))
    Path(out_file).write_text(json.dumps(result), encoding="utf-8")


def _child(
    uri: Path, data: Path, queries: Path, mode: str, ann_min_rows: int | None
) -> dict[str, Any]:
    out = data / f"{mode}.json"
    env = {**os.environ, "OCTOBRAIN_DATA_DIR": str(data)}
    code = "import sys; from octobrain.bench import scale_serve as s; s.serve_child(sys.argv[1:])"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            str(uri),
            str(queries),
            str(out),
            mode,
            str(ann_min_rows or ""),
        ],
        capture_output=True,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"serving process failed: {done.stderr.decode()[-2000:]}")
    loaded: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return loaded


def serve(
    uri: Path, tmp: Path, queries: Sequence[str], ann_min_rows: int | None = None
) -> dict[str, Any]:
    """Two fresh processes on the store, sharing one data directory: the first finds no
    snapshot (reads the store, builds the mirror, writes the snapshot), the second opens it."""
    data = tmp / "serving"
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir()
    listed = data / "queries.json"
    listed.write_text(json.dumps(list(queries)), encoding="utf-8")
    first = _child(uri, data, listed, "first", ann_min_rows)
    second = _child(uri, data, listed, "serve", ann_min_rows)
    return {
        "cold_start_build_ms": first["cold_start_ms"],
        "snapshot_written_ms": first.get("snapshot_written_ms"),
        "build_rss_mb": first["rss_mb"],
        "cold_start_ms": second["cold_start_ms"],
        "import_lancedb_ms": second["import_lancedb_ms"],
        "from_snapshot": second["from_snapshot"],
        "serving_rss_mb": second["rss_mb"],
        "served_remember_p50_ms": second["served_remember_p50_ms"],
        "served_remember_p95_ms": second["served_remember_p95_ms"],
        "ann_recall_at_10": second.get("ann_recall_at_10"),
        "snapshot_mb": dir_mb(data / "cache"),
    }
