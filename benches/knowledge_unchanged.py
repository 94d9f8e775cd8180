"""What `knowledge index` of an unchanged file costs beside many chunks: the file read, its
hash compared and (since an unchanged source is checked before it is left as it is) its
source row and chunks checked against their checksums; and what `knowledge stats` over them
costs (every source row read with its text, which its checksum covers).

    python benches/knowledge_unchanged.py --docs 1000 --sections 2000 --runs 7
    PYTHONPATH=<another checkout>/python python benches/knowledge_unchanged.py   # that code's

The store is made in a temporary directory with the `hash:64` embedder: `--docs` documents
of 16 chunks each, a one-chunk file and a file of `--sections` chunks (about 750 bytes each);
each file is indexed once, then again `--runs` times, each answered `unchanged`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

PARA = "The service listens on a port and keeps its state in a table of rows. " * 18


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--sections", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        os.environ.update(OCTOBRAIN_DATA_DIR=root, OCTOBRAIN_EMBEDDING_MODEL="hash:64")
        from octobrain.knowledge import Knowledge

        k = Knowledge("github.com/acme/api", uri=Path(root) / "db")
        body = "\n\n".join(f"# Part {j}\n\n{PARA}" for j in range(8))
        k.index_texts([(f"bench://doc{i}", f"Doc {i}", body) for i in range(args.docs)])
        small, big = Path(root) / "small.md", Path(root) / "big.md"
        small.write_text("# Ports\n\nThe api service listens on port 8440.\n")
        line = "Some words about port 8440 and more. " * 20
        big.write_text("\n\n".join(f"# Section {j}\n\n{line}" for j in range(args.sections)))
        for path in (small, big):
            k.index(str(path))
        print(f"{k.kstore.count_chunks():,} chunks stored")
        for path in (small, big):
            times = []
            for _ in range(args.runs):
                start = time.perf_counter()
                report = k.index(str(path))
                times.append(time.perf_counter() - start)
                assert report.status == "unchanged", report.status
            chunks, size = report.source.chunk_count, path.stat().st_size / 1e6
            median = statistics.median(times) * 1000
            print(f"{path.name}: {chunks:,} chunks, {size:.1f} MB: median {median:.1f} ms")
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            stats = k.stats()
            times.append(time.perf_counter() - start)
        median = statistics.median(times) * 1000
        print(f"knowledge stats of {stats.sources:,} sources: median {median:.1f} ms")


if __name__ == "__main__":
    main()
