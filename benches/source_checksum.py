"""What checking a knowledge source's checksum costs: the CRC-32 of a source row whose text is
`--mb` MB (`schema.source_checksum`, what `knowledge match` and `read` take of each source they
show), and `knowledge match` over one such source with the check and without it, alternated.

    python benches/source_checksum.py --mb 8,46 --runs 21
    PYTHONPATH=<another checkout>/python python benches/source_checksum.py   # that code's

The store is made in a temporary directory with the `hash:64` embedder (the match reads stored
text and never embeds); the match is measured on the first size that one source may hold
(`knowledge.max_source_chunks`), the larger ones only summed.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

WORDS = ["alpha", "beta", "gamma", "delta", "service", "port", "cache", "queue", "worker"]


def _text(megabytes: float) -> str:
    """Markdown prose of about `megabytes` MB: a heading every 40 lines."""
    rng, lines, size = random.Random(1), ["# Big", ""], 0
    while size < megabytes * 1_000_000:
        n = len(lines)
        line = f"## Section {n}" if n % 40 == 0 else " ".join(rng.choices(WORDS, k=14)) + f" {n}."
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines) + "\n"


def _ms(times: list[float]) -> float:
    return round(statistics.median(times) * 1000, 1)


def _median_ms(fn: Callable[[], Any], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return _ms(times)


def _sums(text: str, runs: int) -> float:
    from octobrain.store import schema
    from octobrain.times import utcnow

    row: dict[str, Any] = {name: "x" for name in schema.SOURCE_CHECKED}
    row.update(text=text, indexed_at=utcnow())
    return _median_ms(lambda: schema.source_checksum(row), runs)


def _matches(text: str, runs: int, root: Path) -> tuple[float, float]:
    """Medians of `knowledge match` over one source of `text`: checked, unchecked."""
    from octobrain.config import Config
    from octobrain.embed.factory import get_embedder
    from octobrain.knowledge import grep
    from octobrain.knowledge.service import Knowledge

    config = Config()
    knowledge = Knowledge(
        "bench/checksum", config=config, embedder=get_embedder("hash:64"), uri=root / "db"
    )
    knowledge.index_texts([("file:///big.md", "Big", text)])
    knowledge.match("no such words")  # the tables opened
    # `match` checks each text in `grep.source_texts`, through the name `grep` imported
    checked, unchecked = grep.check_knowledge, lambda row, table: None
    times: dict[str, list[float]] = {"checked": [], "unchecked": []}
    for i in range(runs):
        order = [("checked", checked), ("unchecked", unchecked)]
        for name, check in order if i % 2 else order[::-1]:
            grep.check_knowledge = check  # type: ignore[assignment]
            start = time.perf_counter()
            knowledge.match("port 8440", max_matches=10)
            times[name].append(time.perf_counter() - start)
    grep.check_knowledge = checked
    return _ms(times["checked"]), _ms(times["unchecked"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", default="8,46", help="text sizes, MB, comma-separated")
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    sizes = [float(s) for s in args.mb.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["OCTOBRAIN_DATA_DIR"] = str(Path(tmp) / "data")  # no mark of this store
        print("| text | checksum | match checked | match unchecked |")
        print("|---|---|---|---|")
        for at, megabytes in enumerate(sizes):
            text = _text(megabytes)
            matched = ("", "")
            if at == 0:
                checked, unchecked = _matches(text, args.runs, Path(tmp))
                matched = (f"{checked} ms", f"{unchecked} ms")
            summed = _sums(text, args.runs)
            print(f"| {megabytes:g} MB | {summed} ms | {matched[0]} | {matched[1]} |")


if __name__ == "__main__":
    main()
