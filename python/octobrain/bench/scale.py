"""`octobrain bench scale`: memorize, import, remember and sleep-pass costs at growing sizes.

Synthetic memories (seeded): a title of 3–8 words and content of 25–140 words drawn from a
Zipf-like vocabulary of topical words, 0–3 tags, a memory type, and a creation time spread over
the last year (so the sleep pass, which looks at the last `max_age_days`, sees a realistic
share of them). All in one scope.

Stored and query vectors come from the `hash:384` embedder (same dimension as the default
model), so the storage and search costs are real while 100k documents need no hours of model
time on a small machine; the default model's query-embedding p50 is measured separately and
reported beside the search latency (remember on the real model = search + embedding).

Sizes from `BULK_FROM` are written in bulk: the same distributions generated with numpy and
written as Arrow batches, their `hash:384` vectors computed as the sum of per-word vectors (the
hash embedder is a bag of words, so this equals embedding each text), so a million memories
take minutes, not hours. Those sizes skip the in-process columns (one-by-one memorize, remember
in the writing process, the sleep pass).

Every size is then served as a user's process would: two fresh processes open the store, the
first without a snapshot (it reads the store, builds the mirror, answers, and writes the
snapshot, after which it reports its peak RSS), the second from it; the second times
`remember`, reports its peak RSS, and then measures the ANN recall@10 of the vector leg against
an exact scan (where the ANN path is in use).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from octobrain.bench.scale_serve import SCOPE, STORE_MODEL, dir_mb, pct, serve
from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.models import Memory, MemoryType
from octobrain.store import seen
from octobrain.times import utcnow

__all__ = ["make_memories", "make_queries", "run_scale"]

BULK_FROM = 200_000
_BULK_CHUNK = 50_000
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


def query_embedding_ms(model: str, queries: Sequence[str]) -> float:
    """p50 of embedding one query with `model` (after one warm-up call)."""
    embedder = get_embedder(model)
    embedder.embed_query("warm up")
    timings = []
    for q in queries:
        start = time.perf_counter()
        embedder.embed_query(q)
        timings.append((time.perf_counter() - start) * 1000.0)
    return pct(timings, 50)


def _sleep_pass_seconds(brain: Any, config: Config) -> tuple[float, int]:
    """The sleep pass's clustering work: recent working memories of the scope, clustered by
    cosine with the configured linkage and threshold. Returns (seconds, clusters)."""
    from octobrain.kernels.clustering import cosine_clusters

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


@contextlib.contextmanager
def _data_dir(path: Path) -> Iterator[None]:
    """Point `OCTOBRAIN_DATA_DIR` (where snapshots live) at `path` for a while."""
    before = os.environ.get("OCTOBRAIN_DATA_DIR")
    os.environ["OCTOBRAIN_DATA_DIR"] = str(path)
    try:
        yield
    finally:
        if before is None:
            del os.environ["OCTOBRAIN_DATA_DIR"]
        else:
            os.environ["OCTOBRAIN_DATA_DIR"] = before


def run_size(
    n: int,
    queries: Sequence[str],
    *,
    single: int = 50,
    progress: Callable[[str], None] | None = None,
    ann_min_rows: int | None = None,
    store_dir: Path | None = None,
    bulk_from: int = BULK_FROM,
) -> dict[str, Any]:
    """Measure one store of `n` memories (see the module docstring); `ann_min_rows` overrides
    `search.ann_min_rows` in the serving processes. A bulk-written store is kept in (and, when
    already there, reused from) `store_dir / str(n)`, so a second run skips the generation; the
    serving processes' data directory is kept beside it, emptied at the start of each run."""
    from octobrain.memory.brain import Brain

    def say(step: str) -> None:
        if progress is not None:
            progress(f"{n:,}: {step}")

    config = Config()
    embedder = get_embedder(STORE_MODEL, batch_size=256)
    result: dict[str, Any] = {"memories": n}
    with seen.scratch("octobrain-scale-") as tmp:
        if n >= bulk_from:
            kept = None if store_dir is None else store_dir / str(n)
            db = Path(tmp) / "db" if kept is None else kept / "db"
            done = None if kept is None else kept / "written.json"
            if done is not None and done.exists():
                say(f"reusing the store in {db}")
                result["bulk_import_per_s"] = json.loads(done.read_text())["per_s"]
            else:
                say("bulk import")
                start = time.perf_counter()
                shutil.rmtree(db, ignore_errors=True)
                seen.forget(str(db))  # made again on purpose, not a store gone (`store.seen`)
                db.parent.mkdir(parents=True, exist_ok=True)
                _bulk_store(db, n, progress=say)
                result["bulk_import_per_s"] = n / (time.perf_counter() - start)
                if done is not None:
                    done.write_text(json.dumps({"per_s": result["bulk_import_per_s"]}))
            result["store_mb"] = dir_mb(db)
            say("cold starts")
            # A kept store keeps its serving data directory too (emptied first), so its snapshot
            # can be opened again after the run.
            serving = Path(tmp) if kept is None else kept
            result.update(serve(db, serving, queries, ann_min_rows))
            return result
        store_dir = Path(tmp) / "db"
        memories = make_memories(n)
        with _data_dir(Path(tmp) / "writer"):
            brain = Brain(SCOPE, config=config, embedder=embedder, uri=store_dir)
            _ = brain.retriever  # its snapshots go to the writer's own data directory
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
        result["remember_p50_ms"] = pct(plain, 50)
        result["remember_p95_ms"] = pct(plain, 95)
        result["remember_filtered_p50_ms"] = pct(filtered, 50)
        say("sleep pass")
        result["sleep_seconds"], result["sleep_clusters"] = _sleep_pass_seconds(brain, config)
        result["store_mb"] = dir_mb(store_dir)
        del brain
        say("cold starts")
        result.update(serve(store_dir, Path(tmp), queries, ann_min_rows))
    return result


def _word_vectors(words: Sequence[str], dim: int) -> np.ndarray:
    """Each word's un-normalised `hash:<dim>` features (zero for the embedder's stopwords)."""
    from octobrain.embed.hashed import _STOPWORDS, HashEmbedder

    embedder = HashEmbedder(dim)
    out = np.zeros((len(words), dim), dtype=np.float64)
    for i, word in enumerate(words):
        if word not in _STOPWORDS:
            out[i] = embedder._embed_batch([word], "document")[0]
    return out


def _bulk_store(uri: Path, n: int, *, progress: Callable[[str], None]) -> None:
    """`n` synthetic memories written as Arrow batches (see the module docstring)."""
    import pyarrow as pa

    from octobrain.models import Source, State
    from octobrain.store import MemoryStore
    from octobrain.store.schema import CHECKED, CHECKSUM, checksum, memories_schema

    dim = get_embedder(STORE_MODEL).dim
    words = _Words(random.Random(7))
    vocab = np.asarray(words.words + _TAGS, dtype=object)
    features = _word_vectors(list(vocab), dim).astype(np.float32)
    tag_base = len(words.words)
    rng = np.random.default_rng(n)
    store = MemoryStore(uri, STORE_MODEL, dim)
    schema = memories_schema(STORE_MODEL, dim)
    now_us = int(utcnow().timestamp() * 1e6)
    types = np.asarray([t.value for t in _TYPES], dtype=object)
    for done in range(0, n, _BULK_CHUNK):
        m = min(_BULK_CHUNK, n - done)
        title_len, content_len = rng.integers(3, 9, m), rng.integers(25, 141, m)
        n_tags = rng.integers(0, 4, m)
        tags = [sorted(rng.choice(len(_TAGS), size=k, replace=False).tolist()) for k in n_tags]
        lengths = title_len + content_len
        picks = np.minimum(
            np.searchsorted(words.cum, rng.random(int(lengths.sum()))), len(words.words) - 1
        )
        ends = np.cumsum(lengths)
        starts = ends - lengths
        titles, contents = [], []
        doc_words = np.empty(int(lengths.sum() + n_tags.sum()), dtype=np.int64)
        bounds = np.zeros(m + 1, dtype=np.int64)
        at = 0
        for i in range(m):
            s, t, e = starts[i], starts[i] + title_len[i], ends[i]
            titles.append(" ".join(vocab[picks[s:t]]).capitalize())
            contents.append(" ".join(vocab[picks[t:e]]) + ".")
            row = np.concatenate([picks[s:e], np.asarray(tags[i], dtype=np.int64) + tag_base])
            doc_words[at : at + len(row)] = row
            at += len(row)
            bounds[i + 1] = at
        vectors = np.empty((m, dim), dtype=np.float32)
        for b in range(0, m, 2000):  # the bag-of-words sum: word counts @ word vectors
            hi = min(b + 2000, m)
            rows = np.repeat(np.arange(hi - b), np.diff(bounds[b : hi + 1]))
            flat = rows * len(vocab) + doc_words[bounds[b] : bounds[hi]]
            counts = np.bincount(flat, minlength=(hi - b) * len(vocab)).astype(np.float32)
            vectors[b:hi] = counts.reshape(hi - b, len(vocab)) @ features
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        created = now_us - (rng.random(m) * 365 * 86400e6).astype(np.int64)
        stamps = pa.array(created, pa.timestamp("us", tz="UTC"))
        columns: dict[str, Any] = {
            "id": [str(uuid.UUID(bytes=rng.bytes(16), version=4)) for _ in range(m)],
            "scope": [SCOPE] * m,
            "role": [""] * m,
            "memory_type": types[rng.integers(0, len(types), m)].tolist(),
            "title": titles,
            "content": contents,
            "tags": [[_TAGS[t] for t in row] for row in tags],
            "related_files": [[] for _ in range(m)],
            "importance": np.full(m, 0.5, dtype=np.float32),
            "pre_consolidation_importance": pa.nulls(m, pa.float32()),
            "source": [Source.AGENT_INFERRED.value] * m,
            "state": [State.WORKING.value] * m,
            "created_at": stamps,
            "updated_at": stamps,
            "last_accessed": stamps,
            "access_count": np.zeros(m, dtype=np.int64),
            "git_commit": [""] * m,
            "context": [""] * m,
        }
        # Stamped as every write path stamps a row (a store without them is read unverified).
        checked = pa.table({name: columns[name] for name in CHECKED}).to_pylist()
        columns[CHECKSUM] = [checksum(row) for row in checked]
        columns["embedding"] = pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dim)
        table = pa.Table.from_pydict(columns, schema=schema)
        store.memories.add(table)
        progress(f"written {done + m:,}")
    progress("indexes (IVF-PQ)")
    store.compact()


def run_scale(
    sizes: Sequence[int],
    *,
    queries: int = 200,
    model: str = "minilm",
    progress: Callable[[str], None] | None = None,
    ann_min_rows: int | None = None,
    store_dir: Path | None = None,
    bulk_from: int = BULK_FROM,
) -> dict[str, Any]:
    """Every size in turn, plus the query-embedding cost of `model`."""
    texts = make_queries(queries)
    embed_ms = query_embedding_ms(model, texts[:50])
    threshold = Config().search.ann_min_rows if ann_min_rows is None else ann_min_rows
    rows = []
    for n in sizes:
        row = run_size(
            n,
            texts,
            progress=progress,
            ann_min_rows=ann_min_rows,
            store_dir=store_dir,
            bulk_from=bulk_from,
        )
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
            "threshold. Cold start = a new process (imports, `import lancedb` included, done "
            "before the clock; embedder loaded) opening the "
            "store to its first result: without a snapshot (LanceDB read, mirror build; the "
            "snapshot is written after the answer, and that first process's peak RSS, the write "
            "included, is its RSS column), then from the snapshot (verify, map, catch up); that "
            "second process then "
            "times remember (fresh process p50) and reports its peak RSS, taken before the ANN "
            "recall@10 of the vector leg is measured against an exact scan (100 queries; ANN "
            f"from `search.ann_min_rows` = {threshold:,} memories). "
            f"Sizes from {bulk_from:,} are bulk-written and skip the in-process columns (—)."
        ),
        "sizes": rows,
    }
