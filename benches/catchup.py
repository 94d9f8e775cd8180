"""How long the in-process mirror takes to catch up with one commit, by kind of commit and size.

A reader (one `Brain`, its mirror built and current) and a writer (another `Brain` on the same
store: its own connection, as another process would be) share a store of `bench scale`
memories. Each round the writer (or the reader itself) commits one change, then the reader's
`Corpus.refresh()` is timed: what the next call of a warm process pays before it answers.

    python benches/catchup.py --sizes 10000,100000 --rounds 7
    python benches/catchup.py --sizes 100000 --store-dir /tmp/catchup   # keep / reuse the stores
    python benches/catchup.py --clone-from DIR/1000000/db --model hash:384 --store-dir /tmp/c1m

The store uses the deterministic `hash:256` embedder: the catch-up reads stored rows and never
embeds, so the figures do not depend on the model. `--clone-from` measures a store that
`bench scale --store-dir` kept (1M memories take long to write) through a LanceDB shallow clone:
the clone's commits go to its own directory, the kept store is only read. No maintenance
pass (compaction, every 64 commits) runs during the measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

MODEL = "hash:256"
TABLES = ("memories", "relationships")


def _median_ms(times: list[float]) -> float:
    return round(statistics.median(times) * 1000, 1)


def _build(db: Path, n: int, model: str, clone_from: Path | None) -> None:
    from octobrain.bench.cold import build_store

    if (db / "db").exists():
        return
    if clone_from is not None:
        import lancedb

        target = lancedb.connect(db / "db")
        for name in TABLES:
            target.clone_table(name, str(clone_from / f"{name}.lance"))
        return
    build_store(db, n, model, lambda msg: print(msg, flush=True), distinct=256)


def run(
    n: int, rounds: int, where: Path, model: str = MODEL, clone_from: Path | None = None
) -> dict[str, float]:
    from octobrain.config import Config
    from octobrain.embed.factory import get_embedder
    from octobrain.memory.brain import Brain
    from octobrain.store import upkeep
    from octobrain.times import utcnow

    upkeep.COMPACT_EVERY = 10**9  # no maintenance pass mid-measurement
    # Before the store is made: its mark, snapshots and caches stay beside it, out of the
    # user's data dir.
    os.environ["OCTOBRAIN_DATA_DIR"] = str(where / "data")
    _build(where, n, model, clone_from)
    embedder = get_embedder(model)
    config = Config()  # (a Brain starts no sleep pass by itself)
    uri = where / "db"
    reader = Brain("bench/scale", config=config, embedder=embedder, uri=uri)
    writer = Brain("bench/scale", config=config, embedder=embedder, uri=uri)
    corpus = reader.retriever.corpus
    started = time.perf_counter()
    corpus.refresh()
    corpus.wait_for_snapshot()
    n = len(corpus)
    print(f"{n:,}: mirror ready in {time.perf_counter() - started:.1f} s", flush=True)
    counter = iter(range(10**9))

    def memorize(brain: Brain) -> Callable[[], None]:
        def go() -> None:
            i = next(counter)
            brain.memorize(
                f"catch-up probe {i}",
                f"a memory written to time the mirror's catch-up, number {i}",
                memory_type="learning",
            )

        return go

    def bump() -> None:
        ids = corpus.rows().column("id").to_pylist()
        mid = ids[next(counter) % len(ids)]
        writer.store.record_access([mid], utcnow(), min_interval=timedelta(0))

    def forget() -> None:
        mine = writer.store.scan("title LIKE 'catch-up probe %'", columns=["id"], limit=1)
        writer.forget([mine[0]["id"]], confirm=True)

    kinds: dict[str, Callable[[], None]] = {
        "nothing new": lambda: None,
        "own memorize": memorize(reader),
        "other memorize": memorize(writer),
        "other access bump": bump,
        "other forget": forget,
    }
    out: dict[str, float] = {"memories": float(n)}
    for kind, change in kinds.items():
        times, ways = [], set()
        for _ in range(rounds):
            change()
            t0 = time.perf_counter()
            corpus.refresh()
            times.append(time.perf_counter() - t0)
            ways.add(getattr(corpus, "last_catch_up", "") or "-")
            corpus.wait_for_snapshot()
        out[kind] = _median_ms(times)
        print(f"{n:,} {kind}: median {out[kind]} ms of {rounds} ({', '.join(sorted(ways))})")
    try:  # what the catch-up's listing of changed row addresses costs by itself
        from octobrain.memory.catchup import above
    except ImportError:  # (an older octobrain: no such listing)
        return out
    times = []
    for _ in range(rounds):
        pinned = reader.store.pinned(reader.store.version())
        t0 = time.perf_counter()
        pinned.changes(above(corpus._mark))
        times.append(time.perf_counter() - t0)
    out["address listing alone"] = _median_ms(times)
    print(f"{n:,} address listing alone: median {out['address listing alone']} ms")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--store-dir", type=Path, default=None, help="keep the stores here")
    parser.add_argument("--output", type=Path, default=None, help="write the medians as JSON")
    parser.add_argument("--model", default=MODEL, help="the embedder (a cloned store's own)")
    parser.add_argument("--clone-from", type=Path, default=None, help="a kept store's db dir")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    results = {}
    if args.clone_from is not None:
        if args.store_dir is None:
            parser.error("--clone-from needs --store-dir (the clone is made there)")
        results["clone"] = run(0, args.rounds, args.store_dir, args.model, args.clone_from)
        sizes = []
    for n in sizes:
        if args.store_dir is not None:
            results[str(n)] = run(n, args.rounds, args.store_dir / str(n), args.model)
        else:
            with tempfile.TemporaryDirectory(prefix="octobrain-catchup-") as tmp:
                results[str(n)] = run(n, args.rounds, Path(tmp), args.model)
    load = os.getloadavg()
    payload = {"model": args.model, "rounds": args.rounds, "loadavg": load, "median_ms": results}
    text = json.dumps(payload, indent=1)
    print(text)
    if args.output is not None:
        args.output.write_text(text + "\n")


if __name__ == "__main__":
    main()
