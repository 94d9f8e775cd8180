"""A process serving a `bench scale` store from its snapshot, looked at closely.

After `octobrain bench scale --sizes 1000000 --store-dir DIR`, the store is DIR/1000000/db and
its snapshot DIR/1000000/serving (run with OCTOBRAIN_DATA_DIR pointing there):

    OCTOBRAIN_DATA_DIR=DIR/1000000/serving python benches/scale_serving.py rss DIR/1000000/db
    ... probes DIR/1000000/db 64x5,128x5   # ANN recall@10 and latency per nprobes x refine
    ... probes DIR/1000000/db 128x5,128x5p # the same, unfiltered and with LanceDB's prefilter
    ... profile DIR/1000000/db             # where 60 warm remember calls spend their time

`rss`: resident memory by mapped file after the 200 queries `bench scale` times. `probes`: the
vector leg's recall@10 against an exact scan on the bench's queries and on a second, disjoint
set (seed 23), 60 queries each.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import math
import pstats
import statistics
import time
from pathlib import Path

from octobrain.bench.scale import make_queries
from octobrain.bench.scale_serve import SCOPE, STORE_MODEL
from octobrain.config import Config
from octobrain.embed.factory import get_embedder
from octobrain.kernels.hybrid import exact_top
from octobrain.memory import ann, search
from octobrain.memory.brain import Brain
from octobrain.store.lancedb_import import import_lancedb
from octobrain.store.sql import Sight


def _open(store: str) -> Brain:
    import_lancedb()  # before the clock, as in bench scale

    start = time.perf_counter()
    brain = Brain(SCOPE, config=Config(), embedder=get_embedder(STORE_MODEL), uri=store)
    brain.remember(make_queries(1)[0], record_access=False)
    opened = brain.retriever.corpus.opened_snapshot
    print(f"cold start {(time.perf_counter() - start) * 1000:.0f} ms, from snapshot: {opened}")
    return brain


def rss(store: str) -> None:
    brain = _open(store)
    for q in make_queries(200)[1:]:
        brain.remember(q, record_access=False)
    by: collections.Counter[str] = collections.Counter()
    name = "?"
    for line in Path("/proc/self/smaps").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 5 and "-" in parts[0] and ":" not in parts[0]:
            path = parts[5] if len(parts) > 5 else ""
            name = (
                Path(path).name
                if "snapshots" in path
                else ("heap" if not path or path.startswith("[") else "libraries, other files")
            )
        elif parts and parts[0] == "Rss:":
            by[name] += int(parts[1])
    for what, kib in by.most_common(12):
        print(f"{kib / 1024:8.0f} MiB  {what}")
    status = Path("/proc/self/status").read_text().splitlines()
    print(*[line for line in status if line.startswith(("VmHWM", "RssAnon", "RssFile"))], sep="\n")


def probes(store: str, combos: str) -> None:
    brain = _open(store)
    corpus, retriever = brain.retriever.corpus, brain.retriever
    allowed = corpus.allowed(Sight(SCOPE))
    where = search.Filters().where(Sight(SCOPE))
    want = brain.config.search.candidates
    share = ann.ANN_POSTFILTER_SHARE
    for seed in (11, 23):
        vectors = [brain.embedder.embed_query([q])[0] for q in make_queries(60, seed=seed)]
        exact = [exact_top(corpus.vectors.cosines(v), allowed, 10) for v in vectors]
        for combo in combos.split(","):
            # A trailing "p" (e.g. 128x5p): always LanceDB's prefilter, never the mirror's mask.
            ann.ANN_POSTFILTER_SHARE = math.inf if combo.endswith("p") else share
            ann.ANN_NPROBES, ann.ANN_REFINE = (int(x) for x in combo.rstrip("p").split("x"))
            times, recalls = [], []
            for vector, best in zip(vectors, exact, strict=True):
                start = time.perf_counter()
                got = retriever._ann(vector, where, want, allowed)[:10]
                times.append((time.perf_counter() - start) * 1000)
                recalls.append(len(set(got) & set(best)) / 10)
            print(
                f"queries seed {seed}, {combo}: recall@10 {statistics.mean(recalls):.3f}, "
                f"p50 {statistics.median(times):.1f} ms"
            )


def profile(store: str) -> None:
    brain = _open(store)
    queries = make_queries(200)
    for q in queries[1:60]:  # the first blocks read are verified: warm up past them
        brain.remember(q, record_access=False)
    profiler = cProfile.Profile()
    profiler.enable()
    for q in queries[60:120]:
        brain.remember(q, record_access=False)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["rss", "probes", "profile"])
    parser.add_argument("store")
    parser.add_argument("combos", nargs="?", default="64x5,64x10,64x20,128x5,128x10,32x20")
    args = parser.parse_args()
    if args.what == "probes":
        probes(args.store, args.combos)
    else:
        {"rss": rss, "profile": profile}[args.what](args.store)


if __name__ == "__main__":
    main()
