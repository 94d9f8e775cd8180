"""`octobrain bench scale`: memorize, import, remember and sleep-pass costs at growing sizes.

Synthetic memories (seeded): a title of 3–8 words and content of 25–140 words drawn from a
Zipf-like vocabulary of topical words, 0–3 tags, a memory type, and a creation time spread over
the last year (so the sleep pass, which looks at the last `max_age_days`, sees a realistic
share of them). All in one scope.

Stored and query vectors come from the `hash:384` embedder (same dimension as the default
model), so the storage and search costs are real while 100k documents need no hours of model
time on a small machine; the default model's query-embedding p50 is measured separately and
reported beside the search latency (remember on the real model = search + embedding).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from octobrain.config import Config
from octobrain.embed import get_embedder
from octobrain.models import Memory, MemoryType, utcnow

__all__ = ["make_memories", "make_queries", "run_scale"]

SCOPE = "bench/scale"
STORE_MODEL = "hash:384"
_TYPES = [t for t in MemoryType]
_TAGS = [f"tag{i}" for i in range(40)]


def _vocabulary(rng: random.Random, size: int = 6000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 10))))
    return sorted(words)


class _Words:
    """Zipf-like word sampling: a few common words, a long tail of rare ones."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.words = _vocabulary(rng)
        ranks = np.arange(1, len(self.words) + 1, dtype=np.float64)
        self.cum = np.cumsum(1.0 / ranks)
        self.cum /= self.cum[-1]

    def sample(self, n: int) -> list[str]:
        picks = np.searchsorted(self.cum, [self.rng.random() for _ in range(n)])
        return [self.words[min(int(i), len(self.words) - 1)] for i in picks]


def make_memories(n: int, seed: int = 7) -> list[Memory]:
    """`n` synthetic memories (see the module docstring); same seed, same memories."""
    rng = random.Random(seed)
    words = _Words(rng)
    now = utcnow()
    out = []
    for _ in range(n):
        created = now - timedelta(days=rng.random() * 365)
        out.append(
            Memory(
                title=" ".join(words.sample(rng.randint(3, 8))).capitalize(),
                content=" ".join(words.sample(rng.randint(25, 140))) + ".",
                memory_type=rng.choice(_TYPES),
                tags=sorted(set(rng.sample(_TAGS, rng.randint(0, 3)))),
                scope=SCOPE,
                created_at=created,
                updated_at=created,
                last_accessed=created,
            )
        )
    return out


def make_queries(n: int, seed: int = 11) -> list[str]:
    """`n` queries of 2–6 words from the same vocabulary."""
    rng = random.Random(seed)
    words = _Words(random.Random(7))  # the memories' vocabulary
    words.rng = rng
    return [" ".join(words.sample(rng.randint(2, 6))) for _ in range(n)]


def _dir_mb(path: Path) -> float:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += (Path(root) / name).stat().st_size
            except OSError:
                continue
    return total / 1e6


def _pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else 0.0


def query_embedding_ms(model: str, queries: Sequence[str]) -> float:
    """p50 of embedding one query with `model` (after one warm-up call)."""
    embedder = get_embedder(model)
    embedder.embed_query("warm up")
    timings = []
    for q in queries:
        start = time.perf_counter()
        embedder.embed_query(q)
        timings.append((time.perf_counter() - start) * 1000.0)
    return _pct(timings, 50)


def _sleep_pass_seconds(brain: Any, config: Config) -> tuple[float, int]:
    """The sleep pass's clustering work: recent working memories of the scope, clustered by
    cosine with the configured linkage and threshold. Returns (seconds, clusters)."""
    from octobrain.clustering import cosine_clusters

    cons = config.consolidation
    start = time.perf_counter()
    cutoff = utcnow() - timedelta(days=cons.max_age_days)
    rows = brain.store.scan(
        f"scope = '{SCOPE}' AND state = 'working' "
        f"AND created_at >= timestamp '{cutoff.isoformat()}'",
        columns=["id", "embedding"],
    )
    clusters = 0
    if len(rows) >= cons.min_cluster_size:
        vectors = np.asarray([r["embedding"] for r in rows], dtype=np.float32)
        found = cosine_clusters(vectors, threshold=cons.threshold, linkage=cons.linkage)  # type: ignore[arg-type]
        clusters = sum(1 for c in found if len(c) >= cons.min_cluster_size)
    return time.perf_counter() - start, clusters


def run_size(
    n: int,
    queries: Sequence[str],
    *,
    single: int = 50,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Measure one store of `n` memories (see the module docstring)."""
    from octobrain.brain import Brain

    def say(step: str) -> None:
        if progress is not None:
            progress(f"{n:,}: {step}")

    config = Config()
    embedder = get_embedder(STORE_MODEL, batch_size=256)
    memories = make_memories(n)
    result: dict[str, Any] = {"memories": n}
    with tempfile.TemporaryDirectory(prefix="octobrain-scale-") as tmp:
        brain = Brain(SCOPE, config=config, embedder=embedder, uri=tmp)
        say("batch import")
        start = time.perf_counter()
        for i in range(0, n, 256):  # the batch of `memory import`: one commit per 256
            batch = memories[i : i + 256]
            brain.store.add(batch, embedder.embed_documents([m.searchable_text() for m in batch]))
        brain.store.compact()
        result["import_per_s"] = n / (time.perf_counter() - start)
        say("first remember (mirror build)")
        brain.remember(queries[0], record_access=False)
        say("memorize one by one")
        start = time.perf_counter()
        for m in make_memories(single, seed=n + 1):
            brain.memorize(m.title, m.content, tags=m.tags, memory_type=m.memory_type)
        result["memorize_per_s"] = single / (time.perf_counter() - start)
        brain.remember(queries[0], record_access=False)  # catch the mirror up
        say("remember")
        plain, filtered = [], []
        for q in queries:
            start = time.perf_counter()
            brain.remember(q, record_access=False)
            plain.append((time.perf_counter() - start) * 1000.0)
        for i, q in enumerate(queries):
            start = time.perf_counter()
            brain.remember(
                q,
                memory_types=[_TYPES[i % len(_TYPES)].value],
                tags=[_TAGS[i % len(_TAGS)]],
                record_access=False,
            )
            filtered.append((time.perf_counter() - start) * 1000.0)
        result["remember_p50_ms"] = _pct(plain, 50)
        result["remember_p95_ms"] = _pct(plain, 95)
        result["remember_filtered_p50_ms"] = _pct(filtered, 50)
        say("sleep pass")
        result["sleep_seconds"], result["sleep_clusters"] = _sleep_pass_seconds(brain, config)
        result["store_mb"] = _dir_mb(Path(tmp))
        say("cold start")
        result.update(_serve(tmp, queries[1 % len(queries)]))
    return result


# A new process that serves the store: what a restarted MCP server pays, and what it holds.
_SERVE = """
import json, sys, time
from octobrain.bench_beir import peak_rss_mb
from octobrain.brain import Brain
from octobrain.config import Config
from octobrain.embed import get_embedder
embedder = get_embedder(sys.argv[3])
start = time.perf_counter()
Brain(sys.argv[1], config=Config(), embedder=embedder, uri=sys.argv[2]).remember(
    sys.argv[4], record_access=False
)
with open(sys.argv[5], "w", encoding="utf-8") as out:
    json.dump({"cold_start_ms": (time.perf_counter() - start) * 1000.0,
               "serving_rss_mb": peak_rss_mb()}, out)
"""


def _serve(uri: str, query: str) -> dict[str, float]:
    """Cold start to the first result, and peak RSS, of a fresh process on the store."""
    result = Path(uri) / "serve.json"
    subprocess.run(
        [sys.executable, "-c", _SERVE, SCOPE, uri, STORE_MODEL, query, str(result)],
        capture_output=True,
        check=True,
    )
    return {k: float(v) for k, v in json.loads(result.read_text(encoding="utf-8")).items()}


def run_scale(
    sizes: Sequence[int],
    *,
    queries: int = 200,
    model: str = "minilm",
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Every size in turn, plus the query-embedding cost of `model`."""
    texts = make_queries(queries)
    embed_ms = query_embedding_ms(model, texts[:50])
    rows = []
    for n in sizes:
        row = run_size(n, texts, progress=progress)
        row["query_embedding_p50_ms"] = embed_ms
        rows.append(row)
    return {
        "model": STORE_MODEL,
        "query_model": get_embedder(model).model_id,
        "machine": f"{os.uname().machine}, {os.cpu_count()} CPUs",
        "notes": (
            f"Stored and query vectors from `{STORE_MODEL}`; add the query-embedding p50 of "
            f"`{get_embedder(model).model_id}` to remember for the real model. Sleep pass = "
            "clustering the scope's recent working memories (max_age_days) at the configured "
            "threshold. Cold start = a new process (imports done, model loaded) opening the "
            "store to its first result (LanceDB open, mirror build); RSS = that process's peak."
        ),
        "sizes": rows,
    }
