"""`remember` latency at 1k and 10k memories, through the real facade, with the real model.

Memories are SciFact abstracts (title + first sentences), bulk-loaded into a fresh LanceDB store;
queries are SciFact claims. Reports p50/p95 of the whole `remember` call and of its parts.
Embeddings of the corpus are cached under benches/.cache so a second run only measures search.

    python benches/remember_latency.py --data ../shared/data/scifact --sizes 1000 10000
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import time
from pathlib import Path

import numpy as np

from octobrain.bench.datasets import load_beir
from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.memory.brain import Brain
from octobrain.models import Memory
from octobrain.store import seen
from report import check_update, publish

CACHE = Path(__file__).parent / ".cache"


def _memories(data: Path, n: int) -> list[Memory]:
    """`n` memory-sized notes: SciFact abstracts cut into ~400-character parts at sentences."""
    dataset = load_beir(data)
    out: list[Memory] = []
    for text in dataset.doc_texts:
        title, _, body = text.partition(". ")
        part, parts = "", []
        for sentence in body.split(". "):
            if len(part) + len(sentence) > 400 and part:
                parts.append(part)
                part = ""
            part += sentence + ". "
        parts.append(part)
        for i, content in enumerate(p for p in parts if len(p.strip()) >= 10):
            out.append(
                Memory(title=f"{title[:180] or 'untitled'} ({i + 1})", content=content.strip())
            )
            if len(out) == n:
                return out
    raise SystemExit(f"the corpus yields only {len(out)} memories; ask for fewer")


def _vectors(embedder_id: str, texts: list[str], embed: object) -> np.ndarray:
    key = hashlib.sha256((embedder_id + "\0" + "\0".join(texts)).encode()).hexdigest()[:16]
    path = CACHE / f"{key}.npy"
    if path.exists():
        return np.load(path)
    CACHE.mkdir(exist_ok=True)
    vectors = embed(texts)  # type: ignore[operator]
    np.save(path, vectors)
    return vectors


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def run(data: Path, size: int, queries: list[str], model: str) -> dict[str, object]:
    embedder = get_embedder(model, batch_size=64)
    memories = _memories(data, size)
    vectors = _vectors(
        embedder.model_id, [m.searchable_text() for m in memories], embedder.embed_documents
    )
    with seen.scratch("octobrain-remember-") as tmp:  # (no mark of its store left behind)
        brain = Brain("bench/remember", config=Config(), embedder=embedder, uri=tmp)
        for start in range(0, size, 1000):
            brain.store.add(memories[start : start + 1000], vectors[start : start + 1000])
        brain.store.compact()
        brain.remember(queries[0])  # warm: first mirror build, model session
        totals, embeds = [], []
        for q in queries:
            t0 = time.perf_counter()
            embedder.embed_query(q)
            t1 = time.perf_counter()
            brain.remember(q, record_access=False)
            t2 = time.perf_counter()
            embeds.append((t1 - t0) * 1000)
            totals.append((t2 - t1) * 1000)
        # With access recording on, as users call it: the call queues its accesses and the
        # background commit (once a second) runs on the same cores meanwhile.
        with_access = []
        for q in queries:
            t0 = time.perf_counter()
            brain.remember(q)
            with_access.append((time.perf_counter() - t0) * 1000)
        brain.flush()
    return {
        "memories": size,
        "queries": len(queries),
        "remember_p50_ms": round(_pct(totals, 50), 1),
        "remember_p95_ms": round(_pct(totals, 95), 1),
        "query_embedding_p50_ms": round(statistics.median(embeds), 1),
        "remember_with_access_p50_ms": round(_pct(with_access, 50), 1),
        "remember_with_access_p95_ms": round(_pct(with_access, 95), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data/scifact"))
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--update", type=Path, help="rewrite the table in this README")
    args = parser.parse_args()
    check_update(parser, args.update, "remember")
    dataset = load_beir(args.data)
    queries = dataset.query_texts[: args.queries]
    results = [run(args.data, n, queries, args.model) for n in args.sizes]
    lines = [
        "| memories | remember p50 | remember p95 | query embedding p50 |"
        " with access recording p50 / p95 |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['memories']:,} | {r['remember_p50_ms']} ms | {r['remember_p95_ms']} ms | "
            f"{r['query_embedding_p50_ms']} ms | {r['remember_with_access_p50_ms']} / "
            f"{r['remember_with_access_p95_ms']} ms |"
        )
    publish("\n".join(lines), results, "remember", args.update, args.json)


if __name__ == "__main__":
    main()
