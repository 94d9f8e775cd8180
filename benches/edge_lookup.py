"""Finding the edges of a search's candidates: a scan of the edge table against its id index.

    python benches/edge_lookup.py kernel 100000,1000000
    python benches/edge_lookup.py remember 100000 DIR

`kernel`: a table of N chained edges (random UUID ids, as ingest makes), 200 ids asked; the
median of 5 scans (`kernels.idindex.rows_holding` on both id columns), of 3 index builds and of 5
index lookups (`octobrain.kernels.idindex.IdIndex`). `remember`: N turns ingested into DIR
(kept, so a second run reuses it; `hash:64` vectors), then `remember` (limit 10) p50 over 100
questions with the index off and on, alternating, three rounds in one process.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from octobrain.kernels.idindex import IdIndex, rows_holding


def _median_ms(work: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return 1000.0 * statistics.median(times)


def kernel_one(n: int) -> str:
    """One size of `kernel`: what a scan, a build and a lookup take."""
    ids = [str(uuid.uuid4()) for _ in range(n + 1)]
    table = pa.table({"source_id": ids[1:], "target_id": ids[:-1]})
    wanted = ids[:: max(1, n // 200)][:200]

    def scan() -> pa.Table:
        return rows_holding(table, ["source_id", "target_id"], wanted)

    build = _median_ms(lambda: IdIndex(table, ["source_id", "target_id"]), 3)
    index = IdIndex(table, ["source_id", "target_id"])
    assert index.touching(wanted).equals(scan())
    lookup = _median_ms(lambda: index.touching(wanted), 5)
    return (
        f"{n:,} edges: scan {_median_ms(scan, 5):.1f} ms, index build {build:.1f} ms, "
        f"lookup {lookup:.2f} ms"
    )


def remember(n: int, where: Path) -> None:
    from octobrain.config import Config
    from octobrain.embed.factory import get_embedder
    from octobrain.memory import edges
    from octobrain.memory.brain import Brain
    from octobrain.memory.conversation import parse_text

    words = [
        "garden",
        "shed",
        "roof",
        "nails",
        "tiles",
        "gutter",
        "paint",
        "moss",
        "ladder",
        "fence",
        "gate",
        "path",
    ]
    rng = random.Random(1)
    brain = Brain("bench/edges", config=Config(), embedder=get_embedder("hash:64"), uri=where)
    corpus = brain.retriever.corpus
    corpus.refresh()
    for part in range(len(corpus) // 10_000, n // 10_000):
        said = [
            {
                "speaker": ("Ana", "Bo")[i % 2],
                "session": f"s{part}-{i // 100}",
                "text": " ".join(rng.choice(words) for _ in range(8)) + f" {part}-{i}",
            }
            for i in range(10_000)
        ]
        (conversation,) = parse_text(json.dumps(said))
        conversation.key = f"chat-{part}"
        brain.ingest([conversation])
    corpus.refresh()
    mirror = corpus._edges  # (the mirror's edge table and its index, looked at directly)
    print(f"{len(corpus):,} memories, {len(mirror.table or []):,} edges")
    questions = [" ".join(rng.sample(words, 3)) for _ in range(305)]

    def p50(asked: list[str]) -> float:
        times = []
        for q in asked:
            start = time.perf_counter()
            brain.remember(q, limit=10, min_relevance=0.0, record_access=False)
            times.append(time.perf_counter() - start)
        return 1000.0 * statistics.median(times)

    p50(questions[:20])  # warm
    default = edges.INDEX_FROM_ROWS
    for round_ in range(3):
        asked = questions[round_ * 100 : round_ * 100 + 100]
        edges.INDEX_FROM_ROWS = sys.maxsize  # off: every lookup scans
        mirror._index = None
        scanned = p50(asked)
        edges.INDEX_FROM_ROWS = default
        p50(questions[300:305])  # (scanned until indexed)
        print(f"round {round_ + 1}: scan p50 {scanned:.1f} ms, index p50 {p50(asked):.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["kernel", "remember"])
    parser.add_argument("sizes", help="edge counts (kernel, comma-separated) or turns (remember)")
    parser.add_argument("store", nargs="?", type=Path, help="remember: the store's directory")
    args = parser.parse_args()
    if args.mode == "kernel":
        for size in args.sizes.split(","):
            print(kernel_one(int(size)))
    elif args.store is None:
        parser.error("remember: give the store's directory")
    else:
        remember(int(args.sizes), args.store)


if __name__ == "__main__":
    main()
