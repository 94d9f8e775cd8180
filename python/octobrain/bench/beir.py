"""`octobrain bench beir`: BEIR quality and speed through the product's own search path.

The corpus goes into a fresh store the way a user's data does: the knowledge path bulk-imports
one document per passage (`Knowledge.index_texts`, chunked and embedded like any source with the
default `[knowledge]` chunk sizes; `whole_passages` makes each passage one chunk, as before the
section ranking, for the ablation), the memory path imports one memory per
passage (title and text). Every query then runs through `Knowledge.search` / `Brain.remember`
with a threshold of 0 and a limit of 100, once per retrieval mode. A mode is a set of `[search]`
settings over the default config, so each row of the ablation table is a configuration a user
could run.

Document embeddings go through `CachedEmbedder` (by model and text hash), so a second run does
not re-embed the corpus. Query vectors are memoised in-process, so every mode after the first
measures search alone; the query embedding's own p50 is reported once.
"""

from __future__ import annotations

import platform
import resource
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from octobrain.bench.datasets import BeirDataset, evaluate
from octobrain.config import Config, HydeConfig, KnowledgeConfig, SearchConfig
from octobrain.embed.base import Embedder, EmbedderView, Vectors
from octobrain.embed.cache import CachedEmbedder
from octobrain.embed.factory import get_embedder
from octobrain.errors import InvalidInput
from octobrain.store import seen

__all__ = ["MODES", "BeirReport", "ModeResult", "mode_config", "peak_rss_mb", "run_beir"]

DEPTH = 100  # results per query: enough for Recall@100
SCOPE = "bench/beir"

_OFF = HydeConfig(enabled=False)
_ON = HydeConfig(enabled=True)

# name → what it changes in the default `[search]` section ("default" changes nothing).
MODES: dict[str, dict[str, Any]] = {
    "bm25": {"vector_weight": 0.0, "hyde": _OFF},
    "dense": {"bm25_weight": 0.0, "hyde": _OFF},
    "dense+hyde": {"bm25_weight": 0.0, "hyde": _ON},
    "rrf": {"fusion": "rrf", "hyde": _OFF},
    "rrf+hyde": {"fusion": "rrf", "hyde": _ON},
    "minmax": {"fusion": "minmax", "hyde": _OFF},
    "minmax+hyde": {"fusion": "minmax", "hyde": _ON},
    "zscore": {"fusion": "zscore", "hyde": _OFF},
    "zscore+hyde": {"fusion": "zscore", "hyde": _ON},
    "default": {},
}


def mode_config(base: Config, mode: str) -> Config:
    """`base` with the `[search]` changes of `mode` (see `MODES`)."""
    if mode not in MODES:
        raise InvalidInput("modes", f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    search: SearchConfig = replace(base.search, **MODES[mode])
    return replace(base, search=search)


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024  # bytes vs KiB


@dataclass(frozen=True)
class ModeResult:
    """Quality and search latency of one retrieval mode."""

    mode: str
    ndcg_at_10: float
    recall_at_10: float
    recall_at_100: float
    mrr_at_10: float
    search_p50_ms: float
    search_p95_ms: float


@dataclass
class BeirReport:
    """Everything one `bench beir` run measured (see `as_dict` for the JSON shape)."""

    dataset: str
    path: str
    model: str
    docs: int
    queries: int
    rows: int = 0
    ingest_seconds: float = 0.0
    embedded: int = 0
    cached: int = 0
    mirror_seconds: float = 0.0
    query_embedding_p50_ms: float = 0.0
    peak_rss_mb: float = 0.0
    machine: str = field(default_factory=lambda: f"{platform.machine()}, {_cpus()} CPUs")
    modes: list[ModeResult] = field(default_factory=list)

    @property
    def docs_per_second(self) -> float:
        """Ingest throughput (embedding included, unless the cache had every text)."""
        return self.docs / self.ingest_seconds if self.ingest_seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for JSON output."""
        out = asdict(self)
        out["docs_per_second"] = self.docs_per_second
        return out


def _cpus() -> int:
    import os

    return os.cpu_count() or 1


class _QueryMemo(EmbedderView):
    """An `Embedder` view that embeds each distinct query once per process."""

    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self.memo: dict[str, Vectors] = {}
        self.timings: list[float] = []

    def embed_query(self, query: str | Sequence[str]) -> Vectors:
        items = [query] if isinstance(query, str) else list(query)
        for text in items:
            if text not in self.memo:
                start = time.perf_counter()
                self.memo[text] = self.inner.embed_query(text)
                self.timings.append(time.perf_counter() - start)
        rows = np.stack([self.memo[t] for t in items])
        out: Vectors = rows[0] if isinstance(query, str) else rows
        return out


Searcher = Callable[[str], list[str]]
Tick = Callable[[int], None]


def _knowledge(
    dataset: BeirDataset,
    titles: Sequence[str],
    config: Config,
    embedder: Embedder,
    uri: Path,
    whole_passages: bool = False,
    fit_chunks: bool = True,
) -> tuple[Any, Callable[[Config, Tick], int], Callable[[Config], Searcher]]:
    from octobrain.knowledge import Knowledge

    # By default a passage is chunked like any document (a long one becomes one section of
    # several chunks); `whole_passages` keeps each passage one chunk, truncated by the model.
    knowledge_cfg = (
        replace(
            config.knowledge, chunk_size=1_000_000, parent_size=1_000_000, chunk_fit_model=False
        )
        if whole_passages
        else replace(config.knowledge, chunk_fit_model=fit_chunks)
    )
    base = replace(config, knowledge=knowledge_cfg)
    kb = Knowledge(SCOPE, config=base, embedder=embedder, uri=uri)
    prefix = "beir://doc/"

    def ingest(cfg: Config, tick: Tick) -> int:
        docs = [
            (f"{prefix}{doc_id}", title, body)
            for doc_id, title, body in zip(dataset.doc_ids, titles, _bodies(dataset), strict=True)
        ]
        done = [0]

        def progress(n: int, _total: int) -> None:
            tick(n - done[0])
            done[0] = n

        return kb.index_texts(docs, progress=progress)

    def searcher(cfg: Config) -> Searcher:
        kb.config = replace(cfg, knowledge=knowledge_cfg)

        def search(query: str) -> list[str]:
            result = kb.search(query, limit=DEPTH, min_relevance=0.0)
            return [h.uri[len(prefix) :] for h in result.hits]

        return search

    return kb, ingest, searcher


def _bodies(dataset: BeirDataset) -> list[str]:
    return dataset.doc_bodies or dataset.doc_texts


def _memory(
    dataset: BeirDataset, titles: Sequence[str], config: Config, embedder: Embedder, uri: Path
) -> tuple[Any, Callable[[Config, Tick], int], Callable[[Config], Searcher]]:
    from octobrain.memory.brain import Brain
    from octobrain.models import Memory

    brain = Brain(SCOPE, config=config, embedder=embedder, uri=uri)
    id_of: dict[str, str] = {}

    def ingest(cfg: Config, tick: Tick) -> int:
        memories = []
        for doc_id, title, body in zip(dataset.doc_ids, titles, _bodies(dataset), strict=True):
            short = title.encode("utf-8")[:200].decode("utf-8", "ignore").strip()
            content = body if len(body.encode("utf-8")) >= 10 else f"{title}. {body}".strip()
            memory = Memory(title=short if len(short) >= 5 else f"doc {doc_id}", content=content)
            memories.append(memory)
            id_of[memory.id] = doc_id
        for start in range(0, len(memories), 256):  # the batch size of `memory import`
            batch = memories[start : start + 256]
            vectors = brain.embedder.embed_documents([m.searchable_text() for m in batch])
            brain.store.add(batch, vectors)
            tick(len(batch))
        brain.store.compact()
        return len(memories)

    def searcher(cfg: Config) -> Searcher:
        brain.config = cfg
        brain.retriever.config = cfg

        def search(query: str) -> list[str]:
            recall = brain.remember(query, limit=DEPTH, min_relevance=0.0, record_access=False)
            return [id_of[h.memory.id] for h in recall.hits]

        return search

    return brain, ingest, searcher


def run_beir(
    dataset: BeirDataset,
    *,
    dataset_name: str,
    path: str = "knowledge",
    modes: Sequence[str] = tuple(MODES),
    model: str = "minilm",
    cache_dir: Path | None = None,
    store_dir: Path | None = None,
    whole_passages: bool = False,
    fit_chunks: bool = True,
    on_ingest: Callable[[int, int], None] | None = None,
    on_query: Callable[[str, int, int], None] | None = None,
) -> BeirReport:
    """Ingest `dataset` through `path` ("knowledge" or "memory") and evaluate every mode.

    `whole_passages` indexes each passage as one chunk (knowledge path only); `fit_chunks`
    False cuts chunks by bytes alone, not also to the model's input window (ablation).
    `on_ingest(done, total)` and `on_query(mode, done, total)` drive progress bars.
    """
    if path not in ("knowledge", "memory"):
        raise InvalidInput("path", "must be knowledge or memory")
    for mode in modes:
        mode_config(Config(), mode)  # unknown modes fail before any slow work
    cached = CachedEmbedder(get_embedder(model, batch_size=64), cache_dir)
    embedder = _QueryMemo(cached)
    base = Config()
    config = replace(
        base,
        search=replace(base.search, max_results=DEPTH),
        knowledge=replace(KnowledgeConfig(), max_results=DEPTH),
    )
    report = BeirReport(dataset_name, path, cached.model_id, len(dataset.doc_ids), 0)
    queries = list(zip(dataset.query_ids, dataset.query_texts, strict=True))
    report.queries = len(queries)
    titles = dataset.doc_titles or [""] * len(dataset.doc_ids)
    with seen.scratch("octobrain-beir-") as tmp:
        uri = store_dir if store_dir is not None else Path(tmp)
        if path == "knowledge":
            _, ingest, searcher = _knowledge(
                dataset, titles, config, embedder, uri, whole_passages, fit_chunks
            )
        else:
            _, ingest, searcher = _memory(dataset, titles, config, embedder, uri)
        done = [0]

        def tick(n: int) -> None:
            done[0] += n
            if on_ingest is not None:
                on_ingest(done[0], report.docs)

        start = time.perf_counter()
        report.rows = ingest(config, tick)
        report.ingest_seconds = time.perf_counter() - start
        report.embedded, report.cached = cached.misses, cached.hits
        # The first search builds the in-process mirror (BM25 index, embedding matrix).
        first = searcher(config)
        start = time.perf_counter()
        first(queries[0][1] if queries else "warm up")
        report.mirror_seconds = time.perf_counter() - start
        qrels = {q: dataset.qrels[q] for q, _ in queries}
        for mode in modes:
            search = searcher(mode_config(config, mode))
            run: dict[str, list[str]] = {}
            latencies: list[float] = []
            for i, (qid, text) in enumerate(queries):
                embedder.embed_query(text)  # outside the timing: memoised after the first mode
                start = time.perf_counter()
                run[qid] = search(text)
                latencies.append((time.perf_counter() - start) * 1000.0)
                if on_query is not None:
                    on_query(mode, i + 1, len(queries))
            metrics = evaluate(run, qrels)
            p50, p95 = np.percentile(latencies, [50, 95]) if latencies else (0.0, 0.0)
            report.modes.append(
                ModeResult(
                    mode,
                    metrics["ndcg@10"],
                    metrics["recall@10"],
                    metrics["recall@100"],
                    metrics["mrr@10"],
                    float(p50),
                    float(p95),
                )
            )
    if embedder.timings:
        report.query_embedding_p50_ms = float(np.percentile(embedder.timings, 50) * 1000.0)
    report.peak_rss_mb = peak_rss_mb()
    cached.close()
    return report
